"""Lightning's checkpoint I/O and checkpoint callback, made safe to kill and to move (``overwrite=true``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import AsyncCheckpointIO

from ucse import atomic
from ucse.config.run_layout import RunFolder


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint I/O that writes through a temporary sibling and reads with ``weights_only=True``.

    The atomic write means a kill never leaves a truncated ``last.ckpt``; the safe read means a checkpoint
    can never run code (Lightning passes ``weights_only=None`` by default).
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        """Serialise in memory, then write a sibling and rename it onto ``path``."""
        buf = io.BytesIO()
        torch.save(checkpoint, buf)
        with atomic.atomic_file(path, "wb") as fh:
            fh.write(buf.getbuffer())

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict:
        """Read a checkpoint without unpickling arbitrary objects."""
        return super().load_checkpoint(path, map_location=map_location, weights_only=True)


class BackgroundCheckpointIO(AsyncCheckpointIO):
    """:class:`SafeCheckpointIO` in a background thread: the loop goes on while a checkpoint is written.

    Lightning's ``AsyncCheckpointIO`` clones the checkpoint's tensors before it returns (so the optimiser's
    next steps cannot change what is written) and writes on one worker thread, in order; at the end of the
    fit it waits for the writes and raises any error they met. What it does not do is order *removals* (the
    previous best, once a better one is saved) after the writes: it removes at once, so a removal could
    overtake that file's own pending write and leave a stale best behind. Here a removal is queued on the
    writer thread behind the writes, without blocking the loop either.

    A removal also waits for the next ``last.ckpt`` to be written: Lightning removes the previous best
    before it writes ``last.ckpt`` (the largest file, with the optimiser's state), so a kill in between left
    a ``last.ckpt`` naming a best checkpoint that was gone, and the resumed run shipped its last epoch's
    weights as the best (``best_checkpoint: null``). A fit that ends by an exception (a stop by signal, a
    failed write) drops the deferred removals (:meth:`drop_deferred`, from the checkpoint callback), and a
    removal is skipped once a write has failed: the files the last ``last.ckpt`` names stay.
    """

    def __init__(self) -> None:
        super().__init__(SafeCheckpointIO())
        self._deferred: list[Any] = []  # removals waiting for the next last.ckpt

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """Write on the writer thread; once a ``last.ckpt`` is queued, the removals deferred before it."""
        super().save_checkpoint(*args, **kwargs)
        path = kwargs.get("path", args[1] if len(args) > 1 else None)
        if path is not None and Path(path).name == RunFolder.LAST_CHECKPOINT:
            self._flush_removals()

    def remove_checkpoint(self, path: Any) -> None:
        """Remove ``path`` on the writer thread, after the next ``last.ckpt`` (no longer naming it)."""
        self._deferred.append(path)

    def teardown(self) -> None:
        """At the end of a fit that succeeded nothing names the deferred files any more: remove, then wait."""
        try:
            self._flush_removals()
        finally:
            super().teardown()

    def drop_deferred(self) -> None:
        """Keep the files whose removal waits for a ``last.ckpt`` that a failed fit will not write."""
        self._deferred = []

    def _flush_removals(self) -> None:
        pending, self._deferred = self._deferred, []
        for path in pending:
            self._remove_in_order(path)

    def _remove_in_order(self, path: Any) -> None:
        """Remove ``path`` on the writer thread, after the writes queued before it."""
        self._ensure_setup()
        remove = super().remove_checkpoint

        def _remove() -> None:
            if self._error is not None:  # a write before it failed: last.ckpt may still name this file
                return
            try:
                remove(path)
            except BaseException as ex:  # raised by the next save or at teardown, as a failed write is
                self._error = ex

        assert self._executor is not None
        self._executor.submit(_remove)
        if self._error is not None:
            raise self._error


class RelocatableCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose ``last.ckpt`` is each epoch's end and whose state follows a moved run folder.

    Lightning (2.6) rewrites ``last.ckpt`` only in an epoch that also wrote a best checkpoint, so after an
    epoch whose validation accuracy did not improve, ``last.ckpt`` lagged behind (and *which* epoch it held
    depended on the CPU's float path); ``ckpt_path=last`` then silently redid epochs. Here it is written at
    the end of every epoch.

    ``overwrite=true`` trains in a temporary sibling renamed at the end, so the checkpoints record the
    temporary path. Lightning drops the best-k and last-checkpoint bookkeeping of a checkpoint whose folder
    changed (a resumed run would then write ``last-v1.ckpt`` beside a stale ``last.ckpt``); this maps the
    recorded paths onto the current folder first.
    """

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Save the best checkpoint as Lightning does, then ``last.ckpt`` unless this step is saved."""
        super().on_train_epoch_end(trainer, pl_module)  # runs after the epoch's validation
        # _should_skip_saving_checkpoint: not fitting (validate/test), sanity check, or this step is saved.
        if self.save_last and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """A fit ending by an exception keeps the files its last ``last.ckpt`` names.

        Lightning calls this before the checkpoint I/O's teardown, which would otherwise remove them.
        """
        io = getattr(trainer.strategy, "checkpoint_io", None)
        if isinstance(io, BackgroundCheckpointIO):
            io.drop_deferred()
        super().on_exception(trainer, pl_module, exception)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Rewrite paths under the recorded ``dirpath`` to the current one, then load as usual."""
        old, new = state_dict.get("dirpath"), self.dirpath
        if isinstance(old, str) and new is not None and old != new:

            def moved(value: Any) -> Any:
                if isinstance(value, str) and value.startswith(old + "/"):
                    return new + value[len(old) :]
                return value

            state_dict = {k: moved(v) for k, v in state_dict.items()}
            best_k = state_dict.get("best_k_models", {})
            state_dict["best_k_models"] = {moved(k): v for k, v in best_k.items()}
            state_dict["dirpath"] = new
        super().load_state_dict(state_dict)
