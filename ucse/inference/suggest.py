"""The unlabelled texts to label next for a trained run: ``ucse suggest`` and :func:`suggest_to_label`.

The run's model reads the texts once (backbone and head, as ``predict``); :mod:`ucse.uncertainty.acquisition`
picks the ones to label. Copies of a text (the same words up to case and punctuation) are offered once: the
first stands for all. Each row carries the model's guess, so a labeller sees what the model would answer, and
an empty label column under the run's own column names, so the file, once filled in, can be added to the
training file as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ucse.data.duplicates import text_key
from ucse.uncertainty.acquisition import Strategy, margins, select_to_label

if TYPE_CHECKING:
    from ucse.inference.classifier import UcseClassifier


def suggest_to_label(
    clf: UcseClassifier,
    texts: list[str],
    n: int,
    strategy: Strategy | str = Strategy.diverse_margin,
    seed: int = 0,
    progress: bool = False,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The positions in ``texts`` to label next, the least sure first, and what the model says of them.

    Args:
        clf: a fitted (or loaded) :class:`~ucse.inference.classifier.UcseClassifier`.
        texts: the unlabelled texts.
        n: how many to pick.
        strategy: ``diverse_margin`` (default), ``margin`` or ``random`` (the baseline to compare with).
        seed: seeds ``random`` and the clustering.
        progress: show a progress bar on long inputs.

    Returns:
        ``(positions (k,), {"guess": (k,) labels, "confidence": (k,), "margin": (k,)})`` with k <= n: the
        picked texts' positions in ``texts``, the label the model gives each (a value of ``clf.classes_``),
        its calibrated probability and the gap to the runner-up.
    """
    if n < 1:
        raise ValueError(f"n={n}: pick at least one text.")
    strategy = Strategy(strategy)
    first: dict[str, int] = {}
    for i, t in enumerate(texts):
        first.setdefault(text_key(t), i)
    unique = np.fromiter(first.values(), dtype=np.int64, count=len(first))  # (U,) a position per text
    out = clf.encode_gaussian([texts[i] for i in unique], progress=progress)
    decided = clf.profile_.apply(out.mean, out.var, out.logits, pooled=out.pooled)
    features = out.pooled if out.pooled is not None else out.mean  # the backbone's view: no head shaped it
    picked = select_to_label(decided.probs, features, n, strategy, seed)  # (k,) rows of unique
    ordered = clf.classes_[np.argsort(clf.columns_)]  # head column -> label
    said = {
        "guess": ordered[decided.prediction[picked]],
        "confidence": np.asarray(decided.confidence, dtype=np.float64)[picked],
        "margin": margins(decided.probs[picked]),
    }
    return unique[picked], said


def suggestion_rows(
    texts: list[str],
    positions: np.ndarray,
    said: dict[str, np.ndarray],
    columns: tuple[str, str],
    ids: tuple[str, list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """The rows ``ucse suggest`` writes, least sure first.

    Args:
        texts: the input texts.
        positions: (k,) :func:`suggest_to_label`'s picks.
        said: its guesses, confidences and margins.
        columns: the run's (text column, label column) names: the label column is left empty to fill in.
        ids: ``(id column, one id per input text)`` to copy into each row first, or ``None``.

    Returns:
        Per pick: [the id,] the text, an empty label, ``guess``, ``confidence``, ``margin``, ``line`` (the
        text's 1-based position in the input).
    """
    guesses = said["guess"].tolist()  # Python values: ints stay ints, names strings
    rows = []
    for k, i in enumerate(positions.tolist()):
        row: dict[str, Any] = {} if ids is None else {ids[0]: ids[1][i]}
        row |= {
            columns[0]: texts[i],
            columns[1]: "",
            "guess": guesses[k],
            "confidence": float(said["confidence"][k]),
            "margin": float(said["margin"][k]),
            "line": i + 1,
        }
        rows.append(row)
    return rows
