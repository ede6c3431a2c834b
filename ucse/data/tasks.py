"""Task discovery, the data-root rule, and the container for a loaded classification task."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np

from ucse.config import DataConfig, did_you_mean, group_choices
from ucse.config.env import DATA_ENV as DATA_ENV  # re-exported: readers import it from here

SPLITS = ("train", "validation", "test")
LAYOUT_HINT = (
    "one folder per task named as the MTEB task, holding {train,validation,test}.jsonl "
    "(see shared/data/README.md for the layout)"
)


class DataError(ValueError):
    """Task data is missing, malformed or unreachable; the message says what and how to fix it."""


def resolve_data_root(data_cfg: DataConfig) -> Path | None:
    """Local data root: ``data.root``, else env ``UCSE_DATA_DIR``, else ``None`` (load from the hub).

    Args:
        data_cfg: the run's data section.

    Returns:
        The root folder, or ``None`` when tasks come from the hub.
    """
    root = data_cfg.root or os.environ.get(DATA_ENV) or None
    return Path(root).expanduser() if root else None


def task_names() -> list[str]:
    """Names of the task configs under ``configs/task/`` (one YAML file per task)."""
    return group_choices("task")


def task_folder(root: Path, name: str) -> Path:
    """Return ``<root>/<name>``, failing with the task folders present when it does not exist.

    Args:
        root: the local data root.
        name: the task name (folder name).

    Raises:
        DataError: when the root or the task folder is missing.
    """
    folder = root / name
    if folder.is_dir():
        return folder
    if not root.is_dir():
        raise DataError(
            f"Data root {root} (from data.root or env {DATA_ENV}) is not a folder. "
            f"Point it at a local copy with {LAYOUT_HINT}."
        )
    present = sorted(p.name for p in root.iterdir() if p.is_dir())
    raise DataError(
        f"No folder for task '{name}' under data root {root}. Task folders present: "
        f"{', '.join(present) or '(none)'}.{did_you_mean(name, present)} Expected {LAYOUT_HINT}."
    )


@dataclass
class TaskData:
    """A loaded classification task with standardised splits.

    Attributes:
        name: the task name.
        splits: ``train``, ``validation`` and ``test``, each with columns ``text`` (string) and
            ``label`` (``ClassLabel`` with ids 0..C-1 naming ``label_names``).
        label_names: class names; ``label_names[i]`` is the name of label id ``i``.
        source: the task folder, or ``<hub id>@<revision>`` when loaded from the hub.
        dropped: rows dropped by ``data.drop_bad_rows`` for ``train``/``validation``/``test`` (a pool
            carved into train and test by ``task.carved_test_fraction`` reports under ``train``).
        ood: test rows of the labels held out by ``data.exclude_labels`` (``text`` + ``label_text``, the
            original label name): out-of-distribution inputs, in no split and no class; ``None`` when no
            label is held out.
        excluded_labels: the held-out label names (not in ``label_names``).
        integer_labels: the labels were integer ids in the data (``label_names`` are their decimal forms),
            so that a saved head gives them back as integers (``meta.label_type``).
        carved: the splits carved from the user's own rows (``validation``, ``test``), not given as files or
            by the task: a carved test slice may train the shipped head once it has been scored
            (``data.refit_test``); a task's own test split never does.
    """

    name: str
    splits: datasets.DatasetDict
    label_names: list[str]
    source: str
    dropped: dict[str, int] = field(default_factory=dict)
    ood: datasets.Dataset | None = None
    excluded_labels: list[str] = field(default_factory=list)
    integer_labels: bool = False
    carved: list[str] = field(default_factory=list)

    @property
    def label_values(self) -> list[str] | list[int]:
        """The labels as the data wrote them, in id order: ints for integer labels, as ``predict`` answers."""
        return [int(n) for n in self.label_names] if self.integer_labels else list(self.label_names)

    @property
    def num_classes(self) -> int:
        """Number of classes C."""
        return len(self.label_names)

    def texts(self, split: str) -> list[str]:
        """The texts of ``split`` in row order."""
        # `[:]` materialises the Arrow column in one call; iterating a `datasets` Column goes row by row.
        return self.splits[split]["text"][:]

    def labels(self, split: str) -> np.ndarray:
        """(N,) integer labels of ``split`` in row order."""
        return np.asarray(self.splits[split]["label"][:], dtype=np.int64)

    def fingerprints(self, splits: tuple[str, ...] = SPLITS) -> dict[str, str]:
        """SHA-256 of each split's (label name, text) rows, in sorted order: which rows a run saw where.

        Saved with a run (``metrics.json``), so that refitting its profile on reloaded data can tell whether
        the splits are still the ones it was trained on (an edited file, or another carve).
        """
        out = {}
        names = self.label_names
        for split in splits:
            digest = hashlib.sha256()
            for text, label in sorted(zip(self.texts(split), (names[y] for y in self.labels(split)))):
                digest.update(f"{label}\t{text}\n".encode())
            out[split] = digest.hexdigest()
        return out


def with_test_in_train(data: TaskData) -> TaskData:
    """``data`` with its test rows moved into train, after train's; its test split left empty.

    How a head refitted on them (``data.refit_test``) saw the rows; every text keeps its place in the pool.
    """
    train, test = data.splits["train"], data.splits["test"]
    splits = datasets.DatasetDict(
        {
            "train": datasets.concatenate_datasets([train, test]),
            "validation": data.splits["validation"],
            "test": test.select([]),
        }
    )
    return dataclasses.replace(data, splits=splits)


def changed_splits(recorded: object, data: TaskData, splits: tuple[str, ...] = SPLITS) -> list[str] | None:
    """Those of ``splits`` whose rows differ from the ``recorded`` fingerprints (``None``: nothing usable).

    ``recorded`` is read back from a run's ``metrics.json``, so it is checked before use: a run written
    before fingerprints existed, or a damaged file, gives ``None`` (cannot tell) rather than an error.
    """
    if not isinstance(recorded, dict) or not all(isinstance(recorded.get(s), str) for s in SPLITS):
        return None
    now = data.fingerprints(splits)
    return [s for s in splits if recorded[s] != now[s]]
