"""Length-bucketed batching over token states."""

import numpy as np
import pytest
import torch

from ucse.training.datamodule import LengthBucketSampler, StatesDataModule


class ArrayStates:
    """Token states backed by a list of (T_i, H) tensors (independent of the cache implementation)."""

    def __init__(self, rows):
        self.rows = rows
        self.lengths = np.array([r.shape[0] for r in rows])
        self.hidden_size = rows[0].shape[1]

    def __len__(self):
        return len(self.rows)

    def batch(self, idx):
        t = max(self.rows[i].shape[0] for i in idx)
        hidden = torch.zeros(len(idx), t, self.hidden_size)
        mask = torch.zeros(len(idx), t, dtype=torch.long)
        for j, i in enumerate(idx):
            hidden[j, : self.rows[i].shape[0]] = self.rows[i]
            mask[j, : self.rows[i].shape[0]] = 1
        return hidden, mask


def test_train_sampler_covers_every_row_once_per_epoch_and_reshuffles():
    lengths = np.random.default_rng(0).integers(1, 40, size=203)
    s = LengthBucketSampler(lengths, batch_size=16, shuffle=True, seed=3, bucket_batches=4)
    e1 = list(s)
    e2 = list(s)
    assert len(e1) == len(s) == 13
    assert sorted(i for b in e1 for i in b) == list(range(203))
    assert sorted(i for b in e2 for i in b) == list(range(203))
    assert e1 != e2
    # Bucketing keeps the padding waste well below a plain shuffle's.
    waste = sum(16 * max(lengths[b]) - lengths[b].sum() for b in e1 if len(b) == 16)
    rng = np.random.default_rng(0)
    perm = rng.permutation(203)
    plain = sum(
        16 * max(lengths[perm[i : i + 16]]) - lengths[perm[i : i + 16]].sum() for i in range(0, 192, 16)
    )
    assert waste < 0.6 * plain


def test_sampler_is_seeded():
    lengths = np.arange(100)
    a = list(LengthBucketSampler(lengths, 8, shuffle=True, seed=1))
    b = list(LengthBucketSampler(lengths, 8, shuffle=True, seed=1))
    assert a == b


def test_eval_sampler_sorted_longest_first():
    lengths = np.array([3, 9, 1, 7, 5])
    batches = list(LengthBucketSampler(lengths, 2, shuffle=False))
    assert batches == [[1, 3], [4, 0], [2]]


def test_datamodule_batches_match_rows():
    rng = torch.Generator().manual_seed(0)
    rows = [torch.randn(int(t), 4, generator=rng) for t in [2, 5, 3, 1, 4, 6]]
    labels = np.array([0, 1, 2, 0, 1, 2])
    st = ArrayStates(rows)
    dm = StatesDataModule(
        {"train": st, "validation": st, "test": st}, {s: labels for s in ("train", "validation", "test")}, 4
    )
    seen = []
    for hidden, mask, y in dm.test_dataloader():
        for j in range(hidden.shape[0]):
            t = int(mask[j].sum())
            i = next(k for k, r in enumerate(rows) if r.shape[0] == t)
            assert torch.equal(hidden[j, :t], rows[i]) and y[j] == labels[i]
            seen.append(i)
    assert sorted(seen) == list(range(6))


def test_datamodule_rejects_length_mismatch():
    st = ArrayStates([torch.zeros(2, 3)])
    with pytest.raises(ValueError, match="labels"):
        StatesDataModule({"train": st}, {"train": np.array([0, 1])}, 2)


def test_the_collate_reads_a_lent_row_as_its_copy_labelled_lent():
    from ucse.backbone.states import DeviceStates
    from ucse.config import CacheDtype
    from ucse.training.datamodule import LENT, _StatesCollate

    rows = torch.randn(10, 4, dtype=torch.float16)  # three texts of 3, 5 and 2 tokens
    states = DeviceStates(rows, np.array([0, 3, 8, 10]), CacheDtype.fp16, "cpu")
    collate = _StatesCollate(states, torch.tensor([2, 0, 1]))
    hidden, mask, labels = collate([1, -1 - 2])  # row 1, then a copy of row 2
    want_hidden, want_mask = states.batch([1, 2])
    assert torch.equal(hidden, want_hidden) and torch.equal(mask, want_mask)
    assert labels.tolist() == [0, LENT]
    assert collate.labels.tolist() == [2, 0, 1]  # the split's labels are not written through
