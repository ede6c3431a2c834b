"""Selective prediction: risk-coverage curves, AURC / E-AURC, and abstention thresholds with a guarantee.

torchmetrics 1.9 has no risk-coverage metric (and torch-uncertainty, which has AURC, cannot be imported here:
it pulls torchvision), so the curve is computed here, in O(N log N). Ties in the score are resolved by their
expectation over random orderings, so a constant score gets the AURC of random rejection, not an artefact
of index order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ucse.uncertainty.conformal import order_statistic
from ucse.uncertainty.scores import Array, scores_without_nan


def _np_bool(x: Array) -> np.ndarray:
    return (x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)).astype(bool)


def risk_coverage_curve(uncertainty: Array, correct: Array) -> tuple[np.ndarray, np.ndarray]:
    """Selective risk after keeping the k most certain texts, for k = 1..N.

    Args:
        uncertainty: (N,) score, higher = more uncertain.
        correct: (N,) bool, whether each prediction was right.

    Returns:
        ``(coverage, risk)``, both (N,) float64: coverage k/N and the error rate among the k kept texts
        (expected over random orderings of tied scores).
    """
    u = scores_without_nan(uncertainty, "the uncertainty scores").numpy()
    err = ~_np_bool(correct)
    if u.shape != err.shape or u.ndim != 1 or u.size == 0:
        raise ValueError(f"uncertainty and correct must both be non-empty (N,), got {u.shape}, {err.shape}")
    n = u.size
    order = np.argsort(u, kind="stable")
    u_sorted, e_sorted = u[order], err[order].astype(np.float64)
    # Tie groups: [start, end) runs of equal scores; within a group errors are spread evenly.
    starts = np.flatnonzero(np.r_[True, u_sorted[1:] != u_sorted[:-1]])
    ends = np.r_[starts[1:], n]
    cum_end = np.cumsum(e_sorted)[ends - 1]  # errors kept once a whole group is in
    cum_start = cum_end - np.add.reduceat(e_sorted, starts)  # errors before the group
    group = np.repeat(np.arange(starts.size), ends - starts)  # (N,) group of each rank
    k = np.arange(1, n + 1, dtype=np.float64)
    rate = (cum_end - cum_start)[group] / (ends - starts)[group]
    errors = cum_start[group] + (k - starts[group]) * rate
    return k / n, errors / k


def aurc(uncertainty: Array, correct: Array) -> float:
    """Area under the risk-coverage curve, ``mean_k risk(k)`` (Geifman et al. 2019); lower is better.

    Args:
        uncertainty: (N,) score, higher = more uncertain.
        correct: (N,) bool.

    Returns:
        AURC in [0, 1].
    """
    return float(risk_coverage_curve(uncertainty, correct)[1].mean())


def e_aurc(uncertainty: Array, correct: Array) -> float:
    """Excess AURC: AURC minus that of the oracle ranking (every error after every correct text).

    Removes the part of AURC owed to the classifier's error rate, so scores of different models compare.
    """
    ok = _np_bool(correct)
    return aurc(uncertainty, correct) - aurc((~ok).astype(np.float64), ok)


def risk_upper_bound(errors: int, n: int, delta: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial error rate at confidence 1 - delta.

    Args:
        errors: observed errors.
        n: trials (> 0).
        delta: allowed failure probability.

    Returns:
        B with P(true rate <= B) >= 1 - delta.
    """
    if errors >= n:
        return 1.0
    from scipy.stats import beta  # imported here: only fitting a threshold needs it, not loading a head

    return float(beta.ppf(1.0 - delta, errors + 1, n - errors))


@dataclass
class AbstainThreshold:
    """An abstention rule ``abstain = uncertainty > threshold`` and how it was chosen.

    Attributes:
        threshold: the score above which to abstain (+inf: never; -inf: always).
        rule: ``target_error`` or ``coverage``.
        target: the target error or coverage.
        delta: confidence parameter of the guarantee (``target_error`` rule).
        bound: the certified upper bound on the selective error (``target_error`` rule).
        val_coverage: share of validation texts answered.
        val_error: error rate on the answered validation texts.
        achievable: whether some threshold met the target (else the rule abstains on everything).
    """

    threshold: float
    rule: str
    target: float
    delta: float | None
    bound: float | None
    val_coverage: float
    val_error: float
    achievable: bool


def per_test_delta(n: int, delta: float) -> float:
    """SGR's confidence split: ``delta / (ceil(log2 n) + 2)``.

    :func:`threshold_for_error` tests the bound of at most ``ceil(log2 n)`` thresholds in its binary search
    plus two more (answer-all first, the most certain text last); a union bound over every test made keeps
    the overall failure probability at ``delta``.
    """
    return delta / (max(1, math.ceil(math.log2(n))) + 2)


def _summary(u: np.ndarray, err: np.ndarray, t: float) -> tuple[float, float]:
    kept = u <= t
    return float(kept.mean()), float(err[kept].mean()) if kept.any() else 0.0


def threshold_for_error(
    uncertainty: Array, correct: Array, target_error: float, delta: float = 0.05
) -> AbstainThreshold:
    """Selection with guaranteed risk (Geifman & El-Yaniv 2017, Algorithm 1).

    Binary search over thresholds on the sorted validation scores, ``ceil(log2 N)`` steps, each testing the
    Clopper-Pearson bound at :func:`per_test_delta` (a union bound over every test made, the answer-all
    and most-certain-text checks included). The returned threshold
    has the largest coverage among those visited whose bound is below ``target_error``; then, with
    probability >= 1 - delta over the validation draw, the error on answered test texts is <= target_error.

    Args:
        uncertainty: (N,) validation scores, higher = more uncertain.
        correct: (N,) bool.
        target_error: r*, in (0, 1).
        delta: failure probability, in (0, 1).

    Returns:
        The :class:`AbstainThreshold`; ``achievable`` False (threshold -inf) when no visited threshold passes.
    """
    if not 0 < target_error < 1 or not 0 < delta < 1:
        raise ValueError(f"target_error and delta must lie in (0, 1), got {target_error}, {delta}")
    u = scores_without_nan(uncertainty, "the uncertainty scores").numpy()
    err = ~_np_bool(correct)
    s = np.sort(u)
    n = s.size
    steps = max(1, math.ceil(math.log2(n)))
    d = per_test_delta(n, delta)

    def bound(t: float) -> float:
        kept = u <= t
        return risk_upper_bound(int(err[kept].sum()), int(kept.sum()), d)

    lo, hi, best = 0, n - 1, None
    if bound(s[hi]) < target_error:  # everything passes: answer all
        best = hi
    else:
        for _ in range(steps):
            mid = (lo + hi + 1) // 2
            if bound(s[mid]) < target_error:
                best, lo = mid, mid
            else:
                hi = mid
            if hi - lo <= 1:
                break
        if best is None and bound(s[0]) < target_error:
            best = 0
    t = math.inf if best == n - 1 else (-math.inf if best is None else float(s[best]))
    cov, risk = _summary(u, err, t)
    return AbstainThreshold(
        t,
        "target_error",
        target_error,
        delta,
        None if best is None else bound(s[best]),
        cov,
        risk,
        best is not None,
    )


def lowest_certifiable_error(uncertainty: Array, correct: Array, delta: float = 0.05) -> float:
    """The lowest error bound any threshold reaches on these validation texts, at SGR's per-test delta.

    The Clopper-Pearson bound (at :func:`per_test_delta`, as :func:`threshold_for_error` tests it) of
    every threshold on the sorted scores, minimised: no ``target_error`` at or below it can be certified
    with these N texts, so it is what to tell a user whose target failed. (A target just above it is not
    guaranteed to pass either: the binary search visits ``ceil(log2 N)`` thresholds, not all of them.)
    """
    from scipy.stats import beta

    u = scores_without_nan(uncertainty, "the uncertainty scores").numpy()
    order = np.argsort(u, kind="stable")
    err = (~_np_bool(correct))[order]
    n = u.size
    d = per_test_delta(n, delta)
    kept = np.arange(1, n + 1)  # answer the k most certain texts (ties broken by order: a lower bound)
    errors = np.cumsum(err)
    bounds = np.where(errors >= kept, 1.0, beta.ppf(1.0 - d, errors + 1, np.maximum(kept - errors, 1)))
    return float(bounds.min())


def threshold_for_coverage(uncertainty: Array, correct: Array, coverage: float) -> AbstainThreshold:
    """The threshold answering at least ``coverage`` of texts, with a conformal guarantee.

    The ``ceil((N + 1) * coverage)``-th smallest validation score: for an exchangeable test text,
    P(score <= threshold) >= coverage (split-conformal quantile argument).

    Args:
        uncertainty: (N,) validation scores.
        correct: (N,) bool (for the validation summary only).
        coverage: in (0, 1].

    Returns:
        The :class:`AbstainThreshold`.
    """
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must lie in (0, 1], got {coverage}")
    u = scores_without_nan(uncertainty, "the uncertainty scores").numpy()
    err = ~_np_bool(correct)
    t = order_statistic(u, coverage)
    cov, risk = _summary(u, err, t)
    return AbstainThreshold(t, "coverage", coverage, None, None, cov, risk, True)


def offered_target(
    uncertainty: Array, correct: Array, delta: float = 0.05, floor: float | None = None
) -> float | None:
    """The smallest error target on a 1-point grid that :func:`threshold_for_error` certifies by abstaining.

    What to offer a user whose target failed: starting at the lowest certifiable bound
    (:func:`lowest_certifiable_error`), rounded up to a point, each target is tried as SGR would run it (its
    binary search may miss a threshold the floor counted, so the floor itself is not always certifiable).
    A target certified only by answering every text (threshold +inf) is no offer: it abstains on nothing,
    which is what the failed target's warning already said would happen (a trial on 57 held-out texts was
    offered 0.22, and ``ucse calibrate`` with it still abstained on none). Every larger target is certified
    the same way, so the search stops there.

    Args:
        uncertainty: (N,) validation scores.
        correct: (N,) bool.
        delta: the guarantee's failure probability.
        floor: :func:`lowest_certifiable_error` of these rows, when the caller has it already.

    Returns:
        The target in (0, 1), or ``None`` when none below 0.99 is certified with some text left out.
    """
    if floor is None:
        floor = lowest_certifiable_error(uncertainty, correct, delta)
    start = max(1, math.ceil(floor * 100 - 1e-9))
    for points in range(start, 100):
        rule = threshold_for_error(uncertainty, correct, points / 100, delta)
        if rule.achievable:
            return None if rule.threshold == math.inf else points / 100
    return None


def answer_all_bound(correct: Array, delta: float = 0.05) -> float:
    """The error bound SGR certifies for answering every one of these N texts (its first test).

    What the N held-out texts guarantee about the model's overall error, at :func:`per_test_delta`: where no
    target is certified by abstaining (:func:`offered_target` is ``None``), the one statement they support.
    """
    err = ~_np_bool(correct)
    return risk_upper_bound(int(err.sum()), int(err.size), per_test_delta(int(err.size), delta))
