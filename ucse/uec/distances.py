"""Closed-form distributional (dis)similarities between diagonal Gaussians (paper App. B.2).

Every function maps query Gaussians (Nq, D) and candidates (Nc, D) to an (Nq, Nc) *similarity*: higher is
more similar. Distances are negated (``-d``), so all metrics rank the same way as :func:`probit_similarity`.
Pairwise sums over D are regrouped into matrix products wherever the summand factorises, so no
(Nq, Nc, D) tensor is built; the Cauchy-Schwarz divergence has a log(var_q + var_c) term that does not
factorise and is evaluated in candidate blocks of bounded size instead.
"""

from __future__ import annotations

from enum import Enum

import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.similarity import check_gaussian, probit_similarity


class Metric(str, Enum):
    """Similarity / distance choices of App. B.2 (and the UEC probit score)."""

    cosine = "cosine"  # cosine of the means (deterministic baseline)
    kl = "kl"  # -KL(q || c), Eq. 24 with N1 = query, N2 = candidate
    jeffreys = "jeffreys"  # -(KL(q||c) + KL(c||q)), App. A.3.4 Eq. 19
    w1 = "w1"  # -W1 approximation of Eq. 25 (not the exact W1; see w1_similarity)
    w2 = "w2"  # -W2^2, exact for diagonal Gaussians (Eq. 26)
    csd = "csd"  # -closed-form sampled distance of PCME++ (Eq. 27)
    cauchy_schwarz = "cauchy_schwarz"  # -Cauchy-Schwarz divergence, exact closed form
    probit = "probit"  # UEC s_hat (Eq. 6)


def _sq_euclidean(mu_q: torch.Tensor, mu_c: torch.Tensor) -> torch.Tensor:
    """||mu_q - mu_c||^2 as (Nq, Nc), clamped at 0 against cancellation."""
    return ((mu_q**2).sum(1)[:, None] + (mu_c**2).sum(1)[None, :] - 2 * mu_q @ mu_c.T).clamp_min(0)


def _positive(var: torch.Tensor, side: str, metric: str) -> None:
    if bool((var < 0).any()):
        row = int((var < 0).any(1).nonzero()[0])
        raise ValueError(f"{metric}: {side} row {row} has a negative variance; variances must be >= 0")
    if bool((var <= 0).any()):
        row = int((var <= 0).any(1).nonzero()[0])
        raise ValueError(
            f"{metric} needs strictly positive variances but {side} row {row} has a zero variance; "
            "add a small floor (e.g. var.clamp_min(1e-8)) or use w2 / csd / probit, which allow 0"
        )


def cosine_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) cosine of the means."""
    mq = q.mean / q.mean.norm(dim=1, keepdim=True).clamp_min(1e-12)
    mc = c.mean / c.mean.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return mq @ mc.T


def kl_divergence(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) KL(N_q || N_c) for diagonal Gaussians (Eq. 24), a distance (>= 0).

    KL = 1/2 [sum var_q/var_c + sum (mu_c - mu_q)^2/var_c - D + sum log var_c - sum log var_q].
    """
    _positive(q.var, "query", "kl"), _positive(c.var, "candidate", "kl")
    mq, vq, mc, vc = q.mean.double(), q.var.double(), c.mean.double(), c.var.double()
    prec_c = 1.0 / vc  # (Nc, D)
    trace_term = (vq + mq**2) @ prec_c.T  # (Nq, Nc): sum var_q/var_c + sum mu_q^2/var_c
    maha = trace_term - 2 * mq @ (mc * prec_c).T + (mc**2 * prec_c).sum(1)[None, :]
    logdet = vc.log().sum(1)[None, :] - vq.log().sum(1)[:, None]
    return (0.5 * (maha - q.dim + logdet)).float()


def kl_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) -KL(q || c)."""
    return -kl_divergence(q, c)


def jeffreys_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) -(KL(q||c) + KL(c||q)), the symmetrised KL of Eq. 19."""
    return -(kl_divergence(q, c) + kl_divergence(c, q).T)


def w1_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) minus the paper's 1-Wasserstein *approximation* (Eq. 25).

    W1 ~= ||mu_q - mu_c|| + |tr sqrt(Sigma_q) - tr sqrt(Sigma_c)|. This is not the exact W1: even in 1-D
    the exact value is E|dmu + dsigma Z| (Z standard normal), e.g. sqrt(2/pi)|sigma_q - sigma_c| when the
    means coincide; Eq. 25 is exact only when the scale term vanishes and upper-bounds W1 in 1-D.
    """
    mean_term = _sq_euclidean(q.mean.double(), c.mean.double()).sqrt()
    scale_term = (q.var.double().sqrt().sum(1)[:, None] - c.var.double().sqrt().sum(1)[None, :]).abs()
    return -(mean_term + scale_term).float()


def w2_squared(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) squared 2-Wasserstein distance ||mu_q - mu_c||^2 + ||sqrt(var_q) - sqrt(var_c)||^2."""
    sq, sc = q.var.double().sqrt(), c.var.double().sqrt()
    scale = ((sq**2).sum(1)[:, None] + (sc**2).sum(1)[None, :] - 2 * sq @ sc.T).clamp_min(0)
    return (_sq_euclidean(q.mean.double(), c.mean.double()) + scale).float()


def w2_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) -W2^2 (squared, the form Theorem 1 relates to s_hat)."""
    return -w2_squared(q, c)


def csd_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) minus PCME++'s closed-form sampled distance ||mu_q - mu_c||^2 + ||var_q + var_c||_1 (Eq. 27).

    CSD = E||z_q - z_c||^2 for independent samples; it is what the paper's "CSD" abbreviates.
    """
    spread = q.var.double().sum(1)[:, None] + c.var.double().sum(1)[None, :]  # variances are >= 0
    return -(_sq_euclidean(q.mean.double(), c.mean.double()) + spread).float()


def cauchy_schwarz_divergence(q: GaussianEmbeddings, c: GaussianEmbeddings, block: int = 256) -> torch.Tensor:
    """(Nq, Nc) Cauchy-Schwarz divergence -log(int pq / sqrt(int p^2 int q^2)) of diagonal Gaussians.

    Closed form: 1/2 sum_d [log((vq + vc) / (2 sqrt(vq vc))) + (mu_q - mu_c)^2 / (vq + vc)] >= 0.
    Evaluated over candidate blocks so memory is O(Nq * block * D).
    """
    _positive(q.var, "query", "cauchy_schwarz"), _positive(c.var, "candidate", "cauchy_schwarz")
    mq, vq, mc, vc = q.mean.double(), q.var.double(), c.mean.double(), c.var.double()
    half_logs = 0.25 * (vq.log().sum(1)[:, None] + vc.log().sum(1)[None, :])  # (Nq, Nc)
    out = torch.empty(q.n, c.n, dtype=torch.float64)
    for start in range(0, c.n, block):
        vs = vq[:, None, :] + vc[None, start : start + block, :]  # (Nq, b, D)
        diff2 = (mq[:, None, :] - mc[None, start : start + block, :]) ** 2
        out[:, start : start + block] = 0.5 * ((vs / 2).log() + diff2 / vs).sum(-1)
    return (out - half_logs).float()


def cauchy_schwarz_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings) -> torch.Tensor:
    """(Nq, Nc) -D_CS(q, c)."""
    return -cauchy_schwarz_divergence(q, c)


def pairwise_similarity(
    q: GaussianEmbeddings, c: GaussianEmbeddings, metric: Metric | str, beta: float = 1.0
) -> torch.Tensor:
    """(Nq, Nc) similarity under ``metric`` (higher = closer for every metric).

    Raises:
        ValueError: on an unknown metric or mismatched dimensions.
    """
    try:
        metric = Metric(metric)
    except ValueError:
        raise ValueError(f"metric={metric!r} invalid; choose one of {[m.value for m in Metric]}") from None
    if q.dim != c.dim:
        raise ValueError(f"query dim {q.dim} != candidate dim {c.dim}; both must share D")
    check_gaussian(q, "query")
    check_gaussian(c, "candidate")
    if metric is Metric.probit:
        return probit_similarity(q, c, beta=beta)
    table = {
        Metric.cosine: cosine_similarity,
        Metric.kl: kl_similarity,
        Metric.jeffreys: jeffreys_similarity,
        Metric.w1: w1_similarity,
        Metric.w2: w2_similarity,
        Metric.csd: csd_similarity,
        Metric.cauchy_schwarz: cauchy_schwarz_similarity,
    }
    return table[metric](q, c)
