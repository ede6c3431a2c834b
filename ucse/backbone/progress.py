"""Progress of the backbone pass that builds a cache entry: a tqdm bar on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

LOG_EVERY_S = 60.0
"""Without a terminal, one log line per this many seconds (a pass shorter than that logs nothing)."""


class PassProgress:
    """Counts texts through a backbone pass and shows texts/s and the ETA.

    On a terminal this is a tqdm bar (tqdm ships with transformers and datasets); when stderr is not a
    terminal (logs, CI, tests) a bar would fill the log with carriage returns, so a long pass logs one line
    every ``LOG_EVERY_S`` seconds instead and a short one stays silent.

    Args:
        total: number of texts in the pass.
        desc: what is being encoded (shown before the bar / in the log lines).
        enabled: ``False`` shows nothing at all.
    """

    def __init__(self, total: int, desc: str, enabled: bool = True) -> None:
        self.total = total
        self.desc = desc
        self.done = 0
        self._t0 = time.perf_counter()
        self._last_log = self._t0
        tty = enabled and sys.stderr.isatty()
        self._log = enabled and not tty
        self._bar = tqdm(total=total, desc=desc, unit="text", leave=False) if tty else None

    def update(self, n: int) -> None:
        """Record ``n`` more texts encoded."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if self._log and now - self._last_log >= LOG_EVERY_S:
            self._last_log = now
            rate = self.done / (now - self._t0)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            logger.info(
                "%s: %d/%d texts, %.1f texts/s, ETA %s", self.desc, self.done, self.total, rate, _hms(eta)
            )

    def close(self) -> None:
        """Remove the bar (a finished pass leaves no bar behind)."""
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> PassProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hms(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
