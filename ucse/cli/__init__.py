"""What the command-line entry points share: logging set-up and how input errors reach the user."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

INTERRUPTED = 130
"""Exit status after Ctrl-C: 128 + SIGINT, what a shell reports for a process the signal ended."""


def run_cli(body: Callable[[], int], interrupted: str = "") -> int:
    """Run a command's body; an input error prints one ``error: ...`` line and exits 2, Ctrl-C exits 130.

    Every ucse input error (bad config key, bad row, missing package or run folder...) is a ``ValueError``
    subclass or ``FileNotFoundError`` whose message names the fix, so a traceback adds nothing for the
    user; ``UCSE_DEBUG=1`` re-raises to show it. Any other ``OSError`` (a full disk, a read-only folder)
    names the file in its own message. Ctrl-C ends in one line too, followed by ``interrupted`` (what the
    command left behind).
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return body()
    except KeyboardInterrupt:
        if os.environ.get("UCSE_DEBUG"):
            raise
        print(f"error: interrupted (Ctrl-C).{' ' + interrupted if interrupted else ''}", file=sys.stderr)
        return INTERRUPTED
    except (ValueError, FileNotFoundError) as err:
        if os.environ.get("UCSE_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if os.environ.get("UCSE_DEBUG"):
            raise
        print(f"error: {err}; check the disk space and permissions of that path.", file=sys.stderr)
        return 2
