"""Feature-density scores on mu: class-conditional Gaussians with one shared covariance (Lee et al. 2018).

Fitted on the training split's means; a text far from every class mean (in the covariance's metric) is
unlike anything the head was trained on. The shared covariance is estimated with scikit-learn's Ledoit-Wolf
shrinkage: with D = 384 and ~100 texts per class an unshrunk covariance is singular or badly conditioned.
One covariance for all classes makes ``neg_log_density`` a monotone function of ``mahalanobis`` wherever
one class dominates the mixture, which is why their rankings (AURC, OOD AUROC) nearly coincide. DDU's
per-class covariances (Mukhoti et al. 2023) are ``class_mahalanobis`` in :mod:`ucse.uncertainty.ood_scores`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ucse.uncertainty.scores import Array, as_f64


@dataclass
class ClassGaussians:
    """Class-conditional Gaussians ``N(m_c, Sigma)`` with a shared precision.

    Attributes:
        means: (C, D) class means m_c.
        precision: (D, D) Sigma^-1.
        log_prior: (C,) log of the class frequencies.
        logdet: log det Sigma.
    """

    means: torch.Tensor
    precision: torch.Tensor
    log_prior: torch.Tensor
    logdet: float


def ledoit_wolf(residuals: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(precision (D, D), log det covariance) of (N, D) zero-mean residuals, Ledoit-Wolf shrunk."""
    # Imported here: only fitting needs it, and scikit-learn would add ~1 s to loading a head for prediction.
    from sklearn.covariance import LedoitWolf

    lw = LedoitWolf(assume_centered=True).fit(residuals.numpy())
    cov = torch.as_tensor(lw.covariance_, dtype=torch.float64)
    return torch.as_tensor(lw.precision_, dtype=torch.float64), float(torch.linalg.slogdet(cov).logabsdet)


def fit_class_gaussians(features: Array, labels: Array, num_classes: int) -> ClassGaussians:
    """Fit class means and a shared Ledoit-Wolf covariance of the within-class residuals.

    Args:
        features: (N, D) training means mu.
        labels: (N,) class ids in [0, C).
        num_classes: C; classes without a training row get no Gaussian (their prior is 0).

    Returns:
        The fitted :class:`ClassGaussians`.
    """
    x, y = as_f64(features), torch.as_tensor(labels).long()
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"features must be (N, D) and labels (N,), got {tuple(x.shape)}, {tuple(y.shape)}")
    counts = torch.bincount(y, minlength=num_classes).to(torch.float64)  # (C,)
    means = torch.zeros(num_classes, x.shape[1], dtype=torch.float64).index_add_(0, y, x)
    means = means / counts.clamp_min(1.0)[:, None]  # (C, D)
    precision, logdet = ledoit_wolf(x - means[y])
    log_prior = torch.log(counts / counts.sum())  # -inf for absent classes
    return ClassGaussians(means, precision, log_prior, logdet)


def squared_mahalanobis(features: Array, g: ClassGaussians) -> torch.Tensor:
    """``(x - m_c)^T Sigma^-1 (x - m_c)`` for every row and class.

    Args:
        features: (N, D) means mu.
        g: fitted Gaussians.

    Returns:
        (N, C) float64; absent classes get +inf.
    """
    x = as_f64(features)
    # Expanded quadratic form: an explicit (N, C, D) difference tensor would take GBs for 77 classes.
    xp = x @ g.precision  # (N, D)
    mp = g.means @ g.precision  # (C, D)
    d2 = (xp * x).sum(1)[:, None] - 2.0 * xp @ g.means.T + (mp * g.means).sum(1)[None]  # (N, C)
    d2 = d2.clamp_min(0.0)  # rounding can push an exact 0 slightly negative
    return torch.where(torch.isfinite(g.log_prior)[None], d2, torch.full_like(d2, math.inf))


def mahalanobis(features: Array, g: ClassGaussians) -> torch.Tensor:
    """Distance to the closest class: ``min_c (x - m_c)^T Sigma^-1 (x - m_c)`` (Lee et al. 2018).

    Returns:
        (N,) squared distance, >= 0; for in-distribution Gaussian data it is about D.
    """
    return squared_mahalanobis(features, g).min(dim=1).values


def neg_log_density(features: Array, g: ClassGaussians) -> torch.Tensor:
    """``-log sum_c pi_c N(x; m_c, Sigma)``: negative log density of the shared-covariance mixture.

    Returns:
        (N,) nats; unbounded in both directions (a density, not a probability), higher = less typical.
    """
    d = g.means.shape[1]
    log_norm = -0.5 * (d * math.log(2 * math.pi) + g.logdet)
    log_joint = g.log_prior[None] + log_norm - 0.5 * squared_mahalanobis(features, g)  # (N, C)
    return -torch.logsumexp(log_joint, dim=1)
