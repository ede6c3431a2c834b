"""Label-wise contrastive loss on the sampled embeddings (paper Eq. 3)."""

from __future__ import annotations

import torch

from ucse.losses.pairwise import cosine_logits_and_positives


def label_wise_contrastive(z: torch.Tensor, labels: torch.Tensor, temperature: float = 2.0) -> torch.Tensor:
    """``L_LCL`` of Eq. 3, on L2-normalised z.

    For anchor i with ``s_ij = z_i . z_j / tau`` (unit vectors):
    ``l_i = -log( sum_{k in P(i)} exp(s_ik) / sum_{j=1..n} exp(s_ij) )``, where ``P(i)`` are the *other*
    samples with label ``y_i`` (k != i). The denominator follows Eq. 3 literally: it runs over all
    ``j = 1..n`` *including j = i* (unlike SupCon, :func:`ucse.losses.supcon`, which excludes the anchor).
    Both sums are computed with logsumexp.

    Anchors with no positive in the batch (singleton labels) have an undefined term (log 0) and are excluded
    from the mean; the loss is the mean of ``l_i`` over the remaining anchors. If no anchor has a positive
    the result is 0, still attached to the graph so ``backward()`` works.

    Args:
        z: (B, D) embeddings (the reparameterised samples in training).
        labels: (B,) integer labels.
        temperature: tau > 0 (paper: 2.0).

    Returns:
        Scalar loss (fp32).
    """
    sim, pos, _ = cosine_logits_and_positives(z, labels, temperature)  # (B, B) each; pos = P(i)
    has_pos = pos.any(dim=1)  # (B,)
    # No host read (no `if has_pos.any()`, no boolean indexing): on a GPU either one stalls every training
    # step until the device catches up, and breaks a compiled step's graph. An anchor without positives takes
    # its whole row as numerator instead (finite: no inf - inf in backward) and is left out of the mean.
    num_mask = pos | ~has_pos[:, None]  # (B, B)
    log_num = torch.logsumexp(sim.masked_fill(~num_mask, float("-inf")), dim=1)  # (B,)
    log_den = torch.logsumexp(sim, dim=1)  # (B,) j = 1..n, self included
    per_anchor = torch.where(has_pos, log_den - log_num, torch.zeros_like(log_den))  # (B,)
    return per_anchor.sum() / has_pos.sum().clamp(min=1)
