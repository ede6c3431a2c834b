"""What a finished run folder holds, in one place.

``config.yaml`` + ``head/config.json`` + ``head/model.safetensors``: ``ucse eval``, ``ucse calibrate`` and
``fit_run_uncertainty`` all ask this module, so "is this a finished run" has one answer and one message.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ucse.config import ConfigError, TrainConfig, from_yaml
from ucse.config.env import quiet_loggers
from ucse.config.run_layout import RunFolder, read_run_metrics
from ucse.config.run_layout import reads_back_data as reads_back_data  # re-exported
from ucse.data import load_classification
from ucse.data.run_rows import read_rows
from ucse.data.tasks import TaskData, changed_splits
from ucse.heads.io import CONFIG_FILE, WEIGHTS_FILE

RUN_FILES = (RunFolder.CONFIG, f"{RunFolder.HEAD}/{CONFIG_FILE}", f"{RunFolder.HEAD}/{WEIGHTS_FILE}")
"""The files every finished run has (the head's profile and metrics.json are optional)."""

log = logging.getLogger(__name__)


def finished_run(run: str | Path) -> Path:
    """``run`` as a Path when it is a finished run folder.

    Raises:
        FileNotFoundError: naming the folder and what is missing, and what to pass instead.
    """
    path = Path(run)
    if not path.is_dir():
        what = "is a file, not a run folder" if path.exists() else "does not exist"
        raise FileNotFoundError(f"run={run} {what}; pass run=<a folder written by ucse train>.")
    for need in RUN_FILES:
        if not (path / need).is_file():
            raise FileNotFoundError(
                f"run={run} is not a finished ucse run: {need} is missing. "
                "Pass run=<a folder written by ucse train>."
            )
    return path


def check_same_splits(run: Path, data: TaskData, splits: tuple[str, ...], refuse: bool) -> None:
    """Whether reloaded ``data`` still give the run's ``splits``, as its ``metrics.json`` fingerprinted them.

    A data file edited since training, or a carve that changed between versions, would put other rows in a
    split: a profile refitted on "validation" rows the head trained on is optimistic, and its guarantees do
    not hold. A run without fingerprints (written before they existed, or a damaged ``metrics.json``) is not
    checked.

    Raises:
        ValueError: when ``refuse`` and a split differs (else a warning), naming the splits and the fix.
    """
    without = "the rows are not checked against the ones it was trained with"
    data_info = read_run_metrics(run, without).get("data")
    # changed_splits checks what it is given; anything but a dict here is no record
    recorded = data_info.get("fingerprints") if isinstance(data_info, dict) else None
    changed = changed_splits(recorded, data, splits)
    if not changed:
        return
    message = (
        f"run={run}: the {' and '.join(changed)} rows that data.path / the task give now are not the ones "
        "this run was trained with (the data changed since, or were carved differently)"
    )
    if refuse:
        raise ValueError(
            f"{message}; a profile fitted on them could read rows the head trained on. Retrain the run on "
            "the data as they are now (ucse train ... overwrite=true), or restore the data it was trained on."
        )
    log.warning("%s: the figures below are for the rows given now.", message)


def refuse_unreadable_data(
    run: Path, cfg: TrainConfig, data_root: str | None, command: str, fix: str, data_path: str | None = None
) -> None:
    """Raise, naming the run, ``command`` and ``fix``, when the run's data cannot be read back.

    Rows passed in memory are not on disk; a recorded ``data.root`` (or the ``data_root`` given) that is no
    folder from here names ``data_root=``; a recorded ``data.path`` (or the ``data_path`` given) that does
    not exist names ``data_path=`` (a moved or renamed training file: the train command's "Point it at your
    data" named a setting these commands do not take).
    """
    path = data_path or cfg.data.path
    if path is not None and not Path(path).expanduser().exists():
        given = f"data_path={data_path}" if data_path else f"the run's config.yaml records data.path={path}"
        raise ConfigError(
            f"{given}, which does not exist from here ({Path.cwd()}); pass data_path=<the run's training "
            f"file (or folder) where it is now> to {command} (its rows are checked against the run's)."
        )
    if not reads_back_data(cfg, data_root):
        raise ConfigError(
            f"run={run} was trained on data passed in memory, which {command} cannot read back; {fix}, or "
            "retrain from a file (data.path=...)."
        )
    root = data_root or cfg.data.root
    if cfg.data.path is None and root and not Path(root).expanduser().is_dir():  # relative, or moved
        given = f"data_root={data_root}" if data_root else f"the run's config.yaml records data.root={root}"
        raise ConfigError(
            f"{given}, which is not a folder from here ({Path.cwd()}); pass data_root=<the folder of the "
            "task data>."
        )


def relocate_data(cfg: TrainConfig, data_root: str | None, data_path: str | None) -> None:
    """Point ``cfg`` at the run's data where they are now (``data_root=``, ``data_path=``; ``None``: kept)."""
    if data_root:
        cfg.data.root = data_root
    if data_path:
        cfg.data.path = str(Path(data_path).expanduser().absolute())  # as train records it


def run_data(
    run: Path, cfg: TrainConfig, data_root: str | None, data_path: str | None, command: str, fix: str
) -> TaskData:
    """The rows a run was trained and tested on, as split: its own copy, else its data read again.

    The copy (``rows.parquet``, :func:`ucse.data.run_rows.read_rows`) is used where it is whole and matches
    the run's fingerprints, unless ``data_root`` or ``data_path`` say where to read the data instead; else
    the data are read as :func:`refuse_unreadable_data` allows (``command`` and ``fix`` name the caller in its
    message) from where ``relocate_data`` points ``cfg``.
    """
    if not data_root and not data_path:
        own = read_rows(run)
        if own is not None:
            return own
    refuse_unreadable_data(run, cfg, data_root, command, fix, data_path)
    relocate_data(cfg, data_root, data_path)
    return load_classification(cfg.task, cfg.data, cfg.seed)


def run_labelled_texts(
    run: Path, data_path: str | None = None, data_root: str | None = None
) -> tuple[list[str] | None, str]:
    """Every labelled text of a run's own data (train, validation and test), read again as it was trained.

    Args:
        run: a run folder written by ``ucse train``.
        data_path: the run's training file where it is now (``None``: the ``data.path`` it records).
        data_root: the task data folder where it is now (``None``: the one it records).

    Returns:
        (the texts, ``""``), or (``None``, why they cannot be read from here): a caller that only uses them to
        leave texts out goes on without them, and says why. A run trained on rows passed in memory has no
        data to read again: (``None``, ``""``), nothing to say (its trainer holds the rows).
    """
    data = None if data_root or data_path else read_rows(run)
    if data is None:
        cfg = from_yaml(RunFolder(run).config)
        relocate_data(cfg, data_root, data_path)
        path = cfg.data.path
        if path is not None and not Path(path).expanduser().exists():
            return None, f"its training file {path} is not there from here (pass data_path=<where it is now>)"
        if not reads_back_data(cfg):
            return None, ""
        try:
            # the notes on these rows were said when the run trained them
            with quiet_loggers(("ucse.data",), logging.ERROR):
                data = load_classification(cfg.task, cfg.data, cfg.seed)
        except (ConfigError, OSError, ValueError) as err:
            return None, f"its data do not read back ({err})"
    ood = data.ood["text"][:] if data.ood is not None else []  # the held-out labels' rows are labelled too
    return [t for split in ("train", "validation", "test") for t in data.texts(split)] + ood, ""
