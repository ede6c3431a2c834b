"""The out-of-scope flag's threshold: the score below which ``tpr`` of in-scope texts fall.

Set on n held-out in-scope scores as a split-conformal quantile (:func:`keep_threshold`): a new in-scope
text exchangeable with them is kept with probability >= tpr. Under ``uncertainty.calibration.prior=target``
the new texts are mixed like the target (under ``balanced``, evenly across the labels), not like the held-out
rows: each held-out row is weighted by its
label's target share over its share of the rows (a label shift, as for the prediction sets), and since a new
text's label is unknown when it is flagged, the threshold is the largest of the per-label weighted quantiles
(:func:`target_keep_threshold`). With a new text's label y, Podkopaev & Ramdas (2021) give P(score <= q_y)
>= tpr under the target mix; the largest q is at least q_y, so the guarantee holds whatever the label.
"""

from __future__ import annotations

import math

from ucse.uncertainty.conformal import order_rank, order_statistic, weighted_order_statistics
from ucse.uncertainty.scores import Array

MIXED = {"target": "mixed like the target", "balanced": "mixed evenly across the labels"}
"""How a weighted threshold's mix (``info["mix"]``: the prior that set it) is said after "in-scope texts"."""


def mixed_as(info: dict) -> str | None:
    """The words for ``info["mix"]`` (:data:`MIXED`); ``None`` for the rows' own mix or a damaged value."""
    mix = info.get("mix")
    return MIXED.get(mix) if isinstance(mix, str) else None


def keep_threshold(scores: Array, tpr: float) -> float:
    """The ceil((n + 1) * tpr)-th smallest of n in-scope scores (+inf when that exceeds n: keep all)."""
    return order_statistic(scores, tpr)


def target_keep_threshold(scores: Array, labels: Array, weights: Array, tpr: float) -> float:
    """The threshold keeping >= ``tpr`` of in-scope texts mixed like a target (module docstring).

    Args:
        scores: (n,) held-out in-scope scores.
        labels: (n,) their labels.
        weights: (C,) each label's target share over its share of the n rows.
        tpr: the keep rate.

    Returns:
        The largest per-label weighted quantile (+inf: keep all).
    """
    return max(weighted_order_statistics(scores, labels, weights, tpr))


def rows_to_keep(tpr: float) -> int:
    """The fewest held-out texts for which :func:`keep_threshold` at ``tpr`` is finite."""
    n = max(1, math.ceil(tpr / (1 - tpr) - 1e-9))
    while order_rank(n, tpr) > n:  # the rank keep_threshold takes
        n += 1
    return n


def keepable_tpr(n: int) -> float:
    """The largest tpr on a 0.01 grid for which :func:`keep_threshold` over ``n`` texts is finite."""
    tpr = math.floor(100 * n / (n + 1)) / 100
    while tpr > 0.01 and order_rank(n, tpr) > n:
        tpr = round(tpr - 0.01, 2)
    return tpr


def target_keepable_tpr(scores: Array, labels: Array, weights: Array, tpr: float) -> float | None:
    """The largest keep rate on a 0.01 grid below ``tpr`` for which :func:`target_keep_threshold` is finite.

    ``None`` when even 0.01 has none (no held-out rows).
    """
    t = round(math.floor(100 * tpr) / 100, 2)
    while t >= 0.01:
        if math.isfinite(target_keep_threshold(scores, labels, weights, t)):
            return t
        t = round(t - 0.01, 2)
    return None
