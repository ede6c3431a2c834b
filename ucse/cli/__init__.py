"""What the command-line entry points share: logging set-up and how input errors reach the user."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable


def run_cli(body: Callable[[], int]) -> int:
    """Run a command's body; an input error prints one ``error: ...`` line and exits 2.

    Every ucse input error (bad config key, bad row, missing package or run folder...) is a ``ValueError``
    subclass or ``FileNotFoundError`` whose message names the fix, so a traceback adds nothing for the
    user; ``UCSE_DEBUG=1`` re-raises to show it.
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return body()
    except (ValueError, FileNotFoundError) as err:
        if os.environ.get("UCSE_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
