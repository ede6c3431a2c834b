"""One labelled file read against a trained run's labels: what ``ucse eval run=... input=...`` scores.

The rows are read and checked as ``ucse train`` reads its own (the same readers, columns and bad-row rules),
with the run's label set as the allowed one: a label the run was never trained on names its line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ucse.data.checks import normalise_label, shown
from ucse.data.columns import (
    ColumnKeys,
    check_split,
    normalise_all,
    read_columns,
    refuse_label_lists,
    respell,
    unambiguous_spellings,
)
from ucse.data.files import read_file
from ucse.data.tasks import DataError

logger = logging.getLogger(__name__)
EVAL_KEYS = ColumnKeys(text="text_column", label="label_column", drop="drop_bad_rows")
"""``ucse eval``'s spellings of the settings the readers' messages name."""


def read_labelled_file(
    path: str | Path,
    text_column: str,
    label_column: str,
    label_names: Sequence[str],
    integer_labels: bool,
    drop_bad_rows: bool = False,
    min_label_rows: int = 0,
) -> tuple[list[str], np.ndarray, int]:
    """(texts, (N,) label ids in ``label_names`` order, rows dropped) of one labelled file.

    Args:
        path: a ``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``/``.xlsx`` file.
        text_column: its text column.
        label_column: its label column (an integer column beside ``label_text`` is read by its names).
        label_names: the run's labels, in its logit order.
        integer_labels: whether the run's labels were integer ids (then the file's must be too).
        drop_bad_rows: drop bad rows (missing text, a label the run lacks...) instead of failing.
        min_label_rows: the run's ``data.min_label_rows``: above 1, a label the run lacks may be one its
            training left out for its few rows, which the message about such a row says.

    Raises:
        DataError: naming the file, the line and the fix (with ``ucse eval``'s key names).
        FileNotFoundError: no such file.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        raise DataError(f"input={path} is a folder; give one file of labelled texts (.csv, .jsonl, ...).")
    if not p.exists():
        raise FileNotFoundError(f"input={path}: no such file.")
    raw = read_file(p.resolve())
    # a run of integer labels scores the ids themselves, not the label_text names beside them
    texts, labels, _, used = read_columns(raw, text_column, label_column, EVAL_KEYS, not integer_labels)
    refuse_label_lists(raw, labels, used, EVAL_KEYS)
    # a name alike to exactly one run label ('billing ' for 'Billing') is read as that label
    if not integer_labels:
        labels, changed = respell(labels, unambiguous_spellings(list(label_names)))
        if changed:
            logger.info(
                "%s: read %s as the run's labels (they differ only in letter case, spaces or Unicode form)",
                raw.where,
                shown([f"{a!r} as {b!r} ({k} rows)" for (a, b), k in changed.items()], limit=8),
            )
    by_name = not integer_labels
    allowed = set(label_names) if by_name else {int(n) for n in label_names}
    present = [v for v in labels if v is not None]
    # each value as check_split reads it for the run's kind: none a run label means another column or kind
    canon = {normalise_label(v, by_name) for v in normalise_all(present, by_name, raw.typed)}
    if present and not canon & allowed:
        seen = list(dict.fromkeys(str(v) for v in present))[:3]
        kind = "integer ids" if integer_labels else "names"
        raise DataError(
            f"{raw.where}: none of the {len(present)} values of its column {used!r} (e.g. {seen}) is a "
            f"label of the run, whose labels are {kind} ({[str(n) for n in label_names[:5]]}"
            f"{', ...' if len(label_names) > 5 else ''}); give {EVAL_KEYS.label}= the column that holds them."
        )
    spelled = EVAL_KEYS
    if min_label_rows > 1:  # a trial read "not in the label set" of a label its training file held
        unknown = (
            f"{EVAL_KEYS.unknown} (labels of fewer than {min_label_rows} train rows were left out of "
            f"training by data.min_label_rows={min_label_rows})"
        )
        spelled = replace(EVAL_KEYS, unknown=unknown)
    (kept, keys), dropped = check_split(
        raw, "input", (texts, labels), (text_column, used), by_name, allowed, drop_bad_rows, spelled
    )
    if not kept:
        raise DataError(f"{raw.where} has no usable rows.")
    ids = {str(n): i for i, n in enumerate(label_names)}
    return kept, np.asarray([ids[str(k)] for k in keys], dtype=np.int64), dropped
