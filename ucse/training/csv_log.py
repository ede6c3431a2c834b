"""The run's ``logs/metrics.csv``, kept across a resume.

Lightning's CSV writer deletes ``metrics.csv`` whenever its folder is not empty, so a run resumed with
``ckpt_path=last`` kept only the epochs it trained after the resume: the log of every epoch before the kill
was gone. This logger keeps the rows of the epochs the checkpoint holds and drops those of the epoch the
kill interrupted, which the resumed run trains, and logs, again.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment

from ucse import atomic

log = logging.getLogger(__name__)


def _epoch(row: dict[str, str]) -> int | None:
    """The row's ``epoch`` column as an int, or None when absent or not an integer."""
    try:
        return int(row.get("epoch") or "")
    except ValueError:
        return None


class _KeepingWriter(ExperimentWriter):
    """Lightning's writer, which on construction keeps the rows of epochs ``<= keep_through`` instead."""

    def __init__(self, log_dir: str, keep_through: int) -> None:
        self._keep_through = keep_through
        super().__init__(log_dir)  # calls _check_log_dir_exists

    def _check_log_dir_exists(self) -> None:
        path = Path(self.metrics_file_path)
        if not path.is_file():
            return
        try:
            with path.open(newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                rows = list(reader)
                keys = list(reader.fieldnames or [])
        except (OSError, UnicodeDecodeError, csv.Error) as err:
            # The run's own log, damaged: start a fresh one, as Lightning would.
            log.warning("%s is unreadable (%s); the resumed run starts a new log.", path, err)
            super()._check_log_dir_exists()
            return
        kept = [r for r in rows if (e := _epoch(r)) is not None and e <= self._keep_through]
        with atomic.atomic_file(path) as fh:
            # sorted, as the writer keeps its keys: it appends in that order under this header
            writer = csv.DictWriter(fh, fieldnames=sorted(keys))
            writer.writeheader()
            writer.writerows(kept)
        self.metrics_keys = sorted(keys)


class RunCSVLogger(CSVLogger):
    """``CSVLogger(run_dir, name="logs", version="")`` that keeps a resumed run's earlier epochs.

    Args:
        run_dir: the run folder (the log is ``run_dir/logs/metrics.csv``).
        keep_through_epoch: on a resume, the last epoch the checkpoint holds; None for a fresh run.
    """

    def __init__(self, run_dir: str | Path, keep_through_epoch: int | None = None) -> None:
        super().__init__(run_dir, name="logs", version="")
        self._keep_through_epoch = keep_through_epoch

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        """The writer, made on first use (as Lightning's), keeping the earlier rows on a resume."""
        if self._experiment is None:
            if self._keep_through_epoch is None:
                return super().experiment
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _KeepingWriter(self.log_dir, self._keep_through_epoch)
        return self._experiment
