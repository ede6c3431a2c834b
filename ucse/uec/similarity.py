"""Uncertainty-aware similarity (paper Sec. 3.3, App. A.2) and exact streamed top-k retrieval.

For independent q ~ N(mu_q, diag var_q) and c ~ N(mu_c, diag var_c), the dot product s = q^T c is moment
matched to N(mu_s, sigma_s^2) (Eq. 5),

    mu_s = mu_q . mu_c,   sigma_s^2 = mu_q^T Sigma_c mu_q + mu_c^T Sigma_q mu_c + tr(Sigma_q Sigma_c),

and scored with the probit correction (Eq. 6, with the beta of App. B.3.4 scaling sigma_s^2)

    s_hat = mu_s / sqrt(1 + (pi / 8) * beta * sigma_s^2).

Eq. 6 is the argument of sigmoid in E[sigmoid(s)] ~= sigmoid(s_hat) (MacKay/Gibbs probit approximation).
Every pairwise quantity is two matrix products; no (Nq, Nc, D) tensor is ever built.
"""

from __future__ import annotations

import math
from enum import Enum

import torch

from ucse.core.gaussian import GaussianEmbeddings


class TopkStrategy(str, Enum):
    """How :func:`topk` evaluates sigma_s^2 (both give the exact probit top-k)."""

    dense = "dense"  # sigma_s^2 for every (query, doc) pair: one extra (Nq, 2D) x (2D, chunk) matmul
    bounded = "bounded"  # s_hat <= mu_s prunes docs; exact sigma_s^2 only for each query's top-2k by mu_s


def check_gaussian(g: GaussianEmbeddings, side: str) -> None:
    """Refuse a Gaussian mutated after construction into NaN/inf means or negative/NaN variances.

    GaussianEmbeddings validates on construction only; its tensors can be changed in place later, and a
    NaN would otherwise flow silently into every score.
    """
    for name, t in (("mean", g.mean), ("var", g.var)):
        if not bool(torch.isfinite(t).all()):
            row = int((~torch.isfinite(t)).any(1).nonzero()[0])
            raise ValueError(f"{side} {name} has a non-finite value in row {row}; fix the producer of it")
    if bool((g.var < 0).any()):
        row = int((g.var < 0).any(1).nonzero()[0])
        raise ValueError(f"{side} var has a negative variance in row {row}; variances must be >= 0")


def _check_pair(q: GaussianEmbeddings, c: GaussianEmbeddings) -> None:
    check_gaussian(q, "query")
    check_gaussian(c, "corpus")
    if q.dim != c.dim:
        raise ValueError(
            f"query ({q.member}) has dim {q.dim} but corpus ({c.member}) has dim {c.dim}; "
            "both Gaussians must live in the same space"
        )


def similarity_moments(
    mu_q: torch.Tensor, var_q: torch.Tensor, mu_c: torch.Tensor, var_c: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance of q^T c for diagonal Gaussians (paper Eq. 5).

    Args:
        mu_q: (Nq, D) query means.
        var_q: (Nq, D) query variances.
        mu_c: (Nc, D) candidate means.
        var_c: (Nc, D) candidate variances.

    Returns:
        mu_s (Nq, Nc) and sigma_s^2 (Nq, Nc).
    """
    mu_s = mu_q @ mu_c.T  # (Nq, Nc)
    # sum_d mu_q^2 var_c + var_q mu_c^2 + var_q var_c, regrouped into two matmuls.
    var_s = (mu_q**2) @ var_c.T + var_q @ (mu_c**2 + var_c).T  # (Nq, Nc)
    return mu_s, var_s


def probit_score(mu_s: torch.Tensor, var_s: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """s_hat = mu_s / sqrt(1 + pi/8 * beta * sigma_s^2), elementwise."""
    return mu_s * torch.rsqrt(1.0 + (math.pi / 8.0) * beta * var_s)


def probit_similarity(q: GaussianEmbeddings, c: GaussianEmbeddings, beta: float = 1.0) -> torch.Tensor:
    """UEC similarity matrix (Nq, Nc) between query Gaussians q (Nq, D) and candidates c (Nc, D).

    Means are used as given: normalise both sides first (``GaussianEmbeddings.normalized``) so that
    mu_s is the cosine, as the paper does.
    """
    _check_pair(q, c)
    if beta < 0:
        raise ValueError(f"beta scales a variance and must be >= 0, got {beta}")
    return probit_score(*similarity_moments(q.mean, q.var, c.mean, c.var), beta=beta)


def _merge(
    best_s: torch.Tensor, best_i: torch.Tensor, scores: torch.Tensor, idx: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge candidate scores/indices (Nq, C) into the running top-k (Nq, k') values / indices."""
    cand_s = torch.cat([best_s, scores], dim=1)  # (Nq, k' + C)
    cand_i = torch.cat([best_i, idx], dim=1)
    top_s, pos = cand_s.topk(min(k, cand_s.shape[1]), dim=1)
    return top_s, cand_i.gather(1, pos)


def _running_topk(
    best_s: torch.Tensor, best_i: torch.Tensor, scores: torch.Tensor, offset: int, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge a whole chunk's scores (Nq, C), corpus rows offset.., into the running top-k."""
    # Reduce the chunk to its own top-k first: concatenating the full (Nq, C) block is far slower.
    chunk_s, chunk_i = scores.topk(min(k, scores.shape[1]), dim=1)
    return _merge(best_s, best_i, chunk_s, chunk_i + offset, k)


def _dense_scores(
    q_left: torch.Tensor, mu_s: torch.Tensor, mu_c: torch.Tensor, var_c: torch.Tensor, beta: float
) -> torch.Tensor:
    """Probit scores (Nq, C); sigma_s^2 is one fused matmul [mu_q^2, var_q] @ [var_c, mu_c^2 + var_c]^T."""
    var_s = q_left @ torch.cat([var_c, mu_c**2 + var_c], dim=1).T  # (Nq, C)
    return probit_score(mu_s, var_s, beta)


def _bounded_merge(
    best_s: torch.Tensor,
    best_i: torch.Tensor,
    mu_s: torch.Tensor,
    query: GaussianEmbeddings,
    q_left: torch.Tensor,
    mu_c: torch.Tensor,
    var_c: torch.Tensor,
    offset: int,
    k: int,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact merge of one chunk, scoring sigma_s^2 only for each query's top-m docs by mu_s.

    Since sigma_s^2 >= 0, s_hat = mu_s / sqrt(1 + a sigma_s^2) <= mu_s when mu_s >= 0, and s_hat < 0 when
    mu_s < 0. Every doc outside a query's top-m by mu_s has mu_s <= nxt (the (m+1)-th mu_s), so once
    nxt < the k-th exact score (or nxt < 0 <= k-th score) none of them can enter the top-k. Queries for
    which the bound does not certify this (large variances) are redone densely from the previous top-k.
    """
    m = 2 * k
    vals, idx = mu_s.topk(m + 1, dim=1)  # (Nq, m + 1)
    cand = idx[:, :m]
    vc, mc = var_c[cand], mu_c[cand]  # (Nq, m, D): m is small, this is the only gather
    var_s = ((query.mean**2)[:, None, :] * vc + query.var[:, None, :] * (mc**2 + vc)).sum(-1)  # (Nq, m)
    new_s, new_i = _merge(best_s, best_i, probit_score(vals[:, :m], var_s, beta), cand + offset, k)
    kth, nxt = new_s[:, -1], vals[:, m]
    # Relative slack so float32 round-off can never drop a true top-k doc.
    certified = torch.where(nxt >= 0, nxt < kth - 1e-6 * kth.abs() - 1e-9, kth >= 0)  # (Nq,)
    if not bool(certified.all()):
        rows = (~certified).nonzero(as_tuple=True)[0]
        scores = _dense_scores(q_left[rows], mu_s[rows], mu_c, var_c, beta)
        new_s[rows], new_i[rows] = _running_topk(best_s[rows], best_i[rows], scores, offset, k)
    return new_s, new_i


@torch.no_grad()
def topk(
    query: GaussianEmbeddings,
    corpus: GaussianEmbeddings,
    k: int = 10,
    chunk: int = 16384,
    beta: float = 1.0,
    strategy: TopkStrategy | str = TopkStrategy.bounded,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of the probit similarity, streaming the corpus in chunks.

    Args:
        query: (Nq, D) query Gaussians.
        corpus: (Nc, D) document Gaussians.
        k: results per query.
        chunk: documents scored per step; peak extra memory is O(Nq * chunk).
        beta: variance scale of Eq. 6.
        strategy: ``"bounded"`` (prune with s_hat <= mu_s, exact; queries the bound cannot certify are
            rescored densely) or ``"dense"``.

    Returns:
        scores (Nq, k) descending and corpus indices (Nq, k) int64.
    """
    _check_pair(query, corpus)
    try:
        strategy = TopkStrategy(strategy)
    except ValueError:
        raise ValueError(
            f"strategy={strategy!r} invalid; choose one of {[s.value for s in TopkStrategy]}"
        ) from None
    if not 1 <= k <= corpus.n:
        raise ValueError(f"k={k} must be in [1, {corpus.n}] (corpus size)")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    nq, dev = query.n, query.mean.device  # on a GPU the running top-k stays on it
    best_s = torch.full((nq, 0), -math.inf, device=dev)
    best_i = torch.zeros((nq, 0), dtype=torch.long, device=dev)
    q_left = torch.cat([query.mean**2, query.var], dim=1)  # (Nq, 2D): one fused matmul for sigma_s^2
    for start in range(0, corpus.n, chunk):
        mu_c, var_c = corpus.mean[start : start + chunk], corpus.var[start : start + chunk]
        mu_s = query.mean @ mu_c.T  # (Nq, C)
        if strategy is TopkStrategy.bounded and mu_s.shape[1] > 2 * k:
            best_s, best_i = _bounded_merge(best_s, best_i, mu_s, query, q_left, mu_c, var_c, start, k, beta)
        else:
            scores = _dense_scores(q_left, mu_s, mu_c, var_c, beta)
            best_s, best_i = _running_topk(best_s, best_i, scores, start, k)
    return best_s, best_i


@torch.no_grad()
def cosine_topk(
    query: torch.Tensor, corpus: torch.Tensor, k: int = 10, chunk: int = 16384
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of plain dot products of (pre-normalised) means, streamed like :func:`topk`.

    Args:
        query: (Nq, D) unit-norm query vectors.
        corpus: (Nc, D) unit-norm document vectors.
        k: results per query.
        chunk: documents scored per step.

    Returns:
        scores (Nq, k) and indices (Nq, k).
    """
    nq, dev = query.shape[0], query.device
    best_s = torch.full((nq, 0), -math.inf, device=dev)
    best_i = torch.zeros((nq, 0), dtype=torch.long, device=dev)
    for start in range(0, corpus.shape[0], chunk):
        scores = query @ corpus[start : start + chunk].T  # (Nq, C)
        best_s, best_i = _running_topk(best_s, best_i, scores, start, k)
    return best_s, best_i
