"""Per-dimension standardisation of the frozen token states in front of a head (``head.normalize_states``).

Decoder LLM states are badly conditioned for a head trained by gradient steps: SmolLM2-135M's last-token
states share a large common vector (norm 44 against 6.5 of variation between texts) and a few outlier
dimensions hold 30 % of the variance. Adam's per-weight steps then mostly move the logits of every text
together, and a linear probe or TextCNN stays at the majority class for a short run (docs/RESULTS.md,
section 7), while scikit-learn's LBFGS logistic regression, run to convergence, is unaffected.
Subtracting the training split's per-dimension mean and dividing by its standard deviation fixes the
conditioning. The statistics are buffers of the head, so the saved head applies them at inference too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

_SAMPLE_TEXTS = 4096  # texts read to estimate the statistics (all of them when fewer)
_BATCH = 256


class StateNorm(nn.Module):
    """Fixed (not trained) ``(hidden - mean) / std`` over the hidden dimension, pads left at zero.

    Args:
        hidden_size: H.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(hidden_size))  # (H,)
        self.register_buffer("std", torch.ones(hidden_size))  # (H,)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, H) standardised states; positions with mask 0 stay 0."""
        out = (hidden - self.mean.to(hidden.dtype)) / self.std.to(hidden.dtype)
        return out.masked_fill(~mask.bool().unsqueeze(-1), 0.0)

    @torch.no_grad()
    def fit(self, states: Any, seed: int = 0) -> None:
        """Set mean and std from the real tokens of ``states`` (a ``TokenStates``; up to 4096 texts, seeded).

        Accumulated in float64 so that a large common offset does not cancel the variance away.
        """
        n = len(states)
        idx = np.arange(n)
        if n > _SAMPLE_TEXTS:
            idx = np.sort(np.random.default_rng(seed).choice(n, _SAMPLE_TEXTS, replace=False))
        h = int(states.hidden_size)
        total = torch.zeros(h, dtype=torch.float64)
        total_sq = torch.zeros(h, dtype=torch.float64)
        count = 0
        for start in range(0, len(idx), _BATCH):
            hidden, mask = states.batch(idx[start : start + _BATCH].tolist())  # (B, T, H), (B, T)
            rows = hidden[mask.bool()].to("cpu", torch.float64)  # (R, H) real tokens only
            total += rows.sum(dim=0)
            total_sq += (rows * rows).sum(dim=0)
            count += rows.shape[0]
        mean = total / count
        var = (total_sq / count - mean * mean).clamp_min(0.0)
        self.mean.copy_(mean.to(self.mean.dtype))
        self.std.copy_(var.sqrt().clamp_min(1e-6).to(self.std.dtype))


def _standardise_input(module: nn.Module, args: tuple) -> tuple:
    """Forward pre-hook: replace the head's ``hidden`` argument by its standardised version."""
    hidden, mask, *rest = args
    return (module.state_norm(hidden, mask), mask, *rest)


def attach_state_norm(head: nn.Module, hidden_size: int) -> nn.Module:
    """Give ``head`` a ``state_norm`` (identity until fitted) applied to ``hidden`` before every forward."""
    head.state_norm = StateNorm(hidden_size)
    head.register_forward_pre_hook(_standardise_input)
    return head
