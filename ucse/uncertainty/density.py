"""Feature-density scores on mu: class-conditional Gaussians with one shared covariance (Lee et al. 2018).

Fitted on the training split's means; a text far from every class mean (in the covariance's metric) is
unlike anything the head was trained on. The shared covariance is Ledoit-Wolf shrunk (scikit-learn's
estimator, computed here from streamed sums): with D = 384 and ~100 texts per class an unshrunk covariance
is singular or badly conditioned.
One covariance for all classes makes ``neg_log_density`` a monotone function of ``mahalanobis`` wherever
one class dominates the mixture, which is why their rankings (AURC, OOD AUROC) nearly coincide. DDU's
per-class covariances (Mukhoti et al. 2023) are ``class_mahalanobis`` in :mod:`ucse.uncertainty.ood_scores`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
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


CHUNK_ROWS = 8192
"""Rows converted to float64 at a time when fitting: memory stays at (CHUNK_ROWS, D) whatever N is."""


def row_chunks(x: Array) -> Iterator[tuple[slice, torch.Tensor]]:
    """``(rows, (<= CHUNK_ROWS, D) float64 block)`` over the rows of ``x``, without copying all of it."""
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    for start in range(0, t.shape[0], CHUNK_ROWS):
        rows = slice(start, min(start + CHUNK_ROWS, t.shape[0]))
        yield rows, t[rows].cpu().to(torch.float64)


class LedoitWolfSums:
    """Running sums of zero-mean residual blocks from which :meth:`result` gives the Ledoit-Wolf estimate.

    The same estimator as scikit-learn's ``LedoitWolf(assume_centered=True)`` (its shrinkage formula, its
    ``pinvh`` precision), computed from sums that stream: ``S = X^T X`` and ``sum_i ||x_i||^4``. Written
    because scikit-learn needs the whole (N, D) float64 matrix and its square: 1.2 GB of peak memory for
    the profile of a 100k-text run, where these sums need (D, D) (docs/RESULTS.md section 5). Tested equal
    to scikit-learn's.
    """

    def __init__(self) -> None:
        self.s: torch.Tensor | None = None  # (D, D) sum of r r^T
        self.fourth, self.n = 0.0, 0

    def add(self, residuals: torch.Tensor) -> None:
        """Add (n, D) zero-mean residual rows."""
        r = residuals.to(torch.float64)
        self.s = r.T @ r if self.s is None else self.s + r.T @ r
        self.fourth += float((r * r).sum(1).square().sum())  # sum_i ||r_i||^4
        self.n += r.shape[0]

    def result(self) -> tuple[torch.Tensor, float]:
        """(precision (D, D), log det covariance) of the rows added so far."""
        from scipy.linalg import pinvh  # imported here: only fitting needs it

        if self.s is None or self.n == 0:
            raise ValueError("Ledoit-Wolf needs at least one residual row")
        s, n, d = self.s, self.n, self.s.shape[0]
        emp = s / n  # (D, D) empirical covariance (assume_centered)
        mu = float(torch.trace(emp)) / d
        if mu == 0.0:
            # No spread within any label (each has one training row): no covariance to estimate, and a zero
            # one made every density score NaN. The identity reads Mahalanobis as squared Euclidean distance.
            logging.getLogger(__name__).warning(
                "the labels' training rows show no spread (one row per label): the class Gaussians use an "
                "identity covariance, so the density and Mahalanobis scores are squared Euclidean distances"
            )
            return torch.eye(d, dtype=torch.float64), 0.0
        if d == 1:  # scikit-learn: no shrinkage for one feature
            shrinkage = 0.0
        else:
            delta_ = float((s * s).sum()) / n**2  # ||X^T X||_F^2 / n^2
            beta = (self.fourth / n - delta_) / (d * n)
            delta = (delta_ - 2.0 * mu * float(torch.trace(emp)) + d * mu**2) / d
            beta = min(beta, delta)
            shrinkage = 0.0 if beta == 0 else beta / delta
        cov = (1.0 - shrinkage) * emp
        cov.diagonal().add_(shrinkage * mu)
        precision = torch.as_tensor(pinvh(cov.numpy(), check_finite=False), dtype=torch.float64)
        return precision, float(torch.linalg.slogdet(cov).logabsdet)


def ledoit_wolf_streamed(residuals: Iterable[torch.Tensor]) -> tuple[torch.Tensor, float]:
    """(precision (D, D), log det covariance) of zero-mean residual (n_i, D) blocks, Ledoit-Wolf shrunk."""
    sums = LedoitWolfSums()
    for r in residuals:
        sums.add(r)
    return sums.result()


def ledoit_wolf(residuals: Array) -> tuple[torch.Tensor, float]:
    """(precision (D, D), log det covariance) of (N, D) zero-mean residuals, Ledoit-Wolf shrunk."""
    return ledoit_wolf_streamed(block for _, block in row_chunks(residuals))


Blocks = Callable[[], Iterable[tuple[dict[str, torch.Tensor], torch.Tensor]]]
"""A function yielding the same data afresh on each call: ``({name: (n, D_name) rows}, (n,) labels)``."""


def fit_class_gaussians_streamed(blocks: Blocks, num_classes: int) -> dict[str, ClassGaussians]:
    """:func:`fit_class_gaussians` of every named feature, from two passes over ``blocks()``.

    Pass one sums each class's rows (the means), pass two the residuals' Ledoit-Wolf sums: memory is one
    block and (D, D) per feature, whatever the number of rows (e.g. head outputs computed block by block).
    """
    counts = torch.zeros(num_classes, dtype=torch.float64)
    sums: dict[str, torch.Tensor] = {}
    for feats, y in blocks():
        y = torch.as_tensor(y).long()
        counts += torch.bincount(y, minlength=num_classes).to(torch.float64)
        for k, x in feats.items():
            x = torch.as_tensor(x).to(torch.float64)
            if k not in sums:
                sums[k] = torch.zeros(num_classes, x.shape[1], dtype=torch.float64)
            sums[k].index_add_(0, y, x)
    if not sums:
        raise ValueError("class Gaussians need at least one training row")
    means = {k: v / counts.clamp_min(1.0)[:, None] for k, v in sums.items()}  # (C, D) each
    lw = {k: LedoitWolfSums() for k in means}
    for feats, y in blocks():
        y = torch.as_tensor(y).long()
        for k, x in feats.items():
            lw[k].add(torch.as_tensor(x).to(torch.float64) - means[k][y])
    log_prior = torch.log(counts / counts.sum())  # -inf for absent classes
    out = {}
    for k in means:
        precision, logdet = lw[k].result()
        out[k] = ClassGaussians(means[k], precision, log_prior.clone(), logdet)  # saved side by side
    return out


def fit_class_gaussians(features: Array, labels: Array, num_classes: int) -> ClassGaussians:
    """Fit class means and a shared Ledoit-Wolf covariance of the within-class residuals.

    Read in float64 blocks of :data:`CHUNK_ROWS` rows: no (N, D) float64 copy is made.

    Args:
        features: (N, D) training means mu.
        labels: (N,) class ids in [0, C).
        num_classes: C; classes without a training row get no Gaussian (their prior is 0).

    Returns:
        The fitted :class:`ClassGaussians`.
    """
    y = torch.as_tensor(np.asarray(labels)).long()
    shape = tuple(features.shape)
    if len(shape) != 2 or tuple(y.shape) != (shape[0],):
        raise ValueError(f"features must be (N, D) and labels (N,), got {shape}, {tuple(y.shape)}")
    return fit_class_gaussians_streamed(
        lambda: (({"x": block}, y[rows]) for rows, block in row_chunks(features)), num_classes
    )["x"]


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
