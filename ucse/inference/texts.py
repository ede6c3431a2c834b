"""What a classifier is handed in memory: texts (a string, a list, a column of a table) and their labels."""

from __future__ import annotations

import math
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


def _sorted_unique(y: np.ndarray) -> list[Any]:
    """The distinct labels, sorted (numbers numerically, anything else by ``str``)."""
    values = list(dict.fromkeys(y.tolist()))
    try:
        return sorted(values)
    except TypeError:  # mixed types
        return sorted(values, key=str)


def _integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _number(value: Any) -> bool:
    """An int or float of any kind (Python's, NumPy's), not a boolean."""
    return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))


def _whole(value: Any) -> bool:
    """A finite float with no fractional part, small enough to be exact (below 2**53)."""
    x = float(value)
    return math.isfinite(x) and x == round(x) and abs(x) < 2**53


def as_labels(y: Any, n_texts: int) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """``y`` checked for ``fit``: (as given, as an object array, its distinct labels sorted).

    Integer labels held in an object array (``np.array(ys, dtype=object)``, a pandas ``object`` column) or
    as whole-number floats (``1.0``, ``2.0``) come back as an ``int64`` array, so they stay integers through
    ``save_pretrained`` / ``from_pretrained`` (and ``classes_`` holds ints); other floats are refused, as
    scikit-learn refuses a continuous target, and so is a mix of numbers and names.

    Raises:
        ValueError: not one label per text (lists of labels or an indicator matrix: multi-label), a missing
            label (None, NaN, pandas' NA: it would be trained as a class named ``nan``), non-integer numbers,
            numbers mixed with names, a single label (scikit-learn's classifiers refuse it too), or labels
            whose ``str()`` coincide (one class).
    """
    several = (
        "several labels per text (multi-label classification) are not supported: give one label per text"
    )
    from ucse.data.checks import LISTS, none_if_na  # the data layer's label rules (pandas: imported here)

    if getattr(y, "ndim", 1) == 1 and hasattr(y, "__len__") and any(isinstance(v, LISTS) for v in y):
        # lists of labels: np.asarray fails on ragged ones with numpy's own words, hashing on sets
        raise ValueError(f"y holds lists of labels; {several}, or fit one yes/no classifier per label.")
    given, labels = np.asarray(y), np.asarray(y, dtype=object)
    if labels.shape[1:] == (1,):  # a column vector (a one-column DataFrame): raveled, as scikit-learn does
        from sklearn.utils.validation import column_or_1d  # imported here: the CLI starts without sklearn

        given, labels = column_or_1d(given, warn=True), column_or_1d(labels)
    if labels.ndim == 2 and labels.shape[0] == n_texts and labels.shape[1] > 1:  # an indicator matrix
        raise ValueError(f"y has shape {labels.shape}, a column per label; {several} (one column of y).")
    if labels.ndim != 1 or len(labels) != n_texts:
        raise ValueError(f"y has shape {labels.shape}; fit needs one label per text ({n_texts} texts).")
    missing = [i for i, v in enumerate(labels) if none_if_na(v) is None]
    if missing:
        raise ValueError(
            f"y[{missing[0]}] is missing ({labels[missing[0]]!r}; {len(missing)} of {len(labels)} labels "
            "are): drop those rows (and their texts) or give them a label."
        )
    values = labels.tolist()
    numbers = [v for v in values if _number(v)]
    if numbers and len(numbers) < len(values):  # scikit-learn: "Mix of label input types (string and number)"
        word = next(v for v in values if not _number(v))
        raise ValueError(
            f"y mixes numbers and other labels ({numbers[0]!r} and {word!r}); give every label as a name "
            "(str) or every label as an integer id."
        )
    odd = next((v for v in numbers if not _integer(v) and not _whole(v)), None)
    if odd is not None:  # scikit-learn's classifiers refuse a "continuous" target too
        raise ValueError(
            f"y holds numbers that are no class labels ({odd!r}): a classifier needs names or whole-number "
            "ids; round them, or map them to names."
        )
    if numbers and given.dtype.kind not in "iu":
        # ids held as objects or as whole-number floats (a pandas integer column that held NaN stays float64
        # after dropna): as text they came back as '0', '10', '2' or '1.0', '10.0', '2.0', sorted as text,
        # their predict_proba columns moved; 1 and 1.0 were two classes printed alike
        try:
            given = np.asarray([int(v) for v in numbers], dtype=np.int64)
            labels = given.astype(object)
        except OverflowError:  # beyond int64: kept as objects (saved as text)
            pass
    classes = _sorted_unique(labels)
    if len(classes) < 2:
        raise ValueError(f"y holds a single label ({classes!r}); a classifier needs two or more.")
    names = [str(c) for c in classes]
    if len(set(names)) != len(names):
        raise ValueError(f"labels {classes!r} print alike; give labels whose str() differ.")
    return given, labels, classes
