"""The texts a classifier is handed in memory: a string, a list, a column of a table."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_texts(texts: str | list[str] | Any) -> list[str]:
    """The texts of ``X``: a bare string is one text, a one-column table its column, an iterable a list.

    One-column tables: a DataFrame or an (N, 1) array.

    Raises:
        ValueError: for bytes, or a table of several columns (iterating a DataFrame gives its column
            names: ``predict(df)`` answered for the column's name alone).
    """
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, (bytes, bytearray)):
        raise ValueError("texts are bytes; decode them to str first, e.g. texts.decode('utf-8').")
    shape = getattr(texts, "shape", None)
    if shape is not None and len(shape) == 2:
        if shape[1] != 1:
            raise ValueError(
                f"texts must be one column of strings, got a table of shape {tuple(shape)}; pass the text "
                "column, e.g. df['text']."
            )
        column = texts.iloc[:, 0] if hasattr(texts, "iloc") else np.asarray(texts)[:, 0]
        return list(column)
    return list(texts)
