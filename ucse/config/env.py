"""Environment switches read in more than one place."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

DATA_ENV = "UCSE_DATA_DIR"
"""A folder of local task data (``<root>/<TaskName>/{train,validation,test}.jsonl``) where ``data.root`` is
unset."""
DEBUG_ENV = "UCSE_DEBUG"
"""Set to 1 to see tracebacks and every library warning instead of ucse's one-line errors."""


def debug_mode() -> bool:
    """True when ``UCSE_DEBUG`` is set to anything but an empty string, ``0``, ``false``, ``no`` or ``off``.

    ``UCSE_DEBUG=0`` reads as "off", as a user who writes it means.
    """
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


@contextmanager
def quiet_loggers(names: tuple[str, ...], level: int = logging.WARNING) -> Iterator[None]:
    """Raise the loggers ``names`` to ``level`` for the ``with`` block, then give back their own levels.

    Under ``UCSE_DEBUG=1`` nothing is raised: everything shows, for the one who asked.
    """
    loggers = [logging.getLogger(name) for name in names]
    levels = [lg.level for lg in loggers]
    if not debug_mode():
        for lg in loggers:
            lg.setLevel(level)
    try:
        yield
    finally:
        for lg, was in zip(loggers, levels, strict=True):
            lg.setLevel(was)
