"""Which labelled rows to check first: the held-out rows whose own label the models doubt most.

A head's profile is calibrated on held-out rows: the validation split, or, when ``head=auto`` cross-validated
a small set, every labelled row scored by the fold models that did not train on it. Ranked by the calibrated
probability (the run's calibration, its class prior included) those models give each row's *given* label
(the self-confidence ranking of confident learning, Northcutt et al. 2021), the rows at the top are the
likeliest to be mislabelled, ambiguous or atypical. ``ucse train`` writes them to ``label_review.csv`` in the
run folder, most doubtful first (never rewritten by ``ucse calibrate``: a user may be editing it). Measured
with 10 % of the labels flipped on purpose (docs/RESULTS.md section 9, ``bench/label_review.py``): on the
many-label tasks the flipped rows rank above the others with AUROC 0.965-0.998 at 8 and 32 rows per label,
level with the same ranking from a tuned logistic regression's cross-validated probabilities; on two labels
the frozen features barely separate, it finds next to nothing.

Written here (not with cleanlab): the ranking is one sort of probabilities ucse already holds, and cleanlab's
AGPL-3.0 licence does not sit with this Apache-2.0 package.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ucse import atomic

DOUBT = 0.1
"""A row is counted as doubted when its held-out probability for its own label is below this (for a
calibrated model, texts given that probability carry that label about 1 time in 10) and another label is more
probable: with many labels and near-uniform probabilities (2 rows per label), every row fell under 10 % and
was counted, its own label often the most probable one."""
COLUMNS = ("rank", "text", "label", "p_label", "suggested", "p_suggested", "cut")
"""``label_review.csv``'s columns: the row's text and given label, the probability the held-out models give
that label, their most probable other label with its probability, and ``yes`` where the backbone read the
text only up to its token limit (a label that rests on the unread end looks wrong to the models)."""


def review_order(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows from most to least doubtful, and each row's probability for its own label.

    Args:
        probs: (N, C) calibrated held-out probabilities.
        labels: (N,) the given labels.

    Returns:
        ((N,) row indices, ascending in the given label's probability, ties in row order; (N,) those
        probabilities in row order).
    """
    y = np.asarray(labels, dtype=np.int64)
    p_label = np.asarray(probs, dtype=np.float64)[np.arange(len(y)), y]
    return np.argsort(p_label, kind="stable"), p_label


def write_label_review(
    path: str | Path,
    texts: Sequence[str],
    labels: np.ndarray,
    probs: np.ndarray,
    names: Sequence[str],
    cut: np.ndarray | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    """Write the review file (a new file, unless ``replace``) and say what it holds.

    Args:
        path: where (``RunFolder.label_review``).
        texts: (N,) the held-out rows' texts.
        labels: (N,) their given labels.
        probs: (N, C) their calibrated held-out probabilities.
        names: the label names, in id order.
        cut: (N,) True where the backbone read the text only up to its token limit, or ``None`` (unknown:
            the column is left empty).
        replace: replace an existing file (the user's ``overwrite=true``); else it is left alone.

    Returns:
        ``{"rows": N, "doubted": rows whose own label gets < DOUBT and less than another label, "below":
        DOUBT, "doubted_cut": the doubted rows that were cut}`` (saved in the profile's
        ``info["label_review"]`` for the summary).
    """
    if len(texts) != len(labels) or len(labels) != len(probs):
        raise ValueError(f"{len(texts)} texts, {len(labels)} labels and {len(probs)} probability rows")
    cut = np.zeros(len(texts), dtype=bool) if cut is None else np.asarray(cut, dtype=bool)
    if cut.shape != (len(texts),):
        raise ValueError(f"{len(texts)} texts and {cut.shape} cut flags")
    p = np.asarray(probs, dtype=np.float64)
    order, p_label = review_order(p, labels)
    others = p.copy()
    others[np.arange(len(others)), np.asarray(labels, dtype=np.int64)] = -np.inf
    suggested = others.argmax(axis=1)  # the most probable label other than the row's own
    p_suggested = p[np.arange(len(p)), suggested]
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(COLUMNS)
    for rank, i in enumerate(order, start=1):
        s = int(suggested[i])
        out.writerow(
            [
                rank,
                texts[i],
                names[int(labels[i])],
                f"{p_label[i]:.4f}",
                names[s],
                f"{p_suggested[i]:.4f}",
                "yes" if cut[i] else "",
            ]
        )
    atomic.write_text(path, buf.getvalue(), replace=replace)
    doubted = (p_label < DOUBT) & (p_label < p_suggested)
    return {
        "rows": len(order),
        "doubted": int(doubted.sum()),
        "below": DOUBT,
        "doubted_cut": int((doubted & cut).sum()),
    }
