"""The in-batch setup shared by the supervised contrastive losses: cosine logits and the positive mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ucse.losses.precision import at_least_fp32


def cosine_logits_and_positives(
    z: torch.Tensor, labels: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scaled cosine similarities of a batch and which pairs share a label.

    Args:
        z: (B, D) embeddings (normalised here, in fp32).
        labels: (B,) integer labels.
        temperature: tau > 0.

    Returns:
        ``sim`` (B, B) = z_i . z_j / tau on L2-normalised z; ``pos`` (B, B) bool, same label and i != j;
        ``eye`` (B, B) bool diagonal.

    Raises:
        ValueError: if ``temperature`` is not positive.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature} (the paper's LCL uses 2.0).")
    z = F.normalize(at_least_fp32(z), dim=1)  # (B, D)
    sim = z @ z.T / temperature  # (B, B)
    eye = torch.eye(len(z), dtype=torch.bool, device=z.device)  # (B, B)
    pos = (labels[:, None] == labels[None, :]) & ~eye  # (B, B)
    return sim, pos, eye
