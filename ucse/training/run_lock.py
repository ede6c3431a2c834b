"""One process at a time per run folder: a second training into the same ``output_dir`` fails at once.

The lock is an ``flock`` on ``<parent>/.<name>.ucse-lock``, a sibling of the run folder rather than the folder
itself, because ``overwrite=true`` swaps the folder (a lock on the old folder would not cover the new one).
The kernel drops the lock when the process ends, ``kill -9`` included, so a stale lock file never blocks a
rerun; the file is removed on release.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ucse.config import ConfigError

_HELD: set[Path] = set()
"""Run folders this process holds: ``run_training`` locks around ``train``, which locks again (a no-op)."""


def lock_path(run_dir: Path) -> Path:
    """The lock file of ``run_dir``."""
    return run_dir.parent / f".{run_dir.name}.ucse-lock"


@contextmanager
def hold_run_folder(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for this process while the block runs (nested holds of one folder are free).

    Raises:
        ConfigError: another process holds it, naming the folder and what to do; nothing was changed.
    """
    key = run_dir.absolute()
    if key in _HELD:
        yield
        return
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        fd = _acquire(lock_path(run_dir), run_dir)
    except OSError as err:  # named by the setting, not by the hidden lock file (a read-only, virtual folder)
        raise ConfigError(
            f"output_dir={run_dir}: its folder {run_dir.parent} cannot be written ({err.strerror}); nothing "
            "was changed. Choose an output_dir in a folder you can write to."
        ) from None
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        lock_path(run_dir).unlink(missing_ok=True)  # before closing: nobody can lock this inode any more
        os.close(fd)


def _acquire(path: Path, run_dir: Path) -> int:
    for _ in range(10):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(
                f"{run_dir} is being trained by another process right now (it holds {path.name}); nothing "
                "was changed. Wait until that run ends, or choose another output_dir (or name)."
            ) from None
        try:
            same = os.fstat(fd).st_ino == path.stat().st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        # The previous holder removed the file between our open and our lock: we hold a dead inode.
        os.close(fd)
    raise ConfigError(f"{run_dir}: could not take its lock {path}; another process keeps replacing it.")
