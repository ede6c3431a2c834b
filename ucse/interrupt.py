"""Stopping on SIGTERM: the command unwinds (temporary files removed), says so in one line, exits 128 + 15.

Without a handler SIGTERM kills the process outright, and during training Lightning's own handler turned it
into ``SystemExit`` with no code, so a stopped run exited 0 as if it had finished. Within
:func:`stop_on_sigterm` the signal raises :class:`TerminatedError` where the process is, so every
``finally`` and ``except BaseException`` clean-up (atomic writes, cache builds, the overwrite swap) runs.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class TerminatedError(Exception):
    """The command was stopped by a signal; ``exit_code`` is the shell's ``128 + signal number``."""

    def __init__(self, message: str, signum: int = signal.SIGTERM) -> None:
        super().__init__(message)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        """``128 + signum`` (143 for SIGTERM), what a shell reports for a process killed by the signal."""
        return 128 + self.signum


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`TerminatedError` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise TerminatedError(f"stopped by {signal.Signals(signum).name}", signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
