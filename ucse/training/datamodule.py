"""LightningDataModule over frozen-backbone token states (cached or computed on the fly)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from ucse.backbone.cache import TokenStates

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # hidden (B, T, H), mask (B, T), labels (B,)


class LengthBucketSampler(Sampler[list[int]]):
    """Yields batches of indices whose token lengths are similar.

    Written here because neither torch nor Lightning ships a length-bucketing batch sampler: padding
    every batch to its longest member is what makes head cost scale with real tokens (the TextCNN's
    convolutions run over padded positions too). Training shuffles, then sorts inside windows of
    ``bucket_batches`` batches and shuffles the batch order; evaluation sorts globally.
    """

    def __init__(
        self,
        lengths: np.ndarray,
        batch_size: int,
        shuffle: bool,
        seed: int = 0,
        bucket_batches: int = 50,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        self.lengths = np.asarray(lengths)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.bucket_batches = bucket_batches
        self.epoch = 0

    def __len__(self) -> int:
        return (len(self.lengths) + self.batch_size - 1) // self.batch_size

    def set_epoch(self, epoch: int) -> None:
        """Re-seed the shuffle for a new epoch (called by Lightning for distributed samplers)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        n, bs = len(self.lengths), self.batch_size
        if not self.shuffle:
            order = np.argsort(-self.lengths, kind="stable")
            yield from (order[i : i + bs].tolist() for i in range(0, n, bs))
            return
        rng = np.random.default_rng(self.seed + self.epoch)
        self.epoch += 1  # a fresh order every epoch even when Lightning does not call set_epoch
        perm = rng.permutation(n)
        window = bs * self.bucket_batches
        batches: list[list[int]] = []
        for start in range(0, n, window):
            chunk = perm[start : start + window]
            chunk = chunk[np.argsort(-self.lengths[chunk], kind="stable")]
            batches.extend(chunk[i : i + bs].tolist() for i in range(0, len(chunk), bs))
        for j in rng.permutation(len(batches)):
            yield batches[j]


class _StatesCollate:
    """Turns a list of indices into a padded (hidden, mask, labels) batch."""

    def __init__(self, states: TokenStates, labels: torch.Tensor) -> None:
        self.states = states
        self.labels = labels

    def __call__(self, idx: Sequence[int]) -> Batch:
        idx = list(idx)
        hidden, mask = self.states.batch(idx)  # (B, T, H), (B, T)
        return hidden, mask, self.labels[idx]


class StatesDataModule(L.LightningDataModule):
    """Serves (hidden, mask, label) batches for the train / validation / test splits.

    Args:
        states: split name -> token states of that split's texts (``train``, ``validation``, ``test``).
        labels: split name -> (N,) integer labels.
        batch_size: training batch size (evaluation uses the same).
        seed: shuffle seed.
        num_workers: DataLoader workers (0 keeps memory-mapped states in the main process).
    """

    def __init__(
        self,
        states: dict[str, TokenStates],
        labels: dict[str, np.ndarray],
        batch_size: int,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        for split, st in states.items():
            if len(st) != len(labels[split]):
                raise ValueError(
                    f"Split '{split}': {len(st)} token-state rows but {len(labels[split])} labels."
                )
        self.states = states
        self.labels = {k: torch.as_tensor(np.asarray(v), dtype=torch.long) for k, v in labels.items()}
        self.batch_size = batch_size
        self.seed = seed
        self.num_workers = num_workers

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        sampler = LengthBucketSampler(self.states[split].lengths, self.batch_size, shuffle, self.seed)
        return DataLoader(
            range(len(self.states[split])),  # the "dataset" is the row index; collate reads the states
            batch_sampler=sampler,
            collate_fn=_StatesCollate(self.states[split], self.labels[split]),
            num_workers=self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        """Length-bucketed, shuffled training batches."""
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """Length-sorted validation batches."""
        return self._loader("validation", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        """Length-sorted test batches."""
        return self._loader("test", shuffle=False)
