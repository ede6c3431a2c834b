"""The JSON side of a user's data file: where a ``.json``/``.jsonl`` text goes wrong; its rows as written.

The file is parsed by ``datasets`` (:mod:`ucse.data.files`). Python's ``json`` re-reads it only to name the
line at fault when ``datasets`` fails (Arrow's errors name no line, or a chunk-relative one), and to read the
values as written where ``datasets`` would change them (:func:`columns_as_written`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ucse import json_read


def jsonl_problem(text: str) -> str | None:
    """The first line of a JSON Lines text that is not one JSON object, described; ``None`` if all are."""
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json_read.loads(line, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
        except _DuplicateKeyError as err:
            return f"line {number}: the key '{err}' appears twice in one object (keep one)"
        except ValueError as err:
            where = f" (column {err.colno})" if isinstance(err, json.JSONDecodeError) else ""
            return f"line {number}: JSON syntax error: {getattr(err, 'msg', err)}{where}"
        if not isinstance(value, dict):
            return f"line {number}: expected one JSON object ({{...}}), got {_json_kind(value)}"
        problem = _value_problem(value)
        if problem:
            return f"line {number}: {problem}"
    return None


def _value_problem(row: dict) -> str | None:
    """A top-level value Arrow cannot hold (an integer beyond 64 bits), described; else ``None``."""
    for key, value in row.items():
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
            return f"'{key}' is an integer too large to store ({str(value)[:20]}...)"
    return None


class _DuplicateKeyError(ValueError):
    """An object holds one key twice (the message names the key)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's dict, refusing a key it holds twice.

    Python's reader keeps the last value; Arrow's fails naming only a byte position ("Trailing data").
    """
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKeyError(key)
        seen[key] = value
    return seen


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (write null or a number)")


# a JSON string (skipped whole, escapes included) or a bare constant outside one
_STRING_OR_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _constant_at(text: str) -> tuple[int, int] | None:
    """1-based (line, column) of the first bare ``NaN`` / ``Infinity`` outside a JSON string, or ``None``."""
    for m in _STRING_OR_CONSTANT.finditer(text):
        if m.group(1):
            start = m.start(1)
            return text.count("\n", 0, start) + 1, start - text.rfind("\n", 0, start)
    return None


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "true/false", type(None): "null"}
    return kinds.get(type(value), "a number")


def json_problem(text: str) -> str | None:
    """What is wrong with a ``.json`` text (an array of objects, or JSON Lines), or ``None``."""
    try:
        value = json_read.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as err:  # no position: the hook sees an object's pairs, not where they are
        return f"holds an object in which the key '{err}' appears twice (keep one)"
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # several top-level values: the file is JSON Lines
            return jsonl_problem(text)
        return f"line {err.lineno}: JSON syntax error: {err.msg} (column {err.colno})"
    except ValueError as err:  # a bare NaN / Infinity: json names no place for it, so find the token
        at = _constant_at(text)
        return f"line {at[0]}: {err} (column {at[1]})" if at else f"JSON error: {err}"
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = (
                f"is {_json_kind(item)}, expected an object"
                if not isinstance(item, dict)
                else _value_problem(item)
            )
            if problem:
                return f"item {i + 1} of the top-level array: {problem}"
        return "holds no rows" if not value else None
    return f"expected an array of objects, got {_json_kind(value)}"


def is_json_array(text: str) -> bool:
    """Whether a JSON data text is one array of objects (else JSON Lines)."""
    return text.lstrip().startswith("[")


def jsonl_lines(text: str) -> list[int] | None:
    """1-based line of each row of a JSON Lines text (blank lines hold no row); ``None`` for an array."""
    if is_json_array(text):
        return None
    return [n for n, line in enumerate(text.split("\n"), 1) if line.strip()]


def columns_as_written(text: str) -> dict[str, list[Any]]:
    """Column name -> one value per row, as Python's ``json`` reads a text that ``datasets`` has read already.

    ``datasets`` stores a column whose values are of mixed JSON kinds (``"1"`` and ``2``) as its ``Json``
    type and decodes every string of it again as JSON on the way out: the label ``"1"`` came back as the
    number 1, ``"true"`` as ``True``, the text ``"[1, 2]"`` as a list. Rows are the array's items or the
    non-blank lines; columns appear in the order first seen, ``None`` where a row lacks one.
    """
    if is_json_array(text):
        rows = json_read.loads(text)
    else:
        rows = [json_read.loads(line) for line in text.split("\n") if line.strip()]
    names = list(dict.fromkeys(key for row in rows for key in row))
    return {name: [row.get(name) for row in rows] for name in names}
