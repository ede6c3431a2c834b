"""A run folder's layout: every name ``ucse train`` writes, in one place.

Training writes the folder; ``ucse eval`` / ``calibrate`` / ``predict`` / ``export``, the sweep and the
estimator read it. All take the names from :class:`RunFolder`, so a file moves in one line. It lives beside
the config (the lowest layer) because every layer above, training included, needs it. So does the one
reader of ``metrics.json`` (:func:`read_run_metrics`), which the inference path needs without the training
stack.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ucse import json_read
from ucse.config.env import DATA_ENV

if TYPE_CHECKING:
    from ucse.config.schema import TrainConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, init=False)
class RunFolder:
    """The paths inside one run folder (nothing is read or created here).

    Attributes:
        path: the run folder (``output_dir``).
    """

    path: Path

    CONFIG = "config.yaml"
    """The run's resolved config: what ``resume``, ``eval`` and ``calibrate`` read back."""
    METRICS = "metrics.json"
    """Validation / test scores and timings."""
    HEAD = "head"
    """The saved head and its uncertainty profile (``ucse.heads.io``)."""
    CHECKPOINTS = "checkpoints"
    """Lightning checkpoints (``last.ckpt`` every epoch, the best epoch's)."""
    LAST_CHECKPOINT = "last.ckpt"
    """The checkpoint ``ckpt_path=last`` resumes from, inside ``checkpoints/``."""
    HELDOUT = "heldout.safetensors"
    """``head=auto``'s held-out outputs, which the profile is calibrated on after a refit."""
    LOGS = "logs"
    """CSV and TensorBoard logs."""
    LABEL_REVIEW = "label_review.csv"
    """The held-out rows, most doubtful label first (``ucse.uncertainty.label_review``; written once)."""
    ROWS = "rows.parquet"
    """The run's own copy of its rows as split (``ucse.data.run_rows``): what later commands read again."""

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    config = property(lambda self: self.path / self.CONFIG, doc="``config.yaml``.")
    metrics = property(lambda self: self.path / self.METRICS, doc="``metrics.json``.")
    head = property(lambda self: self.path / self.HEAD, doc="``head/``.")
    checkpoints = property(lambda self: self.path / self.CHECKPOINTS, doc="``checkpoints/``.")
    last_checkpoint = property(
        lambda self: self.checkpoints / self.LAST_CHECKPOINT, doc="``checkpoints/last.ckpt``."
    )
    heldout = property(lambda self: self.path / self.HELDOUT, doc="``heldout.safetensors``.")
    logs = property(lambda self: self.path / self.LOGS, doc="``logs/``.")
    label_review = property(lambda self: self.path / self.LABEL_REVIEW, doc="``label_review.csv``.")
    rows = property(lambda self: self.path / self.ROWS, doc="``rows.parquet``.")

    SCRATCH_PREFIX = "ucse-fit-"
    """``UcseClassifier.fit`` without ``output_dir`` trains in ``<tmp>/ucse-fit-<random>/run``, removed with
    the estimator: no command should be offered on it."""

    @property
    def scratch(self) -> bool:
        """Whether this is an estimator's temporary run folder (:attr:`SCRATCH_PREFIX`)."""
        return self.path.name == "run" and self.path.parent.name.startswith(self.SCRATCH_PREFIX)

    def eval_report(self, split: str) -> Path:
        """``eval.json`` for the test split, ``eval-<split>.json`` for another."""
        return self.path / ("eval.json" if split == "test" else f"eval-{split}.json")


def resolve_head_dir(path: str | Path, name: str = "run=") -> Path:
    """The head folder of a run folder (``<run>/head``) or a head folder itself.

    Args:
        path: the folder.
        name: how the error names the path: the command's ``run=`` setting, or a Python call's argument.

    Raises:
        FileNotFoundError: naming the path and what a run or head folder holds.
    """
    p = Path(path).expanduser()
    for cand in (RunFolder(p).head, p):
        if (cand / "config.json").is_file() and (cand / "model.safetensors").is_file():
            return cand
    written = "written by `ucse train` (or UcseClassifier.save_pretrained)"
    if not p.exists():
        raise FileNotFoundError(f"{name}{path}: no such folder. Pass a run folder {written}.")
    raise FileNotFoundError(
        f"{name}{path} is neither a finished ucse run nor a head folder: no head/config.json + "
        f"head/model.safetensors (or config.json + model.safetensors) in it. Pass a run folder {written}, or "
        "its head/ folder."
    )


def run_of_head(head_dir: str | Path) -> Path | None:
    """The run folder a head folder belongs to: its parent, where the head is ``<run>/head`` of a run.

    A head saved elsewhere (``save_pretrained("proj/exported")``) has no run, even beside a ``config.yaml``
    of the user's own: reading that as the run's made predict fail on an unknown config key.
    """
    head = Path(head_dir)
    run = RunFolder(head.parent)
    # metrics.json too: a head exported into a folder named "head" beside a config.yaml of the user's own
    # was taken for a run's (a run writes its metrics before it is finished)
    return run.path if run.head == head and run.config.is_file() and run.metrics.is_file() else None


def read_run_metrics(run: str | Path, without: str) -> dict[str, Any]:
    """A run's ``metrics.json`` as a dict; ``{}`` where the run has none or it is unreadable or not an object.

    The one reader of the file (``from_pretrained``'s ``metrics_``, the split check, ``ucse review``'s probe
    C). Read back from disk, so untrusted: a damaged file is never fatal, since every reader has a way on
    without it, and gets one warning naming the file, the error and ``without`` (what the caller does
    instead).
    """
    path = RunFolder(run).metrics
    if not path.is_file():
        return {}
    try:
        metrics = json_read.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        log.warning("%s is unreadable (%s): %s.", path, str(err).splitlines()[0][:200], without)
        return {}
    if not isinstance(metrics, dict):
        log.warning("%s holds a JSON %s, not an object: %s.", path, type(metrics).__name__, without)
        return {}
    return metrics


def trained_on_test(metrics: dict[str, Any]) -> bool:
    """Whether a run's shipped head was refitted on its test rows too (``data.refit_test``): its metrics."""
    selection = metrics.get("selection")
    return isinstance(selection, dict) and bool(selection.get("refit_test"))


def reads_back_data(cfg: TrainConfig, data_root: str | None = None) -> bool:
    """Whether a run's data can be read again from its config (a file, a task folder or the hub).

    A run trained on rows passed in memory (``ucse.train((texts, labels))``) records no source: commands that
    reread the data (``ucse calibrate``, ``ucse review``) cannot serve it.
    """
    if cfg.data.path is not None or cfg.task.hf_path is not None or data_root or cfg.data.root:
        return True
    # A task folder found through UCSE_DATA_DIR at training (the config keeps no root): readable where the
    # variable still leads to it. Rows passed in memory have no folder of their own there.
    env = os.environ.get(DATA_ENV)
    return bool(env) and (Path(env).expanduser() / cfg.task.name).is_dir()


def wants_profile(run: str | Path, if_unreadable: bool) -> bool:
    """Whether the run's ``config.yaml`` asks for an uncertainty profile.

    ``if_unreadable`` where the file cannot be read (it is untrusted): the caller decides what that means.
    """
    from ucse.config import ConfigError, from_yaml  # the package imports this module

    try:
        return bool(from_yaml(RunFolder(run).config).uncertainty.enabled)
    except (ConfigError, OSError, ValueError):
        return if_unreadable


def profile_repair(run: str | Path, rows_intact: bool = False) -> str:
    """How a run without its uncertainty profile gets one, as a clause of a message.

    ``ucse calibrate`` where the run's data can be read back, from its data or from its own copy of its rows
    (``rows_intact``: :func:`ucse.data.run_rows.intact`, which this layer cannot call); a run trained on rows
    passed in memory without that copy (or an estimator's scratch run) is trained again instead.
    """
    from ucse.config import ConfigError, from_yaml  # the package imports this module

    folder = RunFolder(run)
    if folder.scratch:
        return "fit the estimator again (its run folder is a temporary one)"
    try:
        cfg = from_yaml(folder.config)
    except (ConfigError, OSError, ValueError):  # untrusted: a config that cannot be read serves no command
        return "train it again (its config.yaml cannot be read)"
    if reads_back_data(cfg) or rows_intact:
        return f"`ucse calibrate run={run}` fits it without retraining"
    return "it was trained on data passed in memory, which `ucse calibrate` cannot read back: train it again"
