"""Copies of one text among rows: the same words up to case, Unicode form, punctuation and spacing.

Copies split across a cross-validation's folds (or across train and a scored slice) let a model score a row it
trained on: a held-out copy sits at distance ~0 from its twin, is classified right with high confidence, and
pulls the estimate, the temperature, the conformal quantile and the out-of-scope threshold towards
optimism (a review: 16 % of new in-scope texts flagged against the promised 5 % on a file of doubled rows).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

_NOT_WORD = re.compile(r"[\W_]+")


def text_key(text: str) -> str:
    """The text as copies share it: NFKC, case-folded, punctuation and runs of spaces as one space.

    A text of no word characters (emoji, punctuation) keeps its own form: "🙂" and "🚚" are no copies.
    """
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip() or text


def text_groups(texts: Sequence[str]) -> np.ndarray | None:
    """(N,) group id of each text (copies share one), or ``None`` when every text is its own group."""
    ids: dict[str, int] = {}
    groups = np.fromiter(
        (ids.setdefault(text_key(t), len(ids)) for t in texts), dtype=np.int64, count=len(texts)
    )
    return groups if len(ids) < len(texts) else None
