"""JSON read back from disk (runs, heads, caches, members, user data): every parse failure is a ValueError.

Python's ``json`` raises ``RecursionError``, not a ``ValueError``, on text nested deeper than its recursion
limit (``"[" * 100000``): a damaged or crafted file then escaped every reader's ``ValueError`` handling as a
traceback (``metrics.json`` in ``ucse predict``, a data file in ``ucse train``, the fingerprint memo of
every command). Here it is a ``json.JSONDecodeError`` like any other malformed JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

# a JSON string (escapes included), skipped whole, or one bracket
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
DEEP = 1000
"""The nesting depth at which the error points (Python's reader gives up near its recursion limit)."""


def loads(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``, raising ``json.JSONDecodeError`` for nesting it cannot follow."""
    try:
        return json.loads(text, **kwargs)
    except RecursionError:
        doc = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise json.JSONDecodeError(
            "nested deeper than the JSON reader can follow", doc, _deep_point(doc)
        ) from None


def _deep_point(doc: str) -> int:
    """Where ``doc``'s brackets (outside strings) first reach depth :data:`DEEP`, else its deepest point."""
    depth, deepest, at = 0, 0, 0
    for m in _TOKEN.finditer(doc):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, m.start()
                if depth >= DEEP:
                    break
        elif token in "]}":
            depth -= 1
    return at
