"""LightningDataModule over frozen-backbone token states (cached or computed on the fly)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator, Sequence

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from ucse.backbone.cache import TokenStates

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # hidden (B, T, H), mask (B, T), labels (B,)
LENT = -1
"""The label of a lent copy in an evaluation batch: the metrics ignore it (``ignore_index``)."""


class WorkersWithoutCtrlC(DataLoader):
    """A DataLoader whose worker processes start with Ctrl-C (SIGINT) blocked, so that only the run sees it.

    Ctrl-C reaches every process of the terminal's group. A worker that met it while starting up, before
    torch's worker loop (which ends quietly on ``KeyboardInterrupt``) was entered, died with Python's
    traceback printed, and the run could then fail on "DataLoader worker exited unexpectedly" instead of
    stopping with its one line. A forked (or spawned) process inherits the signal mask of the thread that
    starts it, so SIGINT is blocked in this thread while the workers start, then delivered here as before;
    the workers never take it (the run's stop shuts them down, as torch does on any error). SIGTERM is left
    alone: torch's shutdown of a stuck worker relies on it.
    """

    def __iter__(self):
        if self.num_workers == 0:
            return super().__iter__()
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return super().__iter__()  # forks the workers (persistent ones only the first time)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a Ctrl-C held meanwhile is raised here


class LengthBucketSampler(Sampler[list[int]]):
    """Yields batches of indices whose token lengths are similar.

    Written here because neither torch nor Lightning ships a length-bucketing batch sampler: padding
    every batch to its longest member is what makes head cost scale with real tokens (the TextCNN's
    convolutions run over padded positions too). Training shuffles, then sorts inside windows of
    ``bucket_batches`` batches and shuffles the batch order; evaluation sorts globally.

    With ``world_size`` N > 1 (distributed training) it forms the batches a single process would form with
    batch size N x ``batch_size`` (the same on every rank: same seed, same epoch) and yields this rank's
    contiguous part of each, so one optimiser step over the N ranks sees exactly one global batch. A global
    batch with fewer than N texts (only the last one can be) lends its first text to the ranks left empty:
    every rank must take a step. In training the copy is trained on (its gradient is the first text's,
    averaged over the ranks); in evaluation (``shuffle=False``) it is yielded as ``-1 - index``, which the
    collate reads as that row labelled :data:`LENT`, so no metric counts a text twice.
    """

    def __init__(
        self,
        lengths: np.ndarray,
        batch_size: int,
        shuffle: bool,
        seed: int = 0,
        bucket_batches: int = 50,
        rank: int = 0,
        world_size: int = 1,
        epoch_source: Callable[[], int | None] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}.")
        self.lengths = np.asarray(lengths)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.bucket_batches = bucket_batches
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        # Lightning calls set_epoch(epoch) on ``dataloader.batch_sampler.sampler`` at every epoch start;
        # pointing it at this object makes a resumed run shuffle as the uninterrupted run would.
        self.sampler = self
        self.epoch_source = epoch_source

    def __len__(self) -> int:
        global_bs = self.batch_size * self.world_size
        return (len(self.lengths) + global_bs - 1) // global_bs

    def set_epoch(self, epoch: int) -> None:
        """Re-seed the shuffle for a new epoch (Lightning calls it at every epoch start)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        if self.world_size == 1:
            yield from self._global_batches(self.batch_size)
            return
        for batch in self._global_batches(self.batch_size * self.world_size):
            part = np.array_split(np.asarray(batch), self.world_size)[self.rank]
            yield part.tolist() if len(part) else batch[:1] if self.shuffle else [-1 - batch[0]]

    def _global_batches(self, bs: int) -> Iterator[list[int]]:
        n = len(self.lengths)
        if not self.shuffle:
            order = np.argsort(-self.lengths, kind="stable")
            yield from (order[i : i + bs].tolist() for i in range(0, n, bs))
            return
        current = self.epoch_source() if self.epoch_source is not None else None
        if current is not None:
            # The trainer's epoch at iteration time: a resumed run prefetches its first batch before
            # Lightning's set_epoch call, and must still draw epoch k's order.
            self.epoch = current
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
        lent = [i for i, row in enumerate(idx) if row < 0]  # evaluation copies: -1 - the row lent
        rows = [row if row >= 0 else -1 - row for row in idx]
        hidden, mask = self.states.batch(rows)  # (B, T, H), (B, T)
        labels = self.labels[rows]  # (B,) a copy (advanced indexing)
        labels[lent] = LENT
        return hidden, mask, labels


class _Rows:
    """The DataLoader's "dataset": each row index as it is (a negative one marks a lent copy; see above)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class StatesDataModule(L.LightningDataModule):
    """Serves (hidden, mask, label) batches for the train / validation / test splits.

    Args:
        states: split name -> token states of that split's texts (``train``, ``validation``, ``test``); or a
            function of the trainer's strategy (``None`` on one device) that builds them in ``setup()``, on
            every rank of a distributed run, after the processes have started.
        labels: split name -> (N,) integer labels.
        batch_size: training batch size per device (evaluation uses the same).
        seed: shuffle seed.
        num_workers: DataLoader workers (0 keeps memory-mapped states in the main process).
    """

    def __init__(
        self,
        states: dict[str, TokenStates] | Callable[[object | None], dict[str, TokenStates]],
        labels: dict[str, np.ndarray],
        batch_size: int,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        self.labels = {k: torch.as_tensor(np.asarray(v), dtype=torch.long) for k, v in labels.items()}
        self.build: Callable[[object | None], dict[str, TokenStates]] | None = None
        self.states: dict[str, TokenStates] | None = None
        if callable(states):
            self.build = states
        else:
            self._set_states(states)
        self.batch_size = batch_size
        self.seed = seed
        self.num_workers = num_workers

    def _epoch(self) -> int | None:
        """The attached trainer's current epoch (``None`` outside a Lightning run)."""
        trainer = getattr(self, "trainer", None)
        return int(trainer.current_epoch) if trainer is not None else None

    def _set_states(self, states: dict[str, TokenStates]) -> None:
        for split, st in states.items():
            if len(st) != len(self.labels[split]):
                raise ValueError(
                    f"Split '{split}': {len(st)} token-state rows but {len(self.labels[split])} labels."
                )
        self.states = states

    def setup(self, stage: str) -> None:
        """Build the states on this rank if they were given as a function (idempotent)."""
        if self.states is None and self.build is not None:
            strategy = self.trainer.strategy if self.trainer is not None else None
            multi = strategy is not None and getattr(strategy, "world_size", 1) > 1
            self._set_states(self.build(strategy if multi else None))

    def _rank_world(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        if self.states is None:
            self.setup("fit")
        assert self.states is not None
        rank, world = self._rank_world()
        sampler = LengthBucketSampler(
            self.states[split].lengths,
            self.batch_size,
            shuffle,
            self.seed,
            rank=rank,
            world_size=world,
            epoch_source=self._epoch,
        )
        return WorkersWithoutCtrlC(
            _Rows(len(self.states[split])),  # the "dataset" is the row index; collate reads the states
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
