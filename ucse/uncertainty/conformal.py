"""Split-conformal prediction sets: APS (Romano et al. 2020) and RAPS (Angelopoulos et al. 2021).

Both are a few tensor operations on sorted probabilities; no maintained package fits the stack (MAPIE wraps
scikit-learn estimators, TorchCP and torch-uncertainty pull torchvision), so they are written here.

The conformal score of label y for a text is the probability mass of the labels ranked above y plus y's own
mass (times U ~ Uniform(0, 1) when randomised), plus for RAPS ``lambda * max(0, rank_y - k_reg)``. The set
is every label whose score is at most the calibrated quantile, so calibration and prediction share one
function and the per-text U.
"""

from __future__ import annotations

import math

import torch

from ucse.uncertainty.scores import Array, as_f64


def label_scores(
    probs: Array,
    u: Array | None = None,
    lam: float = 0.0,
    k_reg: int = 0,
) -> torch.Tensor:
    """Conformal scores of every label for every text.

    Args:
        probs: (N, C) calibrated probabilities.
        u: (N,) uniforms in [0, 1] for the randomised version; ``None`` is the deterministic one (U = 1).
        lam: RAPS penalty per rank beyond ``k_reg`` (0 gives APS).
        k_reg: RAPS: ranks up to this are free.

    Returns:
        (N, C) scores, higher = less plausible label.
    """
    p = as_f64(probs)
    sorted_p, order = torch.sort(p, dim=1, descending=True, stable=True)  # (N, C)
    cum = torch.cumsum(sorted_p, dim=1)  # mass up to and including each rank
    uu = torch.ones(p.shape[0], dtype=torch.float64) if u is None else as_f64(u)
    scores_sorted = cum - (1.0 - uu)[:, None] * sorted_p  # U=1: cum; U=0: mass strictly above
    rank = torch.arange(1, p.shape[1] + 1, dtype=torch.float64)  # 1-based
    scores_sorted = scores_sorted + lam * (rank - k_reg).clamp_min(0.0)[None]
    return torch.empty_like(scores_sorted).scatter_(1, order, scores_sorted)


def conformal_quantile(scores: Array, alpha: float) -> float:
    """The ``ceil((n + 1)(1 - alpha))``-th smallest calibration score (+inf when that exceeds n).

    With it, an exchangeable test text's true-label score is at most the quantile with probability
    >= 1 - alpha (and < 1 - alpha + 1/(n + 1) for continuous scores).

    Args:
        scores: (n,) true-label scores of the calibration texts.
        alpha: miscoverage in (0, 1).

    Returns:
        q-hat.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return order_statistic(scores, 1 - alpha)


def order_rank(n: int, level: float) -> int:
    """``ceil((n + 1) * level)``: the rank of the split-conformal quantile of n scores at ``level``.

    Computed so that floating point cannot push it one rank up ((149 + 1) * 0.82 is 123.00000000000001).
    """
    return math.ceil((n + 1) * level - 1e-9)


def order_statistic(scores: Array, level: float) -> float:
    """The ``ceil((n + 1) * level)``-th smallest of n scores (+inf when that exceeds n).

    The split-conformal quantile at ``level`` (1 - alpha for sets, the keep rate for the out-of-scope flag):
    an exchangeable new score is at most it with probability >= ``level``.
    """
    s = torch.sort(as_f64(scores)).values
    k = order_rank(s.numel(), level)
    return math.inf if k > s.numel() else float(s[k - 1])


def weighted_quantiles(scores: Array, labels: Array, weights: Array, alpha: float) -> list[float]:
    """Per candidate label y, q-hat under a label shift (Podkopaev & Ramdas 2021, weighted split conformal).

    The ``1 - alpha`` quantile of ``sum_i w(y_i) delta(s_i) + w(y) delta(+inf)``, normalised, where ``w`` is
    the target mix over the calibration rows' mix: a test text drawn from the target mix has its true label's
    score at most that label's q-hat with probability >= 1 - alpha. Equal weights give
    :func:`conformal_quantile` for every label.

    Args:
        scores: (n,) true-label scores of the calibration texts.
        labels: (n,) their class ids.
        weights: (C,) positive weight of each label.
        alpha: miscoverage in (0, 1).

    Returns:
        C thresholds (+inf where the weight left above the scores exceeds alpha).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return weighted_order_statistics(scores, labels, weights, 1 - alpha)


def weighted_order_statistics(scores: Array, labels: Array, weights: Array, level: float) -> list[float]:
    """Per candidate label y, the ``level`` quantile of ``sum_i w(y_i) delta(s_i) + w(y) delta(+inf)``.

    :func:`order_statistic` under a label shift (:func:`weighted_quantiles` at ``level = 1 - alpha``).

    Args:
        scores: (n,) scores of the calibration texts.
        labels: (n,) their class ids.
        weights: (C,) positive weight of each label.
        level: the share of new texts the quantile must bound, in (0, 1).

    Returns:
        C thresholds (+inf where the weight left above the scores exceeds 1 - level).
    """
    s, order = torch.sort(as_f64(scores))
    w = torch.as_tensor(weights, dtype=torch.float64)  # (C,)
    if s.numel() == 0:  # no calibration texts: every label in every set
        return [math.inf] * len(w)
    cum = torch.cumsum(w[torch.as_tensor(labels).long()][order], 0)  # (n,) weight up to each sorted score
    # (C,): the mass the quantile must reach, the test point's included, less order_rank's guard in the
    # weights' own scale (equal weights must give conformal_quantile's rank: 0.82 * 150 is 123.00000000000001)
    need = (level - 1e-9) * (cum[-1] + w)
    k = torch.searchsorted(cum, need)  # first sorted score whose cumulative weight reaches it
    return [math.inf if int(i) >= len(s) else float(s[i]) for i in k]


def calibrate(
    probs: Array,
    labels: Array,
    alpha: float,
    u: Array | None = None,
    lam: float = 0.0,
    k_reg: int = 0,
    weights: Array | None = None,
) -> float | list[float]:
    """q-hat from calibration texts: the conformal quantile of their true-label scores.

    Args:
        probs: (n, C) calibrated probabilities.
        labels: (n,) true class ids.
        alpha: miscoverage.
        u: (n,) uniforms for the randomised version, or ``None``.
        lam: RAPS penalty.
        k_reg: RAPS free ranks.
        weights: (C,) label-shift weights (target share / calibration share): one q-hat per label
            (:func:`weighted_quantiles`); ``None``: one for all.

    Returns:
        q-hat, or C of them.
    """
    y = torch.as_tensor(labels).long()
    true = label_scores(probs, u, lam, k_reg).gather(1, y[:, None])[:, 0]  # (n,)
    return conformal_quantile(true, alpha) if weights is None else weighted_quantiles(true, y, weights, alpha)


def prediction_sets(
    probs: Array,
    qhat: float | list[float],
    u: Array | None = None,
    lam: float = 0.0,
    k_reg: int = 0,
    include_top: bool = False,
) -> torch.Tensor:
    """Labels whose conformal score is at most q-hat (and the most probable one, with ``include_top``).

    Args:
        probs: (N, C) calibrated probabilities.
        qhat: from :func:`calibrate` (one per label under a label shift).
        u: (N,) uniforms (randomised version), or ``None``.
        lam: RAPS penalty.
        k_reg: RAPS free ranks.
        include_top: add each row's most probable label, so no set is empty (supersets: coverage >= before).

    Returns:
        (N, C) bool membership.
    """
    member = label_scores(probs, u, lam, k_reg) <= torch.as_tensor(qhat, dtype=torch.float64)  # (N, C)
    if include_top:
        p = torch.as_tensor(probs)
        member[torch.arange(p.shape[0]), p.argmax(dim=1)] = True
    return member


def uniforms(n: int, seed: int) -> torch.Tensor:
    """(n,) seeded Uniform(0, 1) draws for randomised sets (same seed -> same sets)."""
    return torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
