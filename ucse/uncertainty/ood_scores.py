"""Out-of-scope scores of a text from its features and its logits; higher = more likely out of scope.

The features are whatever (N, D) vectors the caller scores: the out-of-scope flag passes the frozen
backbone's pooled unit vectors (``EncodedBatch.pooled``).

The families the OOD literature finds strongest for a classifier on fixed features:

- ``mahalanobis``: min over classes of the Mahalanobis distance with one shared covariance (Lee et al. 2018);
  lives in :mod:`ucse.uncertainty.density`.
- ``class_mahalanobis``: ``-log p(x)`` under class Gaussians with one covariance *per class* (Gaussian
  discriminant analysis as in DDU, Mukhoti et al. 2023).
- ``relative_mahalanobis``: the shared-covariance distance minus the distance to one background Gaussian of
  all training features (Ren et al. 2021): it removes the directions every text varies in, which is what
  near-OOD texts (same domain, new intent) share with in-scope ones.
- ``knn``: distance to the k-th nearest training feature after L2 normalisation (Sun et al. 2022).
- ``joint_knn``: the same on the head's mu and the pooled vector side by side
  (:func:`ucse.training.neighbours.joint_features`).
- ``energy``: ``-logsumexp(logits)`` (Liu et al. 2020).

Covariances are Ledoit-Wolf shrunk (scikit-learn): with D in the hundreds and ~100 texts per class an
unshrunk per-class covariance is singular. All functions take torch tensors or numpy arrays and return
float64 torch tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ucse.training.neighbours import neighbour_distances
from ucse.uncertainty.density import (
    ClassGaussians,
    fit_class_gaussians,
    ledoit_wolf,
    mahalanobis,
)
from ucse.uncertainty.scores import Array, as_f64


def energy(logits: Array) -> torch.Tensor:
    """Free energy ``-logsumexp_c l_c`` at temperature 1 (Liu et al. 2020).

    Args:
        logits: (N, C) raw logits.

    Returns:
        (N,) unbounded; lower (more negative) = more in scope.
    """
    return -torch.logsumexp(as_f64(logits), dim=1)


@dataclass
class Background:
    """One Gaussian ``N(m_0, Sigma_0)`` of all training features (the relative Mahalanobis reference).

    Attributes:
        mean: (D,) m_0.
        precision: (D, D) Sigma_0^-1.
    """

    mean: torch.Tensor
    precision: torch.Tensor


def fit_background(features: Array) -> Background:
    """Mean and Ledoit-Wolf precision of all (N, D) training features, classes ignored."""
    g = fit_class_gaussians(features, np.zeros(len(features), dtype=np.int64), 1)  # one class: all rows
    return Background(g.means[0], g.precision)


def relative_mahalanobis(features: Array, g: ClassGaussians, bg: Background) -> torch.Tensor:
    """``min_c MD_c(x) - MD_0(x)`` (Ren et al. 2021): the class distance beyond the background's.

    Args:
        features: (N, D) features.
        g: shared-covariance class Gaussians.
        bg: the background Gaussian.

    Returns:
        (N,) squared-distance difference, either sign.
    """
    x = as_f64(features)
    d = x - bg.mean
    return mahalanobis(x, g) - ((d @ bg.precision) * d).sum(1)


@dataclass
class ClassCovariances:
    """Class Gaussians ``N(m_c, Sigma_c)``, each with its own (shrunk) covariance.

    Attributes:
        means: (C, D).
        precision: (C, D, D) Sigma_c^-1 (float32: it is C * D^2 numbers, 45 MB at C = 77, D = 384).
        logdet: (C,) log det Sigma_c.
        log_prior: (C,) log class frequencies (-inf for a class without training rows).
    """

    means: torch.Tensor
    precision: torch.Tensor
    logdet: torch.Tensor
    log_prior: torch.Tensor


def fit_class_covariances(features: Array, labels: Array, num_classes: int) -> ClassCovariances:
    """Per-class means and Ledoit-Wolf covariances; a class with < 3 rows borrows the shared covariance.

    Two rows give residuals r and -r, for which Ledoit-Wolf's shrinkage is exactly 0 (scikit-learn agrees):
    a rank-1 covariance whose log det (about -2,400 at D = 64) let that one class decide every text's score
    (held-out AUROC 1.0 -> 0.42 in a test). Rows all alike give no spread at all (log det -inf); such a
    class borrows the shared covariance too.

    Args:
        features: (N, D) training features.
        labels: (N,) class ids in [0, C).
        num_classes: C.
    """
    x, y = as_f64(features), torch.as_tensor(labels).long()
    shared = fit_class_gaussians(x, y, num_classes)  # the means, priors and the fallback covariance
    counts = torch.bincount(y, minlength=num_classes)
    precision, logdet = [], []
    for c in range(num_classes):
        p, ld = (
            ledoit_wolf(x[y == c] - shared.means[c]) if counts[c] >= 3 else (shared.precision, shared.logdet)
        )
        if not math.isfinite(float(ld)):  # no spread: identical rows
            p, ld = shared.precision, shared.logdet
        precision.append(p.to(torch.float32))
        logdet.append(ld)
    return ClassCovariances(
        shared.means, torch.stack(precision), torch.tensor(logdet, dtype=torch.float64), shared.log_prior
    )


def class_neg_log_density(features: Array, cc: ClassCovariances) -> torch.Tensor:
    """``-log sum_c pi_c N(x; m_c, Sigma_c)``, the Gaussian discriminant analysis density (DDU).

    Returns:
        (N,) nats, higher = less typical.
    """
    x = as_f64(features)
    d = x.shape[1]
    cols = []
    for c in range(cc.means.shape[0]):  # one (N, D) x (D, D) product per class: memory stays at (N, D)
        if not math.isfinite(float(cc.log_prior[c])):
            cols.append(torch.full((x.shape[0],), -math.inf, dtype=torch.float64))
            continue
        r = x - cc.means[c]
        md = ((r @ cc.precision[c].to(torch.float64)) * r).sum(1)
        cols.append(cc.log_prior[c] - 0.5 * (d * math.log(2 * math.pi) + cc.logdet[c] + md))
    return -torch.logsumexp(torch.stack(cols, dim=1), dim=1)


def normalise(features: Array) -> torch.Tensor:
    """Rows scaled to unit L2 norm (a zero row stays zero), float32."""
    x = as_f64(features)
    return (x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)).to(torch.float32)


def knn_distance(features: Array, bank: torch.Tensor, k: int, chunk: int = 512) -> torch.Tensor:
    """Euclidean distance from each normalised feature to its k-th nearest row of ``bank`` (Sun et al. 2022).

    Brute force (:func:`ucse.training.neighbours.neighbour_distances`: a bf16 search on CPUs with native bf16,
    float32 elsewhere, the nearest rows' distances recomputed in float64).

    Args:
        features: (N, D) features (normalised here).
        bank: (M, D) normalised training features.
        k: which neighbour, 1 <= k <= M.
        chunk: query rows per distance block.

    Returns:
        (N,) in [0, 2].
    """
    if not 1 <= k <= bank.shape[0]:
        raise ValueError(f"k={k} needs 1 <= k <= {bank.shape[0]} training rows")
    return neighbour_distances(normalise(features), bank, k, chunk)[:, k - 1]
