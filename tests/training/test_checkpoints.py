"""Checkpoint I/O: background writes that hold the state of the save, in order, before any removal."""

from __future__ import annotations

import threading

import pytest
import torch

from ucse.training.checkpoints import BackgroundCheckpointIO, SafeCheckpointIO


def _held_writes(monkeypatch) -> threading.Event:
    """Make every SafeCheckpointIO write wait for the returned event (set it to let them through)."""
    release, real = threading.Event(), SafeCheckpointIO.save_checkpoint

    def slow_save(self, checkpoint, path, storage_options=None):
        assert release.wait(10)
        real(self, checkpoint, path, storage_options)

    monkeypatch.setattr(SafeCheckpointIO, "save_checkpoint", slow_save)
    return release


def test_a_background_write_holds_the_state_at_the_save(tmp_path, monkeypatch):
    release = _held_writes(monkeypatch)
    io = BackgroundCheckpointIO()
    weight = torch.arange(6.0)
    try:
        io.save_checkpoint({"w": weight, "epoch": 1}, tmp_path / "a.ckpt")
        weight.add_(100.0)  # the next optimiser step, while the write is still held
    finally:
        release.set()
        io.teardown()  # what Lightning calls at the end of a fit: waits for the writes
    back = io.load_checkpoint(tmp_path / "a.ckpt")
    assert torch.equal(back["w"], torch.arange(6.0))
    assert back["epoch"] == 1


def test_a_removal_is_done_after_the_write_it_would_overtake(tmp_path, monkeypatch):
    # Lightning's AsyncCheckpointIO removes at once: a removal of a file whose write is still queued would
    # find nothing, and the write would then leave a stale checkpoint behind.
    release = _held_writes(monkeypatch)
    io = BackgroundCheckpointIO()
    path = tmp_path / "best.ckpt"
    try:
        io.save_checkpoint({"w": torch.ones(3)}, path)
        io.remove_checkpoint(path)  # returns at once: the loop is not held up
        assert not path.exists()  # the write is still held
    finally:
        release.set()
        io.teardown()
    assert not path.exists()


def _an_epoch_that_improved(io: BackgroundCheckpointIO, tmp_path) -> tuple:
    """(old best, new best, last.ckpt) after epoch 0's writes and an improved epoch's up to its last.ckpt.

    What Lightning does at an epoch that improved, before that epoch's last.ckpt: the new best is saved and
    the old one removed.
    """
    old, new, last = tmp_path / "best-epoch=0.ckpt", tmp_path / "best-epoch=1.ckpt", tmp_path / "last.ckpt"
    io.save_checkpoint({"best": str(old)}, old)
    io.save_checkpoint({"best": str(old)}, last)
    io.save_checkpoint({"best": str(new)}, new)
    io.remove_checkpoint(old)
    return old, new, last


def test_the_previous_best_stays_until_the_last_checkpoint_no_longer_names_it(tmp_path):
    # Lightning's order at an epoch that improved: save the new best, remove the old one, save last.ckpt.
    # A kill before last.ckpt was written left the old last.ckpt naming a removed best: the resumed run
    # found no best checkpoint and shipped its last epoch's weights.
    io = BackgroundCheckpointIO()
    old, new, last = _an_epoch_that_improved(io, tmp_path)
    io._executor.submit(lambda: None).result()  # every queued write and removal done: the kill comes here
    assert io.load_checkpoint(last)["best"] == str(old) and old.exists()  # last.ckpt's best is on disk
    io.save_checkpoint({"best": str(new)}, last)
    io._executor.submit(lambda: None).result()
    assert not old.exists() and new.exists()  # gone once last.ckpt names the new best
    io.save_checkpoint({"best": str(new)}, tmp_path / "best-epoch=2.ckpt")
    io.remove_checkpoint(new)
    io.teardown()  # the fit's end: nothing names a deferred file any more
    assert not new.exists()


def test_a_failed_last_checkpoint_write_keeps_the_best_it_would_have_replaced(tmp_path, monkeypatch):
    # the removal was queued behind the failed write and ran anyway: last.ckpt named a removed best
    real = SafeCheckpointIO.save_checkpoint
    calls = []

    def full_disk_at_the_second_last(self, checkpoint, path, storage_options=None):
        calls.append(path.name)
        if calls.count("last.ckpt") == 2:
            raise OSError(28, "No space left on device")
        real(self, checkpoint, path, storage_options)

    monkeypatch.setattr(SafeCheckpointIO, "save_checkpoint", full_disk_at_the_second_last)
    io = BackgroundCheckpointIO()
    old, new, last = _an_epoch_that_improved(io, tmp_path)
    with pytest.raises(OSError, match="No space"):
        io.save_checkpoint({"best": str(new)}, last)  # fails on the writer thread
        io.teardown()
    assert io.load_checkpoint(last)["best"] == str(old) and old.exists()


def test_a_failed_background_write_is_raised(tmp_path):
    io = BackgroundCheckpointIO()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError):  # raised by the save itself when the thread failed first, else at teardown
        io.save_checkpoint({"w": torch.ones(1)}, blocker / "a.ckpt")  # its folder is a file: the write fails
        io.teardown()  # what Lightning calls at the end of a fit
