"""Stopping on SIGTERM or Ctrl-C: the command unwinds, says so in one line, exits 128 + the signal.

Without a handler SIGTERM kills the process outright, and during training Lightning's own handler turned it
into ``SystemExit`` with no code, so a stopped run exited 0 as if it had finished. Within
:func:`stop_on_sigterm` the signal raises :class:`TerminatedError` where the process is, so every
``finally`` and ``except BaseException`` clean-up (atomic writes, cache builds, the overwrite swap) runs.

Ctrl-C has its own trap in Lightning: a ``KeyboardInterrupt`` inside ``fit`` makes it ignore SIGINT for the
rest of the process (``SIG_IGN``, never restored) and call ``sys.exit(1)`` (Lightning-AI/pytorch-lightning
#19976): ``ucse train`` exited 1 instead of 130 with no word on the checkpoint, and a notebook that stopped a
``ucse.train`` cell got ``SystemExit`` and could not be interrupted again. Within :func:`interrupt_as_error`
Ctrl-C raises :class:`TerminatedError`, which Lightning tears down and re-raises like any other error; the
training run turns it back into ``KeyboardInterrupt``, with what the run left and how to resume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class TerminatedError(BaseException):
    """The command was stopped by a signal; ``exit_code`` is the shell's ``128 + signal number``.

    A ``BaseException``, as ``KeyboardInterrupt`` is: an ``except Exception`` that turns a library's errors
    into a message (a damaged checkpoint, an unreadable file) must not turn a stop into one.
    """

    def __init__(self, message: str, signum: int = signal.SIGTERM) -> None:
        super().__init__(message)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        """``128 + signum`` (143 for SIGTERM), what a shell reports for a process killed by the signal."""
        return 128 + self.signum


_BEFORE_STOP: list[Callable[[], None]] = []
_STOPS: list[TerminatedError] = []  # every stop a signal raised in this process, in order


def stop_mark() -> int:
    """A mark for :func:`stops_since`: the stops recorded so far."""
    return len(_STOPS)


def stops_since(mark: int) -> TerminatedError | None:
    """The first stop a signal raised after ``mark`` (:func:`stop_mark`), whether or not it was caught.

    A stop raised inside a finalizer is swallowed by Python; what runs next can then fail on what the stop
    broke (a DataLoader whose workers the same Ctrl-C ended). Code that knows where it can stop cleanly (a
    training step's start) or that turns failures into messages asks here first.
    """
    return _STOPS[mark] if len(_STOPS) > mark else None


@contextmanager
def before_stop(action: Callable[[], None]) -> Iterator[None]:
    """Within the block, a stop (:class:`TerminatedError` from a signal) runs ``action`` first.

    For what must happen before any clean-up starts: a distributed run's rank 0 ends its rank processes,
    which could otherwise hold it in a collective operation during its own teardown. Errors in ``action``
    are ignored (the stop goes on).
    """
    _BEFORE_STOP.append(action)
    try:
        yield
    finally:
        _BEFORE_STOP.remove(action)


@contextmanager
def _raising(signum: int, message: str, unless_ignored: bool = False) -> Iterator[None]:
    """Within the block, ``signum`` raises :class:`TerminatedError` with ``message``.

    The previous handler is restored on the way out. Main thread only (elsewhere a no-op); ``unless_ignored``:
    a signal the process ignores stays ignored. Every signal raises, not only the first, and each stop is
    recorded (:func:`stops_since`): one raised where Python swallows exceptions (a finalizer, ``__del__``:
    "Exception ignored in ...", e.g. while a DataLoader shuts its workers down) would otherwise be lost, and
    the run went on, or failed later on what the stop had broken.
    """
    previous = signal.getsignal(signum)
    ignored = previous is signal.SIG_IGN or previous is None  # None: a handler not installed from Python
    if threading.current_thread() is not threading.main_thread() or (unless_ignored and ignored):
        yield
        return

    owner = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:
            # A process forked inside the block (a DataLoader worker) inherits this handler; its own code
            # (torch's worker loop) expects Python's: KeyboardInterrupt on Ctrl-C (it ends quietly on that),
            # death on SIGTERM. The process that owns the run stops it. Before, each worker died of this stop
            # with a traceback, and the run hung or failed on "DataLoader worker exited unexpectedly".
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        for action in list(_BEFORE_STOP):
            with contextlib.suppress(Exception):
                action()
        stop = TerminatedError(message, signum)
        _STOPS.append(stop)
        raise stop

    def unraisable(info: Any) -> None:
        # A stop raised inside a finalizer: recorded, and raised again where it can be (StopWhenSignalled,
        # train()); Python's "Exception ignored in ..." traceback would only confuse the one-line message.
        if not isinstance(info.exc_value, TerminatedError):
            hook(info)

    hook = sys.unraisablehook
    signal.signal(signum, handler)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        signal.signal(signum, previous)
        sys.unraisablehook = hook


def stop_on_sigterm() -> contextlib.AbstractContextManager[None]:
    """Within the block, SIGTERM raises :class:`TerminatedError` (main thread only; elsewhere a no-op)."""
    return _raising(signal.SIGTERM, "stopped by SIGTERM")


def interrupt_as_error() -> contextlib.AbstractContextManager[None]:
    """Within the block, Ctrl-C (SIGINT) raises :class:`TerminatedError` instead of ``KeyboardInterrupt``.

    Main thread only (elsewhere a no-op), and not where SIGINT is ignored (a job started in the background by
    a non-interactive shell must stay deaf to it). The handler in place before is restored on the way out.
    """
    return _raising(signal.SIGINT, "interrupted (Ctrl-C)", unless_ignored=True)
