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
"""

from __future__ import annotations

import math

import torch

from ucse.export.gaussian import GaussianEmbeddings

VAR_FLOOR = 1e-12


def _check(a: GaussianEmbeddings, b: GaussianEmbeddings) -> None:
    if a.mean.shape != b.mean.shape:
        raise ValueError(f"positive pairs need matching (N, D) Gaussians, got {a.shape} and {b.shape}")
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
