"""The paper's sigma view (Sec. 5.8): sigma scores, Easy/Semi-hard/Hard bins, accuracy-rejection curves.

All functions take torch tensors or numpy arrays and return numpy / Python values, since their results
feed plots and JSON reports rather than autograd.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ucse.uncertainty.scores import scores_without_nan

ArrayLike = torch.Tensor | np.ndarray | Sequence[float]

BIN_NAMES = ("Easy", "Semi-hard", "Hard")
DEFAULT_REJECTION_RATES = tuple(np.round(np.arange(0.0, 0.91, 0.05), 2).tolist())


def _np(x: ArrayLike) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x)


def sigma_scores(var: ArrayLike) -> np.ndarray:
    """Per-sample uncertainty: the mean over embedding dimensions of the predicted sigma.

    Paper Sec. 5.8 bins samples by "the mean of the predicted uncertainty sigma", i.e. of the standard
    deviation, not of the variance the head outputs.

    Args:
        var: (N, D) predicted variances sigma^2 (non-negative).

    Returns:
        (N,) float64 mean_d sqrt(var[n, d]).
    """
    v = _np(var).astype(np.float64)
    if v.ndim != 2:
        raise ValueError(f"var must be (N, D), got shape {v.shape}")
    if (v < 0).any():
        raise ValueError("var has negative entries")
    return np.sqrt(v).mean(axis=1)


def confidence_from_sigma(sigma: ArrayLike) -> np.ndarray:
    """(N,) confidence -sigma: lower uncertainty means higher confidence."""
    return -_np(sigma).astype(np.float64)


def confidence_from_probs(probs: ArrayLike) -> np.ndarray:
    """(N,) confidence max_c p_c from (N, C) softmax probabilities."""
    return _np(probs).astype(np.float64).max(axis=1)


def difficulty_bins(
    sigma: ArrayLike, correct: ArrayLike, thresholds: tuple[float, float] = (0.8, 1.0)
) -> dict[str, dict[str, float]]:
    """Split samples into Easy / Semi-hard / Hard by sigma and summarise each bin (paper Fig. 5, left).

    Easy: sigma < t1; Semi-hard: t1 <= sigma < t2; Hard: sigma >= t2 (paper thresholds 0.8 and 1.0).

    Args:
        sigma: (N,) per-sample sigma, e.g. from :func:`sigma_scores`.
        correct: (N,) bool, whether each prediction was right.
        thresholds: (t1, t2) with t1 <= t2.

    Returns:
        ``{bin_name: {"count", "errors", "accuracy", "error_share"}}`` for the three bins in order.
        ``accuracy`` is NaN for an empty bin. ``error_share`` is the bin's errors over all errors (the
        three shares sum to 1); it is 0.0 everywhere when there are no errors at all.
    """
    s = _np(sigma).astype(np.float64)
    ok = _np(correct).astype(bool)
    if s.shape != ok.shape or s.ndim != 1:
        raise ValueError(f"sigma and correct must both be (N,), got {s.shape} and {ok.shape}")
    t1, t2 = thresholds
    if t1 > t2:
        raise ValueError(f"thresholds must be increasing, got {thresholds}")

    masks = (s < t1, (s >= t1) & (s < t2), s >= t2)
    total_errors = int((~ok).sum())
    out: dict[str, dict[str, float]] = {}
    for name, m in zip(BIN_NAMES, masks, strict=True):
        count = int(m.sum())
        errors = int((m & ~ok).sum())
        out[name] = {
            "count": count,
            "errors": errors,
            "accuracy": float(ok[m].mean()) if count else float("nan"),
            "error_share": errors / total_errors if total_errors else 0.0,
        }
    return out


def accuracy_rejection_curve(
    confidence: ArrayLike, correct: ArrayLike, rates: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy on the kept samples after rejecting the least-confident fraction r (Nadeem et al., 2009).

    For each rate r, floor(r * N) samples are rejected: those with the lowest confidence. Where the cut falls
    inside a group of equal confidences, the accuracy is the expectation over the group's orders (its
    right answers spread evenly over it), so the curve does not depend on the rows' order. At least one
    sample is always kept.

    Args:
        confidence: (N,) higher means more confident; use -sigma for the uncertainty head
            (:func:`confidence_from_sigma`) or the max softmax probability (:func:`confidence_from_probs`).
        correct: (N,) bool, whether each prediction was right.
        rates: rejection rates in [0, 1), ascending; defaults to 0, 0.05, ..., 0.9.

    Returns:
        ``(rates, accuracies)``, both (R,) float64.
    """
    conf = _np(confidence).astype(np.float64)
    ok = _np(correct).astype(bool)
    if conf.shape != ok.shape or conf.ndim != 1 or conf.size == 0:
        raise ValueError(f"confidence and correct must both be non-empty (N,), got {conf.shape}, {ok.shape}")
    conf = scores_without_nan(conf, "the confidences").numpy()
    r = np.asarray(DEFAULT_REJECTION_RATES if rates is None else rates, dtype=np.float64)
    if r.ndim != 1 or (r < 0).any() or (r >= 1).any() or (np.diff(r) < 0).any():
        raise ValueError("rates must be an ascending 1-D sequence in [0, 1)")

    n = conf.size
    order = np.argsort(conf, kind="stable")  # least confident first
    c_sorted, ok_sorted = conf[order], ok[order].astype(np.float64)
    # Tie groups [start, end) of equal confidence; the expected number right among the first j rejected.
    starts = np.flatnonzero(np.r_[True, c_sorted[1:] != c_sorted[:-1]])
    ends = np.r_[starts[1:], n]
    before = np.r_[0.0, np.cumsum(ok_sorted)][starts]  # (G,) right answers before each group
    rate = np.add.reduceat(ok_sorted, starts) / (ends - starts)  # (G,) share right within each group
    # The epsilon keeps e.g. 0.3 * 10 = 3.0000000000000004 / 2.9999999 from flipping the floor.
    n_reject = np.minimum(np.floor(r * n + 1e-9).astype(np.int64), n - 1)
    group = np.searchsorted(starts, n_reject, side="right") - 1  # the group the cut falls in (n_reject < n)
    right_rejected = before[group] + (n_reject - starts[group]) * rate[group]
    accs = (ok_sorted.sum() - right_rejected) / (n - n_reject)
    return r, accs


def arc_area(rates: ArrayLike, accuracies: ArrayLike) -> float:
    """Trapezoid area under an accuracy-rejection curve.

    The integral runs from the first to the last given rate (0 to the maximum rate for the default
    grid). The curve is not extrapolated beyond the last point to r = 1, where the accuracy of an
    ever smaller kept set is undefined; divide by the covered range to get a mean accuracy.

    Args:
        rates: (R,) ascending rejection rates.
        accuracies: (R,) accuracy at each rate.

    Returns:
        The area, in accuracy x rate units.
    """
    r = _np(rates).astype(np.float64)
    a = _np(accuracies).astype(np.float64)
    if r.shape != a.shape or r.ndim != 1 or r.size < 2:
        raise ValueError("rates and accuracies must be (R,) with R >= 2")
    return float(np.sum((r[1:] - r[:-1]) * (a[1:] + a[:-1]) / 2.0))
