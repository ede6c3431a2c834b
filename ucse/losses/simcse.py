"""Unsupervised SimCSE loss (Gao et al. 2021), the paper's Table 4 "SimCSE" comparison."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ucse.losses.precision import at_least_fp32


def simcse(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """InfoNCE between two dropout views: ``z2[i]`` is the positive of ``z1[i]``, other ``z2[j]`` negatives.

    ``l_i = -log( exp(cos(z1_i, z2_i) / tau) / sum_{j=1..n} exp(cos(z1_i, z2_j) / tau) )``, averaged over i
    (Gao et al. 2021, Eq. 4). The two views come from two forward passes of the head with dropout active
    (and, with UCL, two reparameterisation samples).

    Args:
        z1: (B, D) first view.
        z2: (B, D) second view of the same sentences.
        temperature: tau > 0 (SimCSE default 0.05).

    Returns:
        Scalar loss (fp32).
    """
    if z1.shape != z2.shape:
        raise ValueError(f"z1 {tuple(z1.shape)} and z2 {tuple(z2.shape)} must both be (B, D) for one batch.")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature} (SimCSE uses 0.05).")
    sim = (
        F.normalize(at_least_fp32(z1), dim=1) @ F.normalize(at_least_fp32(z2), dim=1).T / temperature
    )  # (B, B)
    return F.cross_entropy(sim, torch.arange(len(z1), device=z1.device))
