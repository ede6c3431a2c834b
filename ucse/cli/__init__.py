"""What the command-line entry points share: logging set-up and how input errors reach the user."""

from __future__ import annotations

import errno
import logging
import sys
from collections.abc import Callable

from ucse.config import debug_mode
from ucse.interrupt import TerminatedError, stop_on_sigterm

INTERRUPTED = 130
"""Exit status after Ctrl-C: 128 + SIGINT, what a shell reports for a process the signal ended."""


def run_cli(body: Callable[[], int], interrupted: str | Callable[[], str] = "") -> int:
    """Run a command's body; an input error prints one ``error: ...`` line and exits 2, Ctrl-C exits 130.

    Every ucse input error (bad config key, bad row, missing package or run folder...) is a ``ValueError``
    subclass or ``FileNotFoundError`` whose message names the fix, so a traceback adds nothing for the
    user; ``UCSE_DEBUG=1`` re-raises to show it. A failed write (full disk, read-only folder, an output
    that appeared meanwhile) is one line too, exit 2; SIGTERM is one line and exit 143; Ctrl-C is one line,
    exit 130. Both stops are followed by ``interrupted``: what the command left behind (a callable: said as
    things stand when the stop came).
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        with stop_on_sigterm():
            return body()
    except KeyboardInterrupt as err:
        if debug_mode():
            raise
        # a training run says what it left and how to resume; otherwise the command's own word
        left = interrupted() if callable(interrupted) else interrupted
        said = str(err) if err.args else f"interrupted (Ctrl-C).{' ' + left if left else ''}"
        print(f"error: {said}", file=sys.stderr)
        return INTERRUPTED
    except (ValueError, FileNotFoundError, OSError, TerminatedError) as err:
        if debug_mode():
            raise
        if isinstance(err, TerminatedError):
            left = interrupted() if callable(interrupted) else interrupted
            print(f"error: {err}{'. ' + left if left else ''}", file=sys.stderr)
            return err.exit_code
        ours = isinstance(err, (ValueError, FileNotFoundError))  # ucse's own messages name the fix already
        message = err if ours else write_error(err)
        print(f"error: {message}", file=sys.stderr)
        return 2


def write_error(err: OSError) -> str:
    """One line for an ``OSError`` of the file system: which file, what happened, what to do."""
    where = f"'{err.filename}'" if err.filename else "a file"
    if err.errno == errno.EEXIST:
        return (
            f"{where} appeared while this command was writing it (another process?); it was not replaced. "
            "Pass overwrite=true to replace it, or choose another path."
        )
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"no space left writing {where} ({err.strerror}); results are written whole or not at all, so "
            "earlier ones are intact. Free some space (or write elsewhere) and rerun."
        )
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{where}: {err.strerror}; check its permissions (outputs need a writable folder)."
    return f"{err.strerror or err} ({where}); check that folder and rerun."
