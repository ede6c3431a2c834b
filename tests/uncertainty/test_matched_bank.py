"""``matched_rows``: the shipped flag searches a bank as large as the held-out rows' banks.

Reference: a Monte Carlo of the split-conformal keep rule on points drawn uniformly on a sphere, held-out
rows scored against the other folds (as ``head=auto`` does), new points against the whole bank or against a
matched subset; the subset's rows checked by index; and the streamed bank of the kept rows against the
whole bank's rows at those indices.
"""

from __future__ import annotations

import numpy as np
import torch

from ucse.backbone.states import DeviceStates
from ucse.config import CacheDtype
from ucse.core.encoder import EncodedBatch
from ucse.training.neighbours import joint_features, neighbour_distances
from ucse.uncertainty import train_split
from ucse.uncertainty.keep_threshold import keep_threshold
from ucse.uncertainty.train_split import matched_rows, stream_matched_bank


def test_the_subset_is_ascending_distinct_rows_at_the_mean_heldout_size():
    sizes = np.array([40] * 30 + [39] * 20)  # mean 39.6 -> 40 rows
    rows = matched_rows(50, sizes, seed=3)
    assert (
        len(rows) == 40 and rows.tolist() == sorted(set(rows.tolist())) and 0 <= rows.min() <= rows.max() < 50
    )
    np.testing.assert_array_equal(matched_rows(50, sizes, seed=3), rows)  # the seed decides
    assert not np.array_equal(matched_rows(50, sizes, seed=4), rows)
    assert matched_rows(50, np.array([50, 60]), seed=0) is None  # no smaller bank: all of it


class _RowwiseEncoder:
    """Outputs that depend on each row alone (mu: its first state, pooled: its mean), whatever the batch."""

    def run_states(self, states) -> EncodedBatch:
        hidden, mask = states.batch(list(range(len(states))))  # (B, T, H), (B, T)
        m = mask.unsqueeze(-1).float()
        pooled = (hidden * m).sum(1) / m.sum(1)  # (B, H)
        mean = hidden[:, 0].double().numpy()
        return EncodedBatch(mean, None, np.zeros((len(mean), 2)), pooled.double().numpy())


def _states(rng: np.random.Generator, n: int, h: int = 4) -> DeviceStates:
    lengths = rng.integers(1, 6, size=n)
    rows = torch.as_tensor(rng.normal(size=(int(lengths.sum()), h)), dtype=torch.float16)
    return DeviceStates(rows, np.concatenate([[0], np.cumsum(lengths)]), CacheDtype.fp16, "cpu")


def test_the_streamed_bank_is_the_whole_banks_kept_rows_across_both_splits(monkeypatch):
    monkeypatch.setattr(train_split, "FILL_BLOCK", 4)  # several fill blocks per split
    rng = np.random.default_rng(0)
    train, val = _states(rng, 23), _states(rng, 9)
    enc = _RowwiseEncoder()
    outs = [enc.run_states(s) for s in (train, val)]
    whole = joint_features(
        np.concatenate([o.mean for o in outs]), np.concatenate([o.pooled for o in outs])
    ).to(train_split.BANK_DTYPE)  # (32, 8)
    sizes = np.full(32, 25)  # every held-out row was searched among 25
    keep = matched_rows(32, sizes, seed=5)
    assert (keep < 23).any() and (keep >= 23).any()  # rows of both splits kept
    bank = stream_matched_bank([train, val], enc, sizes, seed=5)
    assert torch.equal(bank, whole[torch.as_tensor(keep)])
    assert torch.equal(stream_matched_bank([train, val], enc, None, seed=5), whole)  # nothing saved: all rows


def _unit(rng: np.random.Generator, n: int, d: int) -> torch.Tensor:
    x = rng.normal(size=(n, d))
    return torch.as_tensor(x / np.linalg.norm(x, axis=1, keepdims=True), dtype=torch.float32)


def test_a_matched_bank_keeps_the_target_where_the_whole_bank_keeps_more():
    rng = np.random.default_rng(0)
    n, tpr, trials = 500, 0.9, 30
    whole, matched = [], []
    for trial in range(trials):
        x = _unit(rng, n, 8)
        held, sizes = np.zeros(n), np.zeros(n, dtype=np.int64)
        for fold in np.array_split(rng.permutation(n), 5):  # each row scored against the other folds
            rest = np.setdiff1d(np.arange(n), fold)
            held[fold] = neighbour_distances(x[fold], x[rest], 1, half=False)[:, 0].numpy()
            sizes[fold] = len(rest)
        q = keep_threshold(held, tpr)
        new = _unit(rng, 2000, 8)
        whole.append(np.mean(neighbour_distances(new, x, 1, half=False)[:, 0].numpy() <= q))
        sub = x[torch.as_tensor(matched_rows(n, sizes, seed=trial))]
        matched.append(np.mean(neighbour_distances(new, sub, 1, half=False)[:, 0].numpy() <= q))
    want = np.ceil((n + 1) * tpr) / (n + 1)  # the rank the rule keeps, as a share of n + 1
    # Each trial's keep rate varies with its 500-row threshold (sd ~ sqrt(0.09 / 500) = 0.013) and its 2000
    # new points (0.007): the mean of 30 trials has sd ~ 0.003; 4 sd each way.
    se = np.std(matched, ddof=1) / np.sqrt(trials)
    assert abs(np.mean(matched) - want) < 4 * max(se, 0.003)
    # the whole bank (500 rows against folds of 400) keeps more: ~0.94 in 8 dimensions
    assert np.mean(whole) - want > 0.02
