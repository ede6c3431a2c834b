"""The class mix predictions are for: the training rows' counts and the held-out decisions under each prior.

``uncertainty.calibration.prior=balanced`` turns the calibrated probabilities from the training mix to a
uniform one, ``prior=target`` to the shares a user gives
(:meth:`ucse.uncertainty.calibration.Calibrator.for_prior`).
What that changes is judged on the rows the profile is calibrated on (validation, or the out-of-fold rows of a
cross-validated head), never on test, and saved in the profile's ``info["class_prior"]``; the summary reads it
back from there. Those rows are mixed like the training rows: under the target mix each row is weighted by
its label's target share over its share of those rows (importance weights for a label shift), so the weighted
accuracy is sum_c q_c * recall_c, the accuracy on texts mixed like the target (labels the rows lack left out).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score

from ucse.config.uncertainty import ClassPrior, check_target_shares, target_shares
from ucse.uncertainty.calibration import Calibrator, ece
from ucse.uncertainty.scores import Array


def class_counts(labels: Array, num_classes: int) -> np.ndarray:
    """(C,) rows per label id."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes)[:num_classes]


def resolve_target(cfg: Any, label_names: Sequence[str] | None, counts: Array) -> np.ndarray | None:
    """The (C,) target mix of a :class:`CalibrationConfig` (``None`` unless ``prior=target``).

    ``label_names`` ``None`` names the labels by their ids (``"0"``, ``"1"``...).
    """
    if ClassPrior(cfg.prior) is not ClassPrior.target:
        return None
    check_target_shares(cfg)
    names = [str(i) for i in range(len(counts))] if label_names is None else label_names
    return np.asarray(target_shares(cfg.target_shares, names, [int(n) for n in np.asarray(counts)]))


def decision_figures(
    base: Calibrator, logits: Array, labels: Array, counts: Array, target: Array | None = None
) -> dict[str, Any]:
    """Accuracy, balanced accuracy and macro-F1 of the top label under each prior, on held-out rows.

    Args:
        base: the calibration fitted for the training mix.
        logits: (N, C) held-out logits.
        labels: (N,) their labels.
        counts: (C,) training rows per label.
        target: (C,) a target mix: adds ``"target"`` (the rows weighted to that mix) and ``"target_shares"``.

    Returns:
        ``{"counts": [...], "train": {...}, "balanced": {...}}``; macro-F1 over the labels the rows hold;
        under ``train`` and ``balanced`` also ``ece``, the rows' calibration error under that prior (the rows
        are mixed like the training rows: a trial's balanced prior raised accuracy there and doubled ECE).
    """
    out: dict[str, Any] = {"counts": [int(n) for n in np.asarray(counts)]}
    for prior in (ClassPrior.train, ClassPrior.balanced):
        probs = base.for_prior(prior, counts).probs(logits)  # (N, C)
        out[prior.value] = decision_scores(labels, probs.argmax(1)) | {"ece": ece(probs, labels)}
    if target is not None:
        y = np.asarray(labels, dtype=np.int64)
        weights = shift_weights(target, y)[y]  # (N,): the weighted rows are mixed like the target
        pred = {p: base.for_prior(p, counts, target).probs(logits).argmax(1) for p in ClassPrior}
        out["target"] = {p.value: decision_scores(y, pred[p], weights) for p in ClassPrior}
        out["target_shares"] = [float(v) for v in np.asarray(target)]
    return out


def mix_shares(prior: ClassPrior | str, target: Array | None, num_classes: int) -> np.ndarray | None:
    """(C,) the label mix the sets' coverage and the flag's keep rate are for (``None``: the rows' own).

    ``target``'s shares under ``prior=target``, every label alike under ``balanced``: a prior says how new
    texts are mixed, so the sets cover and the out-of-scope flag keeps what they promise on texts mixed that
    way. (Weighted to the training mix, a trial's flag raised 7-35 % of the in-scope texts of 5-row labels on
    a file with every label alike, and 1-5 % of 40-row labels'.)
    """
    prior = ClassPrior(prior)
    if prior is ClassPrior.target:
        return None if target is None else np.asarray(target, dtype=np.float64)
    return np.full(num_classes, 1.0 / num_classes) if prior is ClassPrior.balanced else None


def shift_weights(target: Array | None, labels: Array) -> np.ndarray | None:
    """(C,) each label's target share over its share of ``labels`` (``None`` without a target).

    A label the rows lack counts as one row (a finite weight).
    """
    if target is None:
        return None
    y = np.asarray(labels, dtype=np.int64)
    return np.asarray(target) / (np.bincount(y, minlength=len(target)).clip(min=1) / len(y))


def decision_scores(labels: Array, pred: Array, weights: Array | None = None) -> dict[str, float]:
    """Accuracy, balanced accuracy (mean per-label recall) and macro-F1 of (N,) top labels ``pred``.

    Macro-F1 as the headline ``metrics.f1_macro`` of ``ucse eval`` averages it (scikit-learn's default): over
    the labels ``labels`` hold or ``pred`` names, so a label predicted but absent from the split scores 0 and
    both figures printed as "macro-F1" mean the same. ``weights``: (N,) per-row weights (scikit-learn's
    ``sample_weight``), e.g. to score the rows as if mixed otherwise.
    """
    y, p = np.asarray(labels), np.asarray(pred)
    with warnings.catch_warnings():  # mean recall over the labels y holds, as documented: no warning each fit
        warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
        warnings.filterwarnings("ignore", message="A single label was found")  # one label in the rows
        balanced = float(balanced_accuracy_score(y, p, sample_weight=weights))
    return {
        "accuracy": float(accuracy_score(y, p, sample_weight=weights)),
        "balanced_accuracy": balanced,
        "f1_macro": float(
            f1_score(y, p, labels=np.union1d(y, p), average="macro", zero_division=0, sample_weight=weights)
        ),
    }
