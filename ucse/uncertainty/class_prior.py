"""The class mix predictions are for: the training rows' counts and the held-out decisions under each prior.

``uncertainty.calibration.prior=balanced`` turns the calibrated probabilities from the training mix to a
uniform one (:meth:`ucse.uncertainty.calibration.Calibrator.for_prior`). What that changes is judged on the
rows the profile is calibrated on (validation, or the out-of-fold rows of a cross-validated head), never on
test, and saved in the profile's ``info["class_prior"]``; the summary reads it back from there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score

from ucse.config.uncertainty import ClassPrior
from ucse.uncertainty.calibration import Calibrator
from ucse.uncertainty.scores import Array


def class_counts(labels: Array, num_classes: int) -> np.ndarray:
    """(C,) rows per label id."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes)[:num_classes]


def decision_figures(base: Calibrator, logits: Array, labels: Array, counts: Array) -> dict[str, Any]:
    """Accuracy, balanced accuracy and macro-F1 of the top label under each prior, on held-out rows.

    Args:
        base: the calibration fitted for the training mix.
        logits: (N, C) held-out logits.
        labels: (N,) their labels.
        counts: (C,) training rows per label.

    Returns:
        ``{"counts": [...], "train": {...}, "balanced": {...}}``; macro-F1 over the labels the rows hold.
    """
    out: dict[str, Any] = {"counts": [int(n) for n in np.asarray(counts)]}
    for prior in ClassPrior:
        out[prior.value] = decision_scores(labels, base.for_prior(prior, counts).probs(logits).argmax(1))
    return out


def decision_scores(labels: Array, pred: Array) -> dict[str, float]:
    """Accuracy, balanced accuracy (mean per-label recall) and macro-F1 of (N,) top labels ``pred``.

    Macro-F1 is over the labels ``labels`` hold (a label absent from a small split has no F1).
    """
    y, p = np.asarray(labels), np.asarray(pred)
    return {
        "accuracy": float(accuracy_score(y, p)),
        "balanced_accuracy": float(balanced_accuracy_score(y, p)),
        "f1_macro": float(f1_score(y, p, labels=np.unique(y), average="macro", zero_division=0)),
    }
