"""Diagonal curvature of the in-batch InfoNCE likelihood of an affine map y = W phi + b (by hand).

In a batch of B positive pairs (a_i, b_i), query i must pick passage i among the B passages:

    L_ij = sim(W phi_a_i + b, W phi_b_j + b) / tau,      loss = sum_i CE(softmax(L_i), i).

Known positives other than the diagonal (``same[i, j]``: pair j's passage is also relevant to query i,
e.g. a query's second relevant document or a same-label sentence) are masked out of the negatives:
their logits are -inf, so they carry no probability, no gradient and no curvature.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812
from torch.func import grad, vmap

from ucse.uec.similarity import similarity_moments


def _pair_logit(a: torch.Tensor, b: torch.Tensor, cosine: bool, temperature: float) -> torch.Tensor:
    """Scalar logit sim(a, b) / tau of one (query, passage) pair of (D,) embeddings."""
    if cosine:
        return (a @ b) / (a.norm() * b.norm() * temperature)
    return (a @ b) / temperature


def contrastive_logits(
    ya: torch.Tensor, yb: torch.Tensor, cosine: bool, temperature: float, same: torch.Tensor | None = None
) -> torch.Tensor:
    """In-batch logits (B, B) between ya (B, D) and yb (B, D); masked known positives are -inf.

    Args:
        ya: (B, D) query embeddings.
        yb: (B, D) passage embeddings.
        cosine: cosine (else dot) similarity.
        temperature: tau.
        same: (B, B) bool, True where passage j is a known positive of query i (diagonal ignored).
    """
    if cosine:
        ya, yb = F.normalize(ya, dim=-1), F.normalize(yb, dim=-1)
    logits = ya @ yb.T / temperature
    if same is not None:
        off = same & ~torch.eye(len(ya), dtype=torch.bool, device=same.device)
        logits = logits.masked_fill(off, float("-inf"))
    return logits


def batch_loss(
    pa: torch.Tensor,
    pb: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    cosine: bool,
    temperature: float,
    same: torch.Tensor | None = None,
) -> torch.Tensor:
    """Summed InfoNCE of one batch: pa, pb (B, F) features, weight (D, F), bias (D,)."""
    logits = contrastive_logits(pa @ weight.T + bias, pb @ weight.T + bias, cosine, temperature, same)
    return F.cross_entropy(logits, torch.arange(len(pa), device=pa.device), reduction="sum")


def batch_curvature(
    pa: torch.Tensor,
    pb: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    cosine: bool,
    temperature: float,
    empirical_fisher: bool,
    same: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Loss and diagonal curvature (W part (D, F), b part (D,)) of one batch of B pairs.

    GGN: diag of J^T (diag p - p p^T) J per query; EF: squared per-query gradients.
    """
    ya, yb = pa @ weight.T + bias, pb @ weight.T + bias  # (B, D)
    logits = contrastive_logits(ya, yb, cosine, temperature, same)  # (B, B)
    target = torch.arange(len(pa))
    loss = F.cross_entropy(logits, target, reduction="sum")
    # u_ij = dL_ij/dya_i, v_ij = dL_ij/dyb_j: logit ij touches theta only through ya_i and yb_j, so
    # dL_ij/dW_df = u_ijd pa_if + v_ijd pb_jf and dL_ij/db_d = u_ijd + v_ijd (chain rule, no loops).
    pair_grad = grad(_pair_logit, argnums=(0, 1))
    u, v = vmap(vmap(pair_grad, in_dims=(None, 0, None, None)), in_dims=(0, None, None, None))(
        ya, yb, cosine, temperature
    )  # (B, B, D) each
    probs = logits.softmax(dim=1)  # (B, B); exactly 0 at masked positives

    def weighted_sum(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """sum_j w_ij J_ij for every query i: W part (B, D, F), b part (B, D)."""
        wu, wv = (w[..., None] * u).sum(1), w[..., None] * v  # (B, D), (B, B, D)
        gw = wu[:, :, None] * pa[:, None, :] + torch.einsum("ijd,jf->idf", wv, pb)  # (B, D, F)
        return gw, wu + wv.sum(1)

    if empirical_fisher:
        resid = probs - F.one_hot(target, len(pa)).to(probs.dtype)  # (B, B) dCE_i/dL_ij
        gw, gb = weighted_sum(resid)  # per-query gradients
        return loss, (gw**2).sum(0), (gb**2).sum(0)
    # GGN row i: sum_j p_ij J_ij^2 - (sum_j p_ij J_ij)^2  (diag of J^T (diag p - p p^T) J).
    pu2 = torch.einsum("ij,ijd->id", probs, u**2)  # (B, D)
    puv = (probs[..., None] * u * v).reshape(-1, u.shape[-1])  # (B*B, D)
    outer = (pa[:, None, :] * pb[None, :, :]).reshape(-1, pa.shape[-1])  # (B*B, F) pa_i * pb_j
    pv2 = torch.einsum("ij,ijd->jd", probs, v**2)  # (B, D) summed over queries i
    second = pu2.T @ pa**2 + 2 * puv.T @ outer + pv2.T @ pb**2  # (D, F)
    mw, mb = weighted_sum(probs)
    hb = (probs[..., None] * (u + v) ** 2).sum((0, 1)) - (mb**2).sum(0)  # (D,)
    return loss, second - (mw**2).sum(0), hb


def normalised_moments(mean: torch.Tensor, var: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Linearised moments of u = y / ||y|| for y ~ N(mean, diag var) (rows (N, D)).

    J = (I - u u^T) / ||y||, and diag(J diag(var) J^T)_d = (var_d (1 - 2 u_d^2) + u_d^2 sum_j u_j^2 var_j)
    / ||y||^2: the exact Jacobian map of a diagonal covariance, kept diagonal.
    """
    norm = mean.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # (N, 1)
    unit = mean / norm
    u2 = unit**2
    var_u = (var * (1 - 2 * u2) + u2 * (u2 * var).sum(-1, keepdim=True)) / norm**2
    return unit, var_u.clamp_min(0)


def probit_val_loss(
    va: torch.Tensor,
    vb: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    var_w: torch.Tensor,
    var_b: torch.Tensor,
    cosine: bool,
    temperature: float,
    batch_size: int,
) -> torch.Tensor:
    """Held-out in-batch InfoNCE of probit-corrected logits (Eq. 6 at logit scale) under a diagonal posterior.

    va, vb (M, F) held-out pairs; weight (D, F), bias (D,) the MAP; var_w (D, F), var_b (D,) its variances.
    """
    total = torch.zeros((), dtype=torch.float64)
    for start in range(0, len(va), batch_size):
        moments = []
        for phi in (va[start : start + batch_size], vb[start : start + batch_size]):
            mean, var = phi @ weight.T + bias, phi**2 @ var_w.T + var_b  # (B, D)
            moments.append(normalised_moments(mean, var) if cosine else (mean, var))
        mu_s, var_s = similarity_moments(moments[0][0], moments[0][1], moments[1][0], moments[1][1])
        logits = (mu_s / temperature) / torch.sqrt(1 + math.pi / 8 * var_s / temperature**2)  # (B, B)
        total = total + F.cross_entropy(logits, torch.arange(len(logits)), reduction="sum").double()
    return total
