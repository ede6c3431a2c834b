"""Reading one split's text and label columns, and checking its rows, for any reader of labelled files.

``ucse train`` (``ucse.data.sources``) and ``ucse eval input=`` (``ucse.data.labelled_file``) read columns and
labels the same way; each names its settings in its own spelling (``data.text_column=`` against
``text_column=``), so the messages take the key names (:class:`ColumnKeys`) rather than rewriting them.
"""

from __future__ import annotations

import ast
import json
import math
import re
import shlex
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ucse.data.checks import LISTS, label_problems, normalise_label, resolve_bad_rows, text_value_problems
from ucse.data.files import RawSplit
from ucse.data.tasks import DataError


@dataclass(frozen=True)
class ColumnKeys:
    """How a command spells the settings its data messages tell the user to pass."""

    text: str = "data.text_column"
    """The text column's setting."""
    label: str = "data.label_column"
    """The label column's setting."""
    drop: str = "data.drop_bad_rows"
    """The setting that drops bad rows instead of failing."""
    unknown: str = "not in the train split's label set"
    """What a label outside the allowed set is said to be (after "'<column>' is ")."""


TRAIN_KEYS = ColumnKeys()
"""``ucse train`` / ``python train.py``'s spellings."""


def read_columns(
    raw: RawSplit,
    text_column: str,
    label_column: str,
    keys: ColumnKeys = TRAIN_KEYS,
    names_beside_ids: bool = True,
) -> tuple[list, list, list[str] | None, str]:
    """(texts, labels, ClassLabel names or None, the column the labels came from) of one split.

    A missing column fails listing those found, and names the setting to pass by its ``keys`` spelling.
    ``names_beside_ids``: an integer label column beside a ``label_text`` column is read by those names
    (false for a run of integer labels, which scores the ids).
    """
    wanted = ((text_column, keys.text), (label_column, keys.label))
    missing = [(c, k) for c, k in wanted if c not in raw.columns]
    if missing:
        named = " or ".join(f"'{c}' ({k})" for c, k in missing)
        fix = " and ".join(f"{k}=<column>" for _, k in missing)
        hint = ""
        if len(raw.columns) == 1 and any(sep in raw.columns[0] for sep in ";|\t"):
            hint = " Is the file separated by something other than commas? Save it as .csv or .tsv."
        guess = guess_columns(raw)
        if guess and not hint:
            found = dict(zip((keys.text, keys.label), guess))
            others = [c for c in guess[2] if c not in (text_column, label_column)]
            also = ""
            if any(k == keys.label for _, k in missing):
                # each with its count of values: a help-desk export's 2-value channel was guessed before its
                # 8 queues, and "2 values" tells the user at once (a trial)
                n = guess[3]
                also = f" ({n[guess[1]]} values" + (
                    f"; other columns whose values repeat: {', '.join(f'{c} ({n[c]})' for c in others)})"
                    if others
                    else ")"
                )
            hint = (
                " From the values, that looks like "
                + " ".join(shlex.quote(f"{k}={found[k]}") for _, k in missing)
                + f"{also}."
            )
        raise DataError(f"{raw.where} has no column {named}; its columns are {raw.columns}. Set {fix}.{hint}")
    labels = raw.values(label_column)
    names = raw.class_names(label_column)
    if names_beside_ids and names is None and "label_text" in raw.columns and label_column != "label_text":
        if all(v is None or is_int_literal(v) or type(v) is int for v in labels):
            # The ../shared/data layout: integer ids plus their names; train on the names.
            return raw.values(text_column), raw.values("label_text"), names, "label_text"
    return raw.values(text_column), labels, names, label_column


def guess_columns(raw: RawSplit, sample: int = 2000) -> tuple[str, str, list[str], dict[str, int]] | None:
    """(text column, label column, other label candidates, {candidate: distinct values}) or ``None``: a hint.

    The text column is the string column with the longest mean length among those not named like labels
    (where there are such); the label candidates are the
    others with at least one repeated value. A column named like labels (``Intent``, ``category``,
    ``TopicName``: :data:`LABEL_WORDS`) comes first, columns mostly of distinct values (timestamps, ids)
    last; then names (values with a letter: ``billing``) before codes (``4.2.1``, ``17``), then fewer
    distinct values first. The first is the guess, the rest are named too. (A help-desk export guessed its
    4-value ``Channel`` column before its 12-value ``Intent``, and named ``Created`` among the repeating.)
    """
    n = min(len(raw), sample)
    if n < 2 or len(raw.columns) < 2:
        return None
    cols = {c: raw.values(c)[:n] for c in raw.columns}
    # lists and objects are neither texts nor labels (a nested object's fields are columns of their own)
    cols = {c: v for c, v in cols.items() if not any(isinstance(x, (list, dict, tuple)) for x in v)}
    strings = {c: v for c, v in cols.items() if all(isinstance(x, str) for x in v if x is not None)}
    if not strings:
        return None

    def text_rank(c: str) -> tuple[bool, float]:
        # Not named like labels, then the longest: a catalog's category paths ("Home & Garden > Lights,
        # Lamps") are longer than its titles, and were offered as the text. (Distinct values are no guide:
        # a file may hold each text several times.)
        return not label_like(c), sum(len(x or "") for x in strings[c]) / n

    text = max(strings, key=text_rank)
    distinct = {c: len({repr(x) for x in v}) for c, v in cols.items() if c != text}
    repeating = {c: d for c, d in distinct.items() if 1 < d < n}
    if not repeating:
        return None

    def named(c: str) -> bool:
        return all(any(ch.isalpha() for ch in str(x)) for x in cols[c] if x is not None)

    def mostly_distinct(c: str) -> bool:  # 4 of 5 values seen once at best: timestamps or ids, not labels
        return repeating[c] > 0.8 * n

    order = sorted(
        repeating, key=lambda c: (not label_like(c), mostly_distinct(c), not named(c), repeating[c])
    )
    label, *others = order
    return text, label, [c for c in others if not mostly_distinct(c)], repeating


LABEL_WORDS = ("label", "intent", "categ", "kategor", "class", "klass", "topic", "tag", "target")
"""Word starts that mark a column name as a label column's to :func:`guess_columns`, beside the word ``y``
(``type``, ``sentiment`` and the like name other columns too often to rank a column on)."""


def label_like(column: str) -> bool:
    """Whether a word of ``column``'s name (split at non-letters and camelCase) starts like a label's."""
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", str(column))]
    return any(w == "y" or w.startswith(LABEL_WORDS) for w in words)


_INT = re.compile(r"(-?(?:0|[1-9][0-9]*))(?:\.0+)?")


def is_int_literal(value: Any) -> bool:
    """Whether ``value`` is an integer written as ``int`` writes it back, or with a zero fraction (``3.0``).

    Otherwise ``"01"`` and ``"1"`` were one label id (two labels merged), ``"007"`` renamed ``7``, ``"²"``
    failed ``int()``, and ``"3.0"`` (pandas' integer column that held a missing value) was a name, sorted as
    text (``1.0``, ``10.0``, ``2.0``) where JSONL or Parquet gave integer ids.
    """
    return isinstance(value, str) and _INT.fullmatch(value.strip()) is not None


def int_value(value: str) -> int:
    """The integer an :func:`is_int_literal` string writes (``"-5.00"`` -> ``-5``)."""
    return int(_INT.fullmatch(value.strip()).group(1))


_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def refuse_fractional_labels(raw: RawSplit, labels: list, column: str, key: str = TRAIN_KEYS.label) -> None:
    """Fail, as the estimator does, where every label is a number and some are not whole: a score column.

    A CSV's ``3.5`` was read as a label name (one class per value) while the same values in JSON failed on
    every row as "not an integer" and the estimator refused them.

    Raises:
        DataError: naming the file, the first such row, the column and the fix.
    """

    def number(v: Any) -> float | None:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        return float(v.strip()) if isinstance(v, str) and _NUMBER.fullmatch(v.strip()) else None

    values = [(i, number(v)) for i, v in enumerate(labels) if v is not None]
    if not values or any(x is None for _, x in values):
        return
    odd = next(((i, x) for i, x in values if not math.isfinite(x) or x != int(x)), None)
    if odd is not None:
        lines = raw.lines()
        at = f"line {lines[odd[0]]}" if lines else f"row {odd[0]} (0-based)"
        raise DataError(
            f"{raw.where} {at}: every label in {column!r} is a number and some are not whole ({odd[1]:g}): a "
            f"classifier needs names or whole-number ids. Round them, map them to names, or set {key} to the "
            "column of classes (is this a score?)."
        )


def label_kind(labels: list, typed: bool) -> bool:
    """Whether train's labels are names (``True``) or integer ids.

    CSV cells are all strings; a CSV label column is read as ids when every present train label is an
    integer literal (``3`` or ``3.0``). Typed values are names when strings (or booleans) are at least as
    many as numbers, so a stray label of the other kind is the one reported.
    """
    present = [v for v in labels if v is not None]
    if not typed:
        return not (present and all(is_int_literal(v) for v in present))
    names = sum(isinstance(v, (str, bool)) for v in present)
    numbers = sum(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    return names >= numbers


def normalise_all(labels: list, by_name: bool, typed: bool) -> list:
    """Raw labels in the kind's canonical type: CSV int literals as ints, booleans as names."""
    if not typed and not by_name:
        return [int_value(v) if is_int_literal(v) else v for v in labels]
    if by_name:
        return [str(v).lower() if isinstance(v, bool) else v for v in labels]
    return labels


def check_split(
    raw: RawSplit,
    role: str,
    values: tuple[list, list],
    columns: tuple[str, str],
    by_name: bool,
    allowed: set | None,
    drop: bool,
    keys: ColumnKeys = TRAIN_KEYS,
) -> tuple[tuple[list[str], list], int]:
    """One split's checked (texts, canonical labels) and dropped-row count (bad rows fail unless ``drop``)."""
    refuse_label_lists(raw, values[1], columns[1], keys)
    texts, labels = values[0], normalise_all(values[1], by_name, raw.typed)
    bad = text_value_problems(texts, columns[0]) + label_problems(
        labels, columns[1], by_name, allowed, keys.unknown
    )
    lines = raw.lines() if bad else None  # the line map is computed only when there is something to show
    if not drop:
        _refuse_unlabelled(raw, bad, len(texts), lines, columns[1], keys, role)
    keep = resolve_bad_rows(
        len(texts), bad, split=role, where=raw.where, drop=drop, lines=lines, drop_key=keys.drop
    )
    kept = ([texts[i] for i in keep], [normalise_label(labels[i], by_name) for i in keep])
    return kept, len(texts) - len(keep)


def list_in_text(value: Any) -> list | None:
    """The labels of a label cell that is a list written as text (``"['billing', 'refund']"``), else None.

    A multi-label export to CSV writes Python's or JSON's spelling of a list; read as it is, each combination
    would be a label of its own. Parsed with ``json`` or ``ast.literal_eval`` (literals only, never code),
    and only for short bracketed cells.
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not (text.startswith("[") and text.endswith("]")) or len(text) > 2000:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    if not isinstance(parsed, list) or not all(isinstance(p, (str, int)) for p in parsed):
        return None
    return parsed


def refuse_label_lists(raw: RawSplit, labels: list, column: str, keys: ColumnKeys) -> None:
    """Fail in one line where most labels are lists: several labels per text (multi-label data).

    Each such row would otherwise be reported as a bad label one by one, and dropping them (the fix that
    message offers) drops the data. A stray list among single labels stays a bad row of its own. Lists
    written as text (a CSV export's ``"['billing', 'refund']"``) count as lists; where every one of them holds
    a single label, the fix is to write the label alone.
    """
    parsed = [
        v.tolist() if isinstance(v, np.ndarray) else v if isinstance(v, LISTS) else list_in_text(v)
        for v in labels
    ]
    lists = [i for i, v in enumerate(parsed) if v is not None]
    if not lists or 2 * len(lists) < len(labels):
        return
    lines = raw.lines()
    several = [i for i in lists if len(parsed[i]) > 1]
    first = (several or lists)[0]  # a row with several labels shows what the file holds
    place = f"line {lines[first]}" if lines else f"row {first}"
    value = labels[first].tolist() if isinstance(labels[first], np.ndarray) else labels[first]
    as_text = " written as text" if isinstance(value, str) else ""
    shown_value = repr(value) if as_text else str(value)
    if not any(len(parsed[i]) for i in lists):  # "[]" in every such row: an export of no labels
        raise DataError(
            f"{raw.where} {place}: {column!r} holds empty lists of labels{as_text} ({shown_value[:80]}; "
            f"{len(lists)} of {len(labels)} rows do): give each row its label."
        )
    if not several:
        alone = str(next(list(parsed[i])[0] for i in lists if len(parsed[i])))
        raise DataError(
            f"{raw.where} {place}: {column!r} holds each label as a one-item list{as_text} "
            f"({shown_value[:80]}; {len(lists)} of {len(labels)} rows do): write the label alone "
            f"({alone!r}) in each row; ucse trains one label per text."
        )
    raise DataError(
        f"{raw.where} {place}: {column!r} holds a list of labels{as_text} ({shown_value[:80]}; {len(lists)} "
        f"of {len(labels)} rows do): ucse trains one label per text, so several labels per text (multi-label "
        f"classification) are not supported. Keep one label per row, or train one yes/no classifier per "
        f"label (a yes/no column for each, passed as {keys.label}=<column>)."
    )


def _refuse_unlabelled(
    raw: RawSplit,
    bad: list,
    rows: int,
    lines: list[int] | None,
    column: str,
    keys: ColumnKeys,
    role: str,
) -> None:
    """Fail in one line where the only bad rows are rows without a label among labelled ones.

    One sheet with some rows labelled and the rest still to label is a normal way to work, not a file of
    errors: the message says how to train on the labelled rows (and which command picks what to label next)
    instead of listing the unlabelled rows as problems.
    """
    unlabelled = [b for b in bad if b.column == column and (b.value is None or not str(b.value).strip())]
    if len(unlabelled) < 2 or len(unlabelled) != len(bad) or len(unlabelled) == rows:
        return
    at = sorted(b.index for b in unlabelled)
    places = ", ".join(str(lines[i]) if lines else str(i) for i in at[:5]) + (", ..." if len(at) > 5 else "")
    if keys != TRAIN_KEYS:
        use = "score the {n} labelled rows"
    elif role == "train":
        use = (
            "train on the {n} labelled rows (`ucse suggest` on the same file then picks which of the "
            "others to label first)"
        )
    else:
        use = "use the {n} labelled rows"
    raise DataError(
        f"{raw.where}: {len(at)} of {rows} rows have no value in {column!r} "
        f"({f'lines {places}' if lines else f'rows {places}, 0-based'}): label them, or set {keys.drop}=true "
        f"to {use.format(n=rows - len(at))}."
    )


def similar_key(name: str) -> str:
    """A label name up to letter case, surrounding spaces and Unicode form: one key per similar spelling."""
    return unicodedata.normalize("NFKC", name).strip().casefold()


def spellings(labels: list) -> dict[str, str]:
    """``similar_key`` -> the spelling most ``labels`` use (ties: the first in sorted order); names only."""
    counts = Counter(v for v in labels if isinstance(v, str) and v.strip())
    best: dict[str, str] = {}
    for name in sorted(counts):  # sorted: a tie keeps the first spelling in sorted order
        key = similar_key(name)
        if key not in best or counts[name] > counts[best[key]]:
            best[key] = name
    return best


def unambiguous_spellings(names: list[str]) -> dict[str, str]:
    """``similar_key`` -> the one name of ``names`` with that key (keys shared by two names are left out)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(similar_key(name), []).append(name)
    return {k: alike[0] for k, alike in groups.items() if len(alike) == 1}


def respell(labels: list, canon: dict[str, str]) -> tuple[list, Counter]:
    """``labels`` with each name replaced by its key's spelling in ``canon``; and how often each was replaced.

    Values that are no non-empty strings, and names whose key ``canon`` lacks, are left as they are.
    """
    out, changed = [], Counter()
    for v in labels:
        new = canon.get(similar_key(v), v) if isinstance(v, str) and v.strip() else v
        if new != v:
            changed[(v, new)] += 1
        out.append(new)
    return out, changed
