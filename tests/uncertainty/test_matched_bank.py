"""``matched_bank``: the shipped flag searches a bank as large as the held-out rows' banks.

Reference: a Monte Carlo of the split-conformal keep rule on points drawn uniformly on a sphere, held-out
rows scored against the other folds (as ``head=auto`` does), new points against the whole bank or against a
matched subset; and the subset's rows checked against the bank by index.
"""

from __future__ import annotations

import numpy as np
import torch

from ucse.training.neighbours import neighbour_distances
from ucse.uncertainty.keep_threshold import keep_threshold
from ucse.uncertainty.train_split import matched_bank


def test_the_subset_is_rows_of_the_bank_in_order_at_the_mean_heldout_size():
    bank = torch.arange(50, dtype=torch.float32)[:, None].repeat(1, 3)  # row i holds i
    sizes = np.array([40] * 30 + [39] * 20)  # mean 39.6 -> 40 rows
    sub = matched_bank(bank, sizes, seed=3)
    rows = sub[:, 0].long().tolist()
    assert len(rows) == 40 and rows == sorted(set(rows)) and torch.equal(sub, bank[rows])
    assert torch.equal(matched_bank(bank, sizes, seed=3), sub)  # the seed decides
    assert matched_bank(bank, np.array([50, 60]), seed=0) is bank  # no smaller bank: all of it


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
        sub = matched_bank(x, sizes, seed=trial)
        matched.append(np.mean(neighbour_distances(new, sub, 1, half=False)[:, 0].numpy() <= q))
    want = np.ceil((n + 1) * tpr) / (n + 1)  # the rank the rule keeps, as a share of n + 1
    # Each trial's keep rate varies with its 500-row threshold (sd ~ sqrt(0.09 / 500) = 0.013) and its 2000
    # new points (0.007): the mean of 30 trials has sd ~ 0.003; 4 sd each way.
    se = np.std(matched, ddof=1) / np.sqrt(trials)
    assert abs(np.mean(matched) - want) < 4 * max(se, 0.003)
    # the whole bank (500 rows against folds of 400) keeps more: ~0.94 in 8 dimensions
    assert np.mean(whole) - want > 0.02
