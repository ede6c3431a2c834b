"""Per-text uncertainty scores from a head's outputs (mean mu, variance sigma^2, logits).

Convention for every score here: **higher means more uncertain**, so one threshold rule ("abstain when the
score is above t") and one ranking (risk-coverage, OOD AUROC) serve them all. Each docstring gives the
score's scale. Inputs are torch tensors or numpy arrays; outputs are float64 torch tensors.

Calibration enters as a per-class affine map of the logits, ``a * logits + b``: temperature scaling is
``a = 1/T, b = 0``, vector scaling a free (a, b) (see ``ucse.uncertainty.calibration``). The predictive
scores push that map through every Monte-Carlo sample, so calibration and sampling compose.
"""

from __future__ import annotations

import math

import numpy as np
import torch

Array = torch.Tensor | np.ndarray


def as_f64(x: Array) -> torch.Tensor:
    """Tensor or array -> float64 CPU tensor (scores are reported, not back-propagated)."""
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return t.cpu().to(torch.float64)


def scores_without_nan(x: Array, what: str) -> torch.Tensor:
    """:func:`as_f64`, refusing NaN (it has no rank: a rank-based metric would put it anywhere); +-inf ranks.

    Raises:
        ValueError: naming ``what``, how many NaN and the first one's index.
    """
    t = as_f64(x)
    nan = torch.isnan(t).reshape(-1)
    if bool(nan.any()):
        first = int(torch.nonzero(nan)[0, 0])
        raise ValueError(
            f"{what} holds {int(nan.sum())} NaN value(s) (the first at index {first}); a NaN has no rank, so "
            "the metric would be meaningless: drop or fix those rows."
        )
    return t


def affine(logits: Array, scale: Array | float = 1.0, bias: Array | float = 0.0) -> torch.Tensor:
    """Calibrated logits ``scale * logits + bias``.

    Args:
        logits: (..., C).
        scale: scalar or (C,).
        bias: scalar or (C,).

    Returns:
        (..., C) float64.
    """
    return as_f64(logits) * as_f64(torch.as_tensor(scale)) + as_f64(torch.as_tensor(bias))


def msp(probs: Array) -> torch.Tensor:
    """``1 - max_c p_c``: one minus the maximum softmax probability (Hendrycks & Gimpel 2017).

    Args:
        probs: (N, C) probabilities.

    Returns:
        (N,) in [0, 1 - 1/C]; 0 = certain.
    """
    return 1.0 - as_f64(probs).max(dim=1).values


def entropy(probs: Array) -> torch.Tensor:
    """Shannon entropy ``-sum_c p_c log p_c`` of each row, in nats.

    Args:
        probs: (..., C) probabilities.

    Returns:
        (...,) in [0, log C]; 0 = one-hot.
    """
    p = as_f64(probs)
    return -(p * torch.log(p.clamp_min(1e-300))).sum(dim=-1)  # 0 log 0 = 0


def sigma(var: Array) -> torch.Tensor:
    """The paper's per-text uncertainty: ``mean_d sqrt(var_d)`` (Sec. 5.8).

    Args:
        var: (N, D) predicted variances.

    Returns:
        (N,) in embedding units, >= 0; under the KL prior N(0, I) it sits near 1.
    """
    v = as_f64(var)
    if v.ndim != 2 or (v < 0).any():
        raise ValueError(f"var must be a non-negative (N, D) array, got shape {tuple(v.shape)}")
    return v.sqrt().mean(dim=1)


def logit_variance(var: Array, weight: Array, scale: Array | float = 1.0) -> torch.Tensor:
    """Variance of each calibrated logit when z ~ N(mu, diag sigma^2) goes through ``Linear(D, C)``.

    ``Var[a_c (W z)_c] = a_c^2 sum_d W_cd^2 sigma_d^2``.

    Args:
        var: (N, D) sigma^2.
        weight: (C, D) classifier weight W.
        scale: scalar or (C,) calibration scale a.

    Returns:
        (N, C) float64.
    """
    w = as_f64(weight)
    return (as_f64(var) @ (w * w).T) * as_f64(torch.as_tensor(scale)) ** 2


def probit_probs(
    logits: Array, var: Array, weight: Array, scale: Array | float = 1.0, bias: Array | float = 0.0
) -> torch.Tensor:
    """Closed-form predictive softmax: ``softmax(l_c / sqrt(1 + pi/8 * Var l_c))`` (MacKay 1992 probit).

    The multiclass extension of the probit approximation of a Gaussian-logit softmax, as used by
    laplace-torch's ``link_approx='probit'``: MacKay's approximation of E[sigmoid] (not exact even for two
    classes: E = 0.7097 against 0.7112 at mean 2, variance 10), extended heuristically to the softmax.

    Args:
        logits: (N, C) logits at mu (``W mu + c``).
        var: (N, D) sigma^2.
        weight: (C, D) classifier weight.
        scale: calibration scale a (scalar or (C,)).
        bias: calibration bias b (scalar or (C,)).

    Returns:
        (N, C) probabilities.
    """
    mean = affine(logits, scale, bias)  # (N, C)
    kappa = 1.0 / torch.sqrt(1.0 + math.pi / 8.0 * logit_variance(var, weight, scale))  # (N, C)
    return torch.softmax(mean * kappa, dim=1)


def sampled_probs(
    logits: Array,
    var: Array,
    weight: Array,
    samples: int,
    seed: int,
    scale: Array | float = 1.0,
    bias: Array | float = 0.0,
    chunk: int = 1024,
) -> torch.Tensor:
    """Softmax of S Monte-Carlo samples ``z = mu + eps_s * sigma`` through the classifier, calibrated.

    The classifier is affine, so the sampled logits are ``logits + (eps_s * sigma) W^T``: mu itself is not
    needed. The S noise vectors eps_s ~ N(0, I_D) come from ``seed`` and are shared by every row, so a text's
    samples (and scores) do not depend on which other texts are in its batch; each row is still an unbiased
    S-sample estimate.

    Args:
        logits: (N, C) logits at mu.
        var: (N, D) sigma^2.
        weight: (C, D) classifier weight.
        samples: S >= 1.
        seed: generator seed.
        scale: calibration scale (scalar or (C,)).
        bias: calibration bias (scalar or (C,)).
        chunk: rows per chunk (memory stays at (S, chunk, C)).

    Returns:
        (S, N, C) probabilities.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    base, std, w = as_f64(logits), as_f64(var).sqrt(), as_f64(weight)
    eps = torch.randn(
        (samples, 1, std.shape[1]), generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
    out = []
    for start in range(0, base.shape[0], chunk):
        sampled = base[start : start + chunk] + (eps * std[start : start + chunk]) @ w.T  # (S, n, C)
        out.append(torch.softmax(affine(sampled, scale, bias), dim=-1))
    return torch.cat(out, dim=1)


def mutual_information(sample_probs: Array) -> torch.Tensor:
    """BALD: ``H[mean_s p_s] - mean_s H[p_s]``, the epistemic part of the predictive entropy.

    Args:
        sample_probs: (S, N, C) per-sample probabilities (:func:`sampled_probs`).

    Returns:
        (N,) in [0, log C] nats; 0 when every sample agrees.
    """
    p = as_f64(sample_probs)
    return (entropy(p.mean(dim=0)) - entropy(p).mean(dim=0)).clamp_min(0.0)
