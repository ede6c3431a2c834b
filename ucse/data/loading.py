"""Load a classification task (``data.path``, local jsonl folder or hub) into checked, split data.

``data.path`` (the user's own data) is handed to :mod:`ucse.data.sources`. The MTEB sources meet after
reading: columns are renamed to ``text``/``label``, rows are checked (:mod:`ucse.data.checks`), labels are
re-indexed to the train split's label set, then the validation and (optionally) test slices are carved with
stratified, seeded ``Dataset.train_test_split`` calls.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from ucse.config import DataConfig, TaskConfig, TaskType
from ucse.data.checks import label_problems, normalise_label, resolve_bad_rows, text_problems
from ucse.data.files import load_in_memory, read_file
from ucse.data.sources import load_task_data
from ucse.data.splitting import assemble, check_fraction, slice_name, split_by_text, stratified_split
from ucse.data.tasks import DATA_ENV, LAYOUT_HINT, DataError, TaskData, resolve_data_root, task_folder
from ucse.hub import hub_unreachable

logger = logging.getLogger(__name__)


def hub_id(task: TaskConfig) -> str:
    """``<hf_path>@<revision>`` plus the subset, naming a hub source in messages and ``TaskData.source``."""
    subset = f" (subset {task.hf_subset})" if task.hf_subset else ""
    return f"{task.hf_path}@{task.hf_revision or 'main'}{subset}"


def load_hub(task: TaskConfig) -> datasets.DatasetDict:
    """Load a task's hub dataset, turning any failure (offline, unreachable, unknown id) into a clear error.

    Raises:
        DataError: naming the hub id, the original error and how to use a local copy instead.
    """
    if not task.hf_path:
        raise DataError(
            f"Task '{task.name}' has no data source: set data.path=<your file or folder> (csv, tsv, jsonl, "
            f"json, parquet, or a save_to_disk folder), or data.root=<folder> (env {DATA_ENV}) with "
            f"{LAYOUT_HINT}, or task.hf_path=<hub dataset id>."
        )
    local = f"Without hub access, set data.root=<folder> (or env {DATA_ENV}) to a local copy: {LAYOUT_HINT}."
    cached = Path(datasets.config.HF_DATASETS_CACHE) / task.hf_path.replace("/", "___")
    host = None if cached.exists() else hub_unreachable()  # a cached copy: datasets falls back to it
    if host is not None:  # else huggingface_hub retries for ~23 s, printing each retry twice
        raise DataError(f"Could not load task '{task.name}' from the hub ({hub_id(task)}): {host}\n{local}")
    try:
        return datasets.load_dataset(task.hf_path, task.hf_subset, revision=task.hf_revision)
    except Exception as err:  # offline mode, network and hub errors all surface differently
        raise DataError(
            f"Could not load task '{task.name}' from the hub ({hub_id(task)}): {type(err).__name__}: {err}\n"
            f"{local}"
        ) from err


def read_jsonl(path: Path) -> datasets.Dataset:
    """Read one jsonl file into an in-memory ``Dataset`` (a throw-away Arrow cache: nothing is left on disk).

    Raises:
        DataError: the file cannot be read, naming it and the line at fault (as for ``data.path``).
    """
    try:  # no progress bar, no error log (a second line), and no Arrow cache left behind
        return load_in_memory("json", path)
    except Exception as err:  # noqa: BLE001 - Arrow's DatasetGenerationError names no line
        read_file(path)  # re-reads only the failed file, to raise the DataError naming its line
        raise DataError(f"{path} could not be read as JSON Lines ({type(err).__name__}: {err}).") from None


def _standardise_columns(ds: datasets.Dataset, data: DataConfig, where: str) -> datasets.Dataset:
    """Rename the configured columns to ``text``/``label``; expose ClassLabel names as ``label_text``."""
    for src, dst, key in (
        (data.text_column, "text", "text_column"),
        (data.label_column, "label", "label_column"),
    ):
        if src != dst and src in ds.column_names:
            if dst in ds.column_names:
                ds = ds.remove_columns(dst)
            ds = ds.rename_column(src, dst)
        if dst not in ds.column_names:
            raise DataError(
                f"{where} has no column '{src}' (data.{key}); its columns are {ds.column_names}. "
                f"Set data.{key} to the right one."
            )
    label_feature = ds.features["label"]
    if isinstance(label_feature, datasets.ClassLabel) and "label_text" not in ds.column_names:
        ds = ds.add_column("label_text", label_feature.int2str(ds["label"]))
    return ds


def _read_splits(task: TaskConfig, data: DataConfig, names: list[str]) -> tuple[dict, dict, str]:
    """Read the named splits that exist; return (splits, where each came from, source)."""
    root = resolve_data_root(data)
    if root is not None:
        folder = task_folder(root, task.name)
        paths = {s: folder / f"{s}.jsonl" for s in names if (folder / f"{s}.jsonl").is_file()}
        where = {s: str(p) for s, p in paths.items()}
        raw = {s: read_jsonl(p) for s, p in paths.items()}
        available, source = sorted(p.name for p in folder.glob("*.jsonl")), str(folder)
    else:
        source = hub_id(task)
        hub = load_hub(task)
        raw = {s: hub[s] for s in names if s in hub}
        where = {s: f"hub {source} split '{s}'" for s in raw}
        available = list(hub)
    return {s: _standardise_columns(ds, data, where[s]) for s, ds in raw.items()}, where, (source, available)


@dataclass
class _LabelSpace:
    """The train label set: names in id order, and how raw labels map to ids."""

    names: list[str]
    by_name: bool  # labels are identified by ``label_text`` (else by integer ``label``)
    key_to_id: dict[Any, int]
    int_to_name: dict[int, str]  # train's id -> name map, for splits without ``label_text``


def _label_space(keys: list[Any], ints: list[int | None] | None, by_name: bool) -> _LabelSpace:
    """Build the label space from train's (checked) label keys and, when present, its integer ids."""
    if not by_name:
        order = sorted(set(keys))
        return _LabelSpace([str(k) for k in order], False, {k: i for i, k in enumerate(order)}, {})
    names = sorted(set(keys))
    pairs = set(zip(ints, keys)) if ints is not None else set()
    int_to_name = dict(pairs)
    # Keep the data's own ids when they already encode the names one-to-one as 0..C-1 (the shared data
    # and the MTEB hub copies), so ids match published ones; otherwise number names in sorted order.
    if len(pairs) == len(names) == len(int_to_name) and set(int_to_name) == set(range(len(names))):
        names = [int_to_name[i] for i in range(len(names))]
    elif len(pairs) != len(int_to_name) or len(pairs) != len(names):
        int_to_name = {}  # ids are not a consistent encoding of the names: never map by id
    return _LabelSpace(names, True, {n: i for i, n in enumerate(names)}, int_to_name)


def _encode(
    ds: datasets.Dataset, split: str, where: str, space: _LabelSpace | None, drop: bool
) -> tuple[datasets.Dataset, int, _LabelSpace]:
    """Check a split's rows and re-index its labels; ``space=None`` builds the space (train)."""
    by_name = space.by_name if space is not None else "label_text" in ds.column_names
    if by_name and "label_text" not in ds.column_names:
        if not space.int_to_name:
            raise DataError(
                f"{where} has no 'label_text' column and train's integer labels do not map one-to-one to "
                "train's label names, so its labels cannot be matched to train's. Add 'label_text'."
            )
        column, key_by_name, allowed = "label", False, set(space.int_to_name)
    else:
        column, key_by_name = ("label_text", True) if by_name else ("label", False)
        allowed = set(space.key_to_id) if space is not None else None
    raw_labels = ds[column][:]  # one Arrow read; indexing a Column per row is slow
    bad = text_problems(ds, "text") + label_problems(raw_labels, column, key_by_name, allowed)
    keep = resolve_bad_rows(len(ds), bad, split=split, where=where, drop=drop)
    keys = [normalise_label(raw_labels[i], key_by_name) for i in keep]
    if space is None:
        ints = [normalise_label(v, False) for v in ds.select(keep)["label"][:]] if by_name else None
        space = _label_space(keys, ints, by_name)
    if by_name and column == "label":
        keys = [space.int_to_name[k] for k in keys]
    texts = ds.select(keep)["text"][:]
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=space.names)}
    )
    encoded = datasets.Dataset.from_dict(
        {"text": texts, "label": [space.key_to_id[k] for k in keys]}, features=features
    )
    return encoded, len(ds) - len(keep), space


def _split(
    ds: datasets.Dataset, fraction: float, seed: int, key: str, data: DataConfig, source: str
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """(rest, slice): a stratified, seeded ``fraction`` of ``ds``, copies of a text on one side."""

    def cut(d: datasets.Dataset) -> tuple[datasets.Dataset, datasets.Dataset]:
        parts = stratified_split(d, fraction, seed, slice_name(key, fraction))
        return parts["train"], parts["test"]

    return split_by_text(ds, data.group_copies is not False, cut, source, key)


def load_classification(task: TaskConfig, data: DataConfig, seed: int) -> TaskData:
    """Load, check and split a classification task: the one entry point of training and evaluation.

    ``data.path`` (the user's own file or folder) wins and goes through
    :func:`ucse.data.sources.load_task_data`; otherwise the task is read from ``data.root`` (env
    ``UCSE_DATA_DIR``) in the ``shared/data`` layout, else from the hub (``task.hf_path``).

    Args:
        task: the task config (name, hub id, columns, split names).
        data: where data comes from, the validation fraction, bad-row policy and subsample sizes.
        seed: seed of every carved slice and subsample.

    Returns:
        The task with ``train``/``validation``/``test`` splits of ``text`` + ``label`` (ClassLabel).

    Raises:
        DataError: on missing folders/files/splits, unreachable hub, or bad rows (unless dropped).
    """
    if task.type != TaskType.classification:
        raise DataError(f"Task '{task.name}' is a {task.type.value} task; use ucse.data.pairs for it.")
    if data.path is not None:
        return load_task_data(data.path, task, data, seed)
    # With carved_test_fraction, test_split is a single pool that provides both train and test.
    pool = task.test_split if task.carved_test_fraction is not None else "train"
    names = list(
        dict.fromkeys([pool, task.test_split] + ([task.validation_split] if task.validation_split else []))
    )
    raw, where, (source, available) = _read_splits(task, data, names)
    for required in dict.fromkeys([pool, task.test_split]):
        if required not in raw:
            raise DataError(
                f"Task '{task.name}' has no '{required}' split in {source}; found {available}. "
                f"Expected {LAYOUT_HINT}."
            )
    enc, dropped = {}, {}
    enc[pool], dropped[pool], space = _encode(raw[pool], pool, where[pool], None, data.drop_bad_rows)
    for name in raw:
        if name != pool:
            enc[name], dropped[name], _ = _encode(raw[name], name, where[name], space, data.drop_bad_rows)

    if task.carved_test_fraction is not None:
        key = "task.carved_test_fraction"
        fraction = check_fraction(task.carved_test_fraction, key)
        train, test = _split(enc[pool], fraction, seed, key, data, source)
    else:
        train, test = enc["train"], enc[task.test_split]
    if task.validation_split and task.validation_split in enc:
        validation = enc[task.validation_split]
    else:
        if task.validation_split:
            logger.warning(
                "Task '%s' has no '%s' split; carving one from train.", task.name, task.validation_split
            )
        fraction = check_fraction(data.val_fraction, "data.val_fraction")
        train, validation = _split(train, fraction, seed, "data.val_fraction", data, source)

    # Report drops by role; a pool carved into train and test reports its drops under train.
    roles = {"train": pool, "validation": task.validation_split, "test": task.test_split}
    counts = {
        role: dropped.get(name, 0) if name and (role == "train" or name != pool) else 0
        for role, name in roles.items()
    }
    return assemble(task.name, train, validation, test, space.names, source, counts, data, seed)
