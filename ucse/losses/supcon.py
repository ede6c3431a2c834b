"""Supervised contrastive loss (Khosla et al. 2020), the paper's Table 4 "SupCon" comparison."""

from __future__ import annotations

import torch

from ucse.losses.pairwise import cosine_logits_and_positives


def supcon(z: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """SupCon ``L_out`` (Khosla et al. 2020, Eq. 2) on L2-normalised z, one view per sample.

    ``l_i = -1/|P(i)| sum_{p in P(i)} log( exp(s_ip) / sum_{a != i} exp(s_ia) )`` with ``s = z z^T / tau``,
    ``P(i)`` the other samples with label ``y_i``. The log-probability is averaged *outside* the log over
    positives, and the denominator excludes the anchor itself, the two differences from LCL (Eq. 3).
    Anchors without positives are excluded from the mean over anchors; 0 (with grad) if there are none.

    Args:
        z: (B, D) embeddings.
        labels: (B,) integer labels.
        temperature: tau > 0 (Khosla et al. use 0.07; ``loss.temperature`` in runs).

    Returns:
        Scalar loss (fp32).
    """
    sim, pos, eye = cosine_logits_and_positives(z, labels, temperature)  # (B, B) each
    n_pos = pos.sum(dim=1)  # (B,)
    has_pos = n_pos > 0  # (B,)
    # No host read (see label_wise_contrastive): an anchor without positives keeps itself in its denominator
    # (a finite row even at B = 1) and is left out of the mean.
    den_mask = eye & has_pos[:, None]  # (B, B)
    log_prob = sim - torch.logsumexp(sim.masked_fill(den_mask, float("-inf")), dim=1, keepdim=True)  # (B, B)
    mean_pos = log_prob.masked_fill(~pos, 0.0).sum(dim=1) / n_pos.clamp(min=1)  # (B,), 0 without positives
    return -mean_pos.sum() / has_pos.sum().clamp(min=1)
