"""Row validation: bad rows fail loudly, or are dropped and counted when ``data.drop_bad_rows`` is set."""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ucse.blank_text import BLANK_RE2, blank_problem, is_blank
from ucse.data.tasks import DataError

logger = logging.getLogger(__name__)

MAX_SHOWN = 5
"""Bad rows listed in an error message (the total is always given)."""
REPR_CHARS = 80
"""Characters of a bad value's repr shown in messages."""


def none_if_na(value: Any) -> Any:
    """The missing markers of pandas (NaN, None, pd.NA, NaT) as ``None``; every other value unchanged."""
    return None if pd.api.types.is_scalar(value) and pd.isna(value) else value


LISTS = (list, tuple, set, frozenset, np.ndarray)
"""Label values that are several labels (a multi-label export), never one."""


def _place(index: int, lines: Sequence[int] | None) -> str:
    """A row as messages name it: its 1-based file line where known, else its 0-based index."""
    return f"line {lines[index]}" if lines else f"row {index}"


@dataclass(frozen=True)
class BadRow:
    """One invalid row: its 0-based index in the split as read, the column, the problem and the value."""

    index: int
    column: str
    problem: str
    value: Any


def shown(items: Sequence[str], limit: int = 10, sep: str = ", ") -> str:
    """The first ``limit`` items joined by ``sep``, then ``...`` when there are more (for messages)."""
    return sep.join(items[:limit]) + (f"{sep}..." if len(items) > limit else "")


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 3] + "..."


def _said(b: BadRow) -> str:
    """``problem: value``, or the problem alone where the value is missing (": None" said nothing)."""
    return b.problem if b.value is None else f"{b.problem}: {_short_repr(b.value)}"


def _is_string_column(ds: datasets.Dataset, column: str) -> bool:
    feature = ds.features[column]
    return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")


def text_problems(ds: datasets.Dataset, column: str) -> list[BadRow]:
    """Rows whose ``column`` is missing, not a string, or blank (empty, whitespace, invisible characters).

    String columns are checked with Arrow compute kernels; columns of mixed JSON types (a number or a
    list among the strings) fall back to a Python pass.

    Args:
        ds: the split as read.
        column: the text column.

    Returns:
        The bad rows, in row order.
    """
    if not _is_string_column(ds, column):
        return text_value_problems(ds[column][:], column)
    arr = ds.with_format("arrow")[column]
    maybe = pc.match_substring_regex(arr, BLANK_RE2)  # a superset of the blank texts (see BLANK_RE2)
    bad = pc.fill_null(pc.or_kleene(pc.is_null(arr), maybe), True)
    idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
    values = arr.take(pa.array(idx, type=pa.int64())).to_pylist() if len(idx) else []
    return [_text_row(int(i), column, v) for i, v in zip(idx, values) if v is None or is_blank(v)]


def text_value_problems(values: Sequence[Any], column: str) -> list[BadRow]:
    """Rows whose text (one Python value per row) is missing, not a string, or blank (:func:`is_blank`)."""
    return [_text_row(i, column, v) for i, v in enumerate(values) if not isinstance(v, str) or is_blank(v)]


def _text_row(index: int, column: str, value: Any) -> BadRow:
    if value is None:
        problem = f"'{column}' is missing"
    elif not isinstance(value, str):
        problem = f"'{column}' is not a string ({type(value).__name__})"
    else:
        problem = f"'{column}' is {blank_problem(value)}"
    return BadRow(index, column, problem, value)


def normalise_label(value: Any, by_name: bool) -> Any:
    """Canonical form of a raw label, or ``None`` when it is not a valid label of its kind.

    Args:
        value: the raw value (a name when ``by_name``, else an integer id; integral floats such as ``3.0``
            are accepted as ids because JSON writers sometimes emit them).
        by_name: labels are names (``label_text``) rather than integer ids.
    """
    if by_name:
        return value if isinstance(value, str) and value.strip() else None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def label_problems(
    labels: Sequence[Any],
    column: str,
    by_name: bool,
    allowed: Collection[Any] | None,
    unknown: str = "not in the train split's label set",
) -> list[BadRow]:
    """Rows whose label is missing, of the wrong kind, or outside the train label set.

    Args:
        labels: raw label values, one per row.
        column: the column the labels came from (for messages).
        by_name: labels are names rather than integer ids.
        allowed: the train label set (canonical values); ``None`` checks only presence and kind.
        unknown: what a label outside ``allowed`` is said to be (after "'<column>' is ").

    Returns:
        The bad rows, in row order.
    """
    allowed_set = set(allowed) if allowed is not None else None
    rows = []
    for i, raw in enumerate(labels):
        if raw is None:
            rows.append(BadRow(i, column, f"'{column}' is missing", raw))
            continue
        label = normalise_label(raw, by_name)
        if isinstance(raw, LISTS):
            rows.append(BadRow(i, column, f"'{column}' is a list (several labels; one label per row)", raw))
        elif label is None:
            kind = "a non-empty string" if by_name else "an integer"
            rows.append(BadRow(i, column, f"'{column}' is not {kind}", raw))
        elif allowed_set is not None and label not in allowed_set:
            rows.append(BadRow(i, column, f"'{column}' is {unknown}", raw))
    return rows


def score_problems(ds: datasets.Dataset, column: str) -> list[BadRow]:
    """Rows whose similarity score is missing or not a finite number."""
    rows = []
    for i, v in enumerate(ds[column]):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not ok:
            rows.append(BadRow(i, column, f"'{column}' is not a finite number", v))
    return rows


def resolve_bad_rows(
    num_rows: int,
    bad: Sequence[BadRow],
    *,
    split: str,
    where: str,
    drop: bool,
    lines: Sequence[int] | None = None,
    drop_key: str = "data.drop_bad_rows",
) -> np.ndarray:
    """Fail on bad rows, or drop them when ``drop`` (logging the count).

    Args:
        num_rows: rows in the split as read.
        bad: the problems found (a row may appear more than once).
        split: split name, for messages.
        where: the file or hub id the split came from, for messages.
        drop: drop bad rows instead of failing (``data.drop_bad_rows``).
        lines: the 1-based file line of each row; when given, rows are named by line, else by 0-based
            row index.
        drop_key: how the command that reads the rows spells the setting that drops them (the fix named).

    Returns:
        Sorted indices of the rows to keep.

    Raises:
        DataError: when there are bad rows and ``drop`` is false; it names the split, the file, the rows,
            their values and the fix.
    """
    bad_idx = np.unique(np.fromiter((b.index for b in bad), dtype=np.int64, count=len(bad)))
    keep = np.setdiff1d(np.arange(num_rows, dtype=np.int64), bad_idx, assume_unique=True)
    if not len(bad_idx):
        return keep
    shown = "\n".join(
        f"  {_place(b.index, lines)}: {_said(b)}" for b in sorted(bad, key=lambda b: b.index)[:MAX_SHOWN]
    )
    more = f"\n  ... and {len(bad) - MAX_SHOWN} more problem(s)" if len(bad) > MAX_SHOWN else ""
    numbering = "" if lines else " (rows are 0-based)"
    summary = f"{len(bad_idx)} bad row(s) of {num_rows} in split '{split}' of {where}{numbering}"
    fix = f"{drop_key}=true to drop (and count) such rows"
    if not drop and len(bad) == 1:  # one problem: one line
        b = bad[0]
        raise DataError(
            f"{where} {_place(b.index, lines)}: {_said(b)} (the one bad row of "
            f"{num_rows} in split '{split}'{'' if lines else '; rows are 0-based'}); fix it, or set {fix}."
        )
    if not drop:
        raise DataError(f"{summary}:\n{shown}{more}\nFix the data, or set {fix}.")
    columns = {b.column for b in bad}
    if len(columns) == 1 and all(b.value is None for b in bad):
        # one sheet, some rows labelled and the rest to label (the README's loop): no "bad rows" alarm, and
        # no list of a hundred lines (a trial's "Dropping 130 bad row(s)")
        named = ", ".join(_place(int(i), lines) for i in bad_idx[:MAX_SHOWN])
        logger.warning(
            "%s: %d of %d rows in split '%s' have no value in %r and are left out (%s=true): %s%s",
            where,
            len(bad_idx),
            num_rows,
            split,
            columns.pop(),
            drop_key,
            named,
            ", ..." if len(bad_idx) > MAX_SHOWN else "",
        )
        return keep
    logger.warning("Dropping %s:\n%s%s", summary, shown, more)
    return keep
