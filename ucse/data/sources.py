"""The user's own labelled texts, from any common form, as a checked, split :class:`TaskData`.

:func:`load_task_data` takes a path (``data.path``), an in-memory ``datasets.Dataset``/``DatasetDict``, a
pandas ``DataFrame`` or a ``(texts, labels)`` pair, and returns the same ``TaskData`` as the MTEB tasks:

- columns ``text_column``/``label_column`` (``text``/``label`` by default); a missing one fails listing the
  columns found. An integer label column next to a ``label_text`` column (the ``../shared/data`` layout) is
  read by its names.
- labels are names (strings, or ``true``/``false``) or integer ids. Names are numbered in sorted order
  (``label_names`` is sorted, like scikit-learn's ``classes_``); a ``ClassLabel`` column keeps its own order;
  integer ids are sorted numerically and named by their decimal form. The label set comes from train only: a
  validation or test label that train lacks fails, naming it and its line.
- a missing test split is carved from train (stratified, seeded, ``data.test_fraction``), then a missing
  validation split (``data.val_fraction`` of what is left).
- every bad row (missing/empty text, missing or malformed label) fails in one error naming the file and
  the line (or the 0-based row for Parquet and in-memory data), unless ``data.drop_bad_rows``.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pandas as pd

from ucse.config import DataConfig, TaskConfig, default_task_name
from ucse.data.checks import none_if_na, shown
from ucse.data.columns import (
    check_split,
    label_kind,
    list_in_text,
    read_columns,
    refuse_fractional_labels,
    respell,
    similar_key,
    spellings,
)
from ucse.data.duplicates import text_groups, text_key
from ucse.data.files import SPLIT_FILES, RawSplit, read_path
from ucse.data.splitting import KEEP_WHOLE_ROWS, assemble, carve, check_carvable
from ucse.data.tasks import DataError, TaskData

logger = logging.getLogger(__name__)

DataSource = str | Path | datasets.Dataset | datasets.DatasetDict | pd.DataFrame | tuple | list
"""What :func:`load_task_data` accepts."""
ROLES = ("train", "validation", "test")


def _from_memory(source: Any, text_column: str, label_column: str) -> tuple[dict[str, RawSplit], str]:
    """The splits of an in-memory source, and a description of it."""
    if isinstance(source, datasets.DatasetDict):
        roles = {}
        for name in source:
            role = next((r for r, names in SPLIT_FILES.items() if name.lower() in names), None)
            if role:
                roles[role] = RawSplit(f"DatasetDict split '{name}'", source[name])
        if "train" not in roles:
            if len(source) != 1:
                raise DataError(f"The DatasetDict has splits {list(source)} but none named 'train'.")
            name = next(iter(source))
            roles = {"train": RawSplit(f"DatasetDict split '{name}'", source[name])}
        return roles, "in-memory DatasetDict"
    if isinstance(source, datasets.Dataset):
        return {"train": RawSplit("the Dataset", source)}, "in-memory Dataset"
    if isinstance(source, pd.DataFrame):
        repeated = sorted({str(c) for c in source.columns[source.columns.duplicated()]})
        if repeated:
            raise DataError(f"The DataFrame has more than one column named {repeated}; rename them apart.")
        columns = {str(c): [none_if_na(v) for v in source[c].tolist()] for c in source.columns}
        # a Categorical's categories are the label order its user chose (low, mid, high), like a ClassLabel's
        cats = {
            str(c): [str(v) for v in source[c].cat.categories]
            for c in source.columns
            if isinstance(source[c].dtype, pd.CategoricalDtype)
            and all(isinstance(v, str) for v in source[c].cat.categories)
        }
        return {"train": RawSplit("the DataFrame", columns, categories=cats)}, "in-memory DataFrame"
    if isinstance(source, (tuple, list)) and len(source) == 2 and not isinstance(source[0], (str, dict)):
        # numpy scalars (np.array labels, np.int64, np.bool_) as the Python values they hold
        texts, labels = ([v.item() if isinstance(v, np.generic) else v for v in part] for part in source)
        if len(texts) != len(labels):
            raise DataError(
                f"(texts, labels) have different lengths: {len(texts)} texts, {len(labels)} labels."
            )
        if not texts:
            raise DataError("(texts, labels) are empty: give at least one labelled text per class.")
        data = {text_column: texts, label_column: labels}
        return {"train": RawSplit("the (texts, labels) lists", data)}, "in-memory (texts, labels)"
    raise DataError(
        f"Cannot read data of type {type(source).__name__}: give a file or folder path, a datasets.Dataset "
        "or DatasetDict, a pandas DataFrame, or a (texts, labels) pair of lists."
    )


def _label_names(
    keys: list, class_names: list[str] | None, where: str, column: str, left_out: set = frozenset()
) -> list[str]:
    """Train's label names in id order: a ClassLabel's own order, else sorted (ids numerically).

    ``left_out``: labels ``data.min_label_rows`` left out, still compared for spellings alike.
    """
    present = set(keys)
    names = [n for n in class_names if n in present] if class_names else [str(k) for k in sorted(present)]
    if not names:
        raise DataError(f"{where} has no usable rows.")
    if len(names) < 2:
        raise DataError(
            f"{where}: every train row has the label {names[0]!r}; a classifier needs at least two labels. "
            f"Check data.label_column={column!r}."
        )
    _warn_similar(names + sorted(str(k) for k in left_out), where)
    _warn_joined(names, where, column)
    return names


def _warn_similar(names: list[str], where: str) -> None:
    """Warn where label names differ only in letter case, surrounding spaces or Unicode form.

    ('Payroll' and 'payroll ', or 'café' composed and decomposed, which look identical.) A spreadsheet's
    typo, most likely, but possibly meant: they stay separate labels; the fix is the user's.
    """
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(similar_key(n), []).append(n)
    similar = [g for g in groups.values() if len(g) > 1]
    if similar:
        logger.warning(
            "%s: labels that differ only in letter case, surrounding spaces or Unicode form are read as "
            "different labels: %s. If they are one label, write them the same way in the file, or set "
            "data.merge_similar_labels=true.",
            where,
            shown([" and ".join(repr(n) for n in g) for g in similar], limit=5, sep="; "),
        )


def _merge_similar(read: dict, where: str) -> dict:
    """Every split's labels respelled as train's most used spelling (``data.merge_similar_labels``)."""
    canon = spellings(read["train"][1])
    merged, changed = {}, Counter()
    for role, (texts, labels, names, used) in read.items():
        labels, n = respell(labels, canon)
        merged[role] = (texts, labels, names, used)
        changed += n
    if changed:
        logger.info(
            "%s: data.merge_similar_labels read %s",
            where,
            shown(
                [f"{a!r} as {b!r} ({k} row{'s' if k > 1 else ''})" for (a, b), k in changed.items()], limit=8
            ),
        )
    return merged


def _rare_labels(labels: list, least: int, where: str) -> set:
    """The labels of fewer than ``least`` train rows (``data.min_label_rows``), named in a warning."""
    counts = Counter(labels)
    rare = {y for y, n in counts.items() if n < least}
    if rare and len(rare) > len(counts) - 2:
        raise DataError(
            f"{where}: data.min_label_rows={least} would leave {len(counts) - len(rare)} of {len(counts)} "
            "labels (a classifier needs two or more); lower it."
        )
    if rare:
        named = sorted(rare, key=lambda y: (-counts[y], str(y)))
        logger.warning(
            "%s: data.min_label_rows=%d leaves out %d of %d labels and their %d train rows (and their rows "
            "of any validation or test file): %s. Predictions never give them.",
            where,
            least,
            len(rare),
            len(counts),
            sum(counts[y] for y in rare),
            shown([f"{str(y)!r} ({counts[y]})" for y in named], limit=10),
        )
    return rare


JOINERS = re.compile(r"\s*[,;|+]\s*")
"""What joins several labels into one cell: a comma, semicolon, bar or plus (spaces around it allowed)."""


def _warn_joined(names: list[str], where: str, column: str) -> None:
    """Warn where labels are other labels joined by a separator: several labels per text, most likely.

    ('billing,refund' beside 'billing' and 'refund': an export of multi-label data.) Trained as it is, each
    combination is a class of its own, learnt from its own rows only and never predicted as its parts. A
    label such as 'Food, Drink' whose parts are no labels is left alone.
    """
    known = {n.strip().casefold() for n in names}
    joined = []
    for n in names:
        written = list_in_text(n)  # "['billing', 'refund']": a list written as text
        split = [str(p).strip() for p in written] if written is not None else JOINERS.split(n.strip())
        parts = [p.casefold() for p in split if p]
        if len(parts) > 1 and all(p in known for p in parts):
            joined.append(n)
    if joined:
        logger.warning(
            "%s: %d label(s) of %r are other labels joined by a separator (%s): each combination is trained "
            "as a label of its own, never predicted as its parts. If a text can carry several labels "
            "(multi-label classification, which ucse does not support), train one yes/no classifier per "
            "label; if the combinations are labels in their own right, nothing needs changing.",
            where,
            len(joined),
            column,
            shown([repr(n) for n in joined], limit=5),
        )


def load_task_data(
    source: DataSource,
    task: TaskConfig | None = None,
    data: DataConfig | None = None,
    seed: int = 0,
) -> TaskData:
    """Load your own labelled texts, from any common form, into checked train/validation/test splits.

    This is what ``python train.py data.path=...`` runs, and what a Python API (``ucse.train(data)``) calls.

    Args:
        source: a path (``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``/``.xlsx`` file, a folder of
            ``train``/``validation``/``test`` files, or a ``save_to_disk`` folder), a ``datasets.Dataset`` or
            ``DatasetDict``, a pandas ``DataFrame``, or a ``(texts, labels)`` pair of sequences.
        task: the task (its ``name``); ``None`` names the task after the path (file stem or folder name),
            or ``data`` in memory.
        data: columns (``data.text_column``/``data.label_column``), fractions, bad-row policy, excluded
            labels and subsample sizes; ``None`` = defaults.
        seed: seed of the carved slices, the excluded-label draw and subsamples.

    Returns:
        The task: ``splits`` ``train``/``validation``/``test`` of ``text`` + ``label`` (``ClassLabel``),
        ``label_names`` in id order (sorted names; a ``ClassLabel`` keeps its order; ids sorted
        numerically), ``ood`` rows of ``data.exclude_labels``.

    Raises:
        DataError: (a ``ValueError``) naming the file and line (or row) of any bad input.
        FileNotFoundError: when a path does not exist.
    """
    data = data or DataConfig()
    is_path = isinstance(source, (str, Path))
    text_column, label_column = data.text_column, data.label_column
    if is_path:
        path = Path(source).expanduser().resolve()
        raws, origin = read_path(path), str(path)
    else:
        raws, origin = _from_memory(source, text_column, label_column)
    name = task.name if task else default_task_name(path if is_path else None)

    columns = (text_column, label_column)
    read = {role: read_columns(raw, *columns) for role, raw in raws.items()}
    class_names = read["train"][2]
    if class_names is None:
        refuse_fractional_labels(raws["train"], read["train"][1], read["train"][3])
    by_name = class_names is not None or label_kind(read["train"][1], raws["train"].typed)
    if data.merge_similar_labels and by_name and class_names is None:
        read = _merge_similar(read, raws["train"].where)
    kept, dropped, rare = {}, dict.fromkeys(ROLES, 0), set()
    for role in ROLES:  # train first: its labels are the label set the other splits are checked against
        if role in raws:
            allowed = None if role == "train" else set(kept["train"][1]) | rare
            used = (text_column, read[role][3])  # a bad label is named in the column it was read from
            kept[role], dropped[role] = check_split(
                raws[role], role, read[role][:2], used, by_name, allowed, data.drop_bad_rows
            )
            if role == "train" and data.min_label_rows > 1:
                rare = _rare_labels(kept["train"][1], data.min_label_rows, raws["train"].where)
            if rare:  # left out with their rows, in every split
                keep = [i for i, y in enumerate(kept[role][1]) if y not in rare]
                kept[role] = ([kept[role][0][i] for i in keep], [kept[role][1][i] for i in keep])
        if role == "train":
            where = raws["train"].where
            label_names = _label_names(kept["train"][1], class_names, where, label_column, rare)

    name_to_id = {n: i for i, n in enumerate(label_names)}
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=label_names)}
    )
    enc = {
        role: datasets.Dataset.from_dict({"text": t, "label": [name_to_id[str(k)] for k in y]}, features)
        for role, (t, y) in kept.items()
    }
    train = enc["train"]
    group = data.group_copies is not False  # None: a config not built by build_config (on, as by default)
    if "test" not in enc or "validation" not in enc:
        labels = train["label"][:]  # one Arrow read of the labels
        counts = Counter(labels)
        groups = text_groups(train["text"][:]) if group else None
        firsts = None if groups is None else np.unique(groups, return_index=True)[1]  # a row per text
        texts = None if firsts is None else Counter(np.asarray(labels)[firsts].tolist())
        check_carvable(counts, label_names, raws["train"].where, texts)
    told = None  # the copies' log line: each carve's own
    if "test" not in enc and data.test_fraction == 0:  # no test split wanted (an estimator's fit)
        enc["test"] = train.select([])
    elif "test" not in enc and max(counts.values()) <= KEEP_WHOLE_ROWS:
        # A test row would leave its label one row to learn from and to cross-validate (8 rows of 4 labels:
        # the random slice did, and training stopped); the cross-validated estimate stands in for a test one.
        logger.warning(
            "%s: every label has at most %d rows, so no test slice is carved (each row is needed to learn "
            "from); the run reports its validation or cross-validated estimate instead. Add rows to get a "
            "test estimate.",
            raws["train"].where,
            KEEP_WHOLE_ROWS,
        )
        enc["test"] = train.select([])
    elif "test" not in enc:
        # one line about copies for both carves (the second's rows are the first's rest)
        both = "data.test_fraction and data.val_fraction" if "validation" not in enc else None
        train, enc["test"] = carve(train, data.test_fraction, "data.test_fraction", seed, origin, group, both)
        told = "" if both else None
    if "validation" not in enc:
        key = "data.val_fraction"
        train, enc["validation"] = carve(train, data.val_fraction, key, seed, origin, group, told)
    splits = (train, enc["validation"], enc["test"])
    td = assemble(name, *splits, label_names, origin, dropped, data, seed, integer_labels=not by_name)
    td.carved = sorted(set(ROLES) - set(raws) - {"train"})
    _log_summary(td, td.carved)
    _warn_overlap(td)
    return td


def _warn_overlap(td: TaskData) -> None:
    """Warn when a text carries two labels, and when validation / test texts occur in an earlier split."""
    texts = {split: td.texts(split) for split in ROLES}  # each split's texts read once
    # copies up to case, punctuation and spacing (a lowercased "how do i ... !" of "How do I ...?" raised a
    # test figure unseen); test against validation too: head=auto's shipped model trains on validation
    keys = {split: [text_key(t) for t in texts[split]] for split in ROLES}
    labels: dict[str, set[int]] = defaultdict(set)
    first: dict[str, str] = {}  # a text as it is written, for the message
    for split in ROLES:
        for key, text, label in zip(keys[split], texts[split], td.labels(split).tolist()):
            labels[key].add(label)
            first.setdefault(key, text)
    # copies with other labels, up to case and punctuation too (a trial's "My bin wasnt collected" as bins
    # and "my bin wasnt collected" as pothole drew only the copies' info line)
    clash = [(first[k], sorted(ids)) for k, ids in labels.items() if len(ids) > 1]
    if clash:
        text, ids = clash[0]
        logger.warning(
            "%d text(s) occur with different labels (the same words up to case and punctuation), e.g. %s as "
            "%s: at most one of them is right, and no model can get every copy right. Fix or drop the wrong "
            "copies.",
            len(clash),
            repr(text if len(text) <= 60 else text[:57] + "..."),
            " and ".join(repr(td.label_names[i]) for i in ids),
        )
    seen = set(keys["train"])
    for split, before in (("validation", "train"), ("test", "train or validation")):
        shared = sum(k in seen for k in keys[split])
        if shared:
            logger.warning(
                "%d of %d %s texts also occur in %s (the same words up to case and punctuation); %s scores "
                "on them are optimistic. Deduplicate the data to measure generalisation.",
                shared,
                len(texts[split]),
                split,
                before,
                split,
            )
        seen.update(keys[split])


def _log_summary(td: TaskData, carved: Sequence[str]) -> None:
    shown = ", ".join(map(repr, td.label_names[:10])) + (", ..." if td.num_classes > 10 else "")  # quoted
    sizes = " / ".join(
        f"{s} {len(td.splits[s])}"
        + ((" (carved)" if len(td.splits[s]) else " (none carved)") if s in carved else "")
        for s in ROLES
    )
    held = f"; held out for OOD: {', '.join(td.excluded_labels)} ({len(td.ood)} test rows)" if td.ood else ""
    logger.info("data %s: %d labels (%s); %s%s", td.source, td.num_classes, shown, sizes, held)
