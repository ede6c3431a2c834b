"""Comparable member variances: one scale per member, fitted on held-out positive pairs.

Members of different kinds produce variances on unrelated scales (a Laplace posterior vs a trained
variance branch), so inverse-trace weights would reflect the kind, not the reliability. Each member's
variance gets a scalar s fitted by maximum held-out predictive likelihood of positive pairs: under the
member, the two texts of a positive pair (a, b) embed as independent N(mu_a, s var_a), N(mu_b, s var_b)
and should coincide, so the observed difference mu_a - mu_b ~ N(0, s (var_a + var_b)). The maximiser is
closed form,

    s* = 1/(N D) sum_i sum_d (mu_a - mu_b)_id^2 / (var_a + var_b)_id,

i.e. the scale at which the member's variance explains how far apart it puts texts that mean the same
(the fidelity term of the paper's surrogate loss, Eq. 2). A member that separates positives more than
its variance admits gets a larger scale, hence a larger trace and a smaller UEC weight.

That likelihood sees positives only, so it cannot tell a member that also puts *negatives* close (a
poor discriminator) from a good one: on STSBenchmark the two MiniLM members came out with equal traces
(0.130 / 0.132) although one is 8.6 Spearman points worse. :func:`fit_contrastive_scale` (option
``fit.scale: contrastive``) fits s by the held-out predictive likelihood of *retrieving* the positive
among candidates, p(b | a) = softmax_b(-(mu_a - mu_b)^T (s (Sigma_a + Sigma_b))^-1 (mu_a - mu_b) / 2): the
Mahalanobis distance under the pair's summed variance, s acting as the temperature. A member whose negatives
crowd its positives needs a larger s, so it gets a larger trace and a smaller weight. (The full Gaussian
kernel N(mu_a - mu_b; 0, s (Sigma_a + Sigma_b)) also carries -log|s (Sigma_a + Sigma_b)| / 2, which ranks
candidates by their variance whatever s is: on AmazonCounterfactual heads it kept the held-out log-likelihood
near -134 at every s, so it is left out.) Measured, it does not do what it was meant to: on STSBenchmark the
better member (all-MiniLM, held-out log-likelihood -0.09 vs -0.49) got the *larger* scaled trace (9.0 vs
5.8), because the optimal temperature follows how spread out a member's distances are, not how reliable it
is; UEC fell from 80.16 to 78.13 Spearman. ``pairs`` stays the default (docs/RESULTS_UEC.md).
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from scipy.optimize import minimize_scalar

from ucse.core.gaussian import GaussianEmbeddings

VAR_FLOOR = 1e-12


class ScaleFit(str, Enum):
    """Which held-out likelihood a member's variance scale maximises."""

    contrastive = "contrastive"  # retrieving the positive among negatives (fit_contrastive_scale)
    pairs = "pairs"  # the positive pairs' differences alone (fit_variance_scale)


def _check(a: GaussianEmbeddings, b: GaussianEmbeddings) -> None:
    if a.mean.shape != b.mean.shape:
        raise ValueError(
            "positive pairs need matching (N, D) Gaussians, got "
            f"{tuple(a.mean.shape)} and {tuple(b.mean.shape)}"
        )
    if a.n < 1:
        raise ValueError("fitting a variance scale needs at least one held-out positive pair, got none")


def fit_variance_scale(a: GaussianEmbeddings, b: GaussianEmbeddings) -> float:
    """The scale s maximising sum_i log N(mu_a_i - mu_b_i; 0, s (var_a_i + var_b_i)) (closed form).

    Args:
        a: (N, D) Gaussians of the first texts of N held-out positive pairs.
        b: (N, D) Gaussians of their partners.

    Returns:
        s > 0.
    """
    _check(a, b)
    resid = (a.mean.double() - b.mean.double()) ** 2  # (N, D)
    total = (a.var.double() + b.var.double()).clamp_min(VAR_FLOOR)
    return float((resid / total).mean().clamp_min(VAR_FLOOR))


def pair_log_likelihood(a: GaussianEmbeddings, b: GaussianEmbeddings, scale: float = 1.0) -> float:
    """Mean per-pair log N(mu_a - mu_b; 0, scale (var_a + var_b)) (for reports and tests)."""
    _check(a, b)
    resid = (a.mean.double() - b.mean.double()) ** 2
    total = scale * (a.var.double() + b.var.double()).clamp_min(VAR_FLOOR)
    per = -0.5 * (torch.log(2 * math.pi * total) + resid / total).sum(1)  # (N,)
    return float(per.mean())


def _mahalanobis(anchor: GaussianEmbeddings, cand: GaussianEmbeddings, chunk: int = 64) -> torch.Tensor:
    """(N, M) R_ij = sum_d (mu_a_i - mu_c_j)^2 / (var_a_i + var_c_j)_d."""
    mc, vc = cand.mean.double(), cand.var.double()  # (M, D)
    rows = []
    for i in range(0, anchor.n, chunk):  # (chunk, M, D) at a time
        ma, va = anchor.mean[i : i + chunk].double(), anchor.var[i : i + chunk].double()
        v = (va[:, None, :] + vc[None]).clamp_min(VAR_FLOOR)
        rows.append(((ma[:, None, :] - mc[None]) ** 2 / v).sum(-1))
    return torch.cat(rows)


def _retrieval_loglik(r: torch.Tensor, positive: torch.Tensor, log_s: float) -> float:
    logits = -0.5 * r / math.exp(log_s)  # (N, M); excluded candidates carry R = inf
    return float(torch.log_softmax(logits, dim=1).gather(1, positive[:, None]).mean())


def contrastive_log_likelihood(
    anchor: GaussianEmbeddings,
    cand: GaussianEmbeddings,
    positive: torch.Tensor,
    exclude: torch.Tensor | None = None,
    scale: float = 1.0,
) -> float:
    """Mean log p(positive | anchor): softmax over candidates of -R / (2 s), R the Mahalanobis distance.

    Args:
        anchor: (N, D) Gaussians of the held-out anchors.
        cand: (M, D) Gaussians of the candidates (the positives and the negatives).
        positive: (N,) index into ``cand`` of each anchor's positive.
        exclude: (N, M) True where a candidate is another known positive of the anchor (not a negative).
        scale: s > 0.
    """
    r = _mahalanobis(anchor, cand)
    if exclude is not None:
        r = r.masked_fill(exclude, math.inf)
    return _retrieval_loglik(r, positive, math.log(scale))


def fit_contrastive_scale(
    anchor: GaussianEmbeddings,
    cand: GaussianEmbeddings,
    positive: torch.Tensor,
    exclude: torch.Tensor | None = None,
    bounds: tuple[float, float] = (1e-8, 1e8),
) -> float:
    """The scale s maximising :func:`contrastive_log_likelihood` (bounded 1-D search over log s, scipy).

    The objective is a log-softmax of logits linear in 1/s (a temperature), smooth in log s; ``bounds`` keep
    a member that ranks every positive first (optimum s -> 0) or none (s -> inf) finite.
    """
    if anchor.n < 1 or cand.n < 2:
        raise ValueError(
            f"a contrastive scale needs >= 1 anchor and >= 2 candidates, got {anchor.n}, {cand.n}"
        )
    if anchor.dim != cand.dim:
        raise ValueError(f"anchors are {anchor.dim}-d but candidates {cand.dim}-d")
    r = _mahalanobis(anchor, cand)
    if exclude is not None:
        if bool(exclude.gather(1, positive[:, None]).any()):
            raise ValueError("exclude masks an anchor's own positive")
        r = r.masked_fill(exclude, math.inf)
    lo, hi = (math.log(b) for b in bounds)
    res = minimize_scalar(
        lambda t: -_retrieval_loglik(r, positive, t),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-4},
    )
    return float(math.exp(res.x))
