"""A head run over precomputed token states, all rows at once (training-time predictions)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ucse.backbone.states import TokenStates
from ucse.heads.base import Head


@dataclass
class Outputs:
    """Head outputs for N texts, in row order.

    Attributes:
        mean: (N, D) mu.
        var: (N, D) sigma^2, or ``None`` for a deterministic head.
        logits: (N, C) class scores on mu.
    """

    mean: np.ndarray
    var: np.ndarray | None
    logits: np.ndarray


@torch.inference_mode()
def run_head(head: Head, states: TokenStates, batch_size: int = 256) -> Outputs:
    """Run ``head`` (eval mode, fp32, on the CPU) over every row of ``states`` in order."""
    head = head.eval()
    means, vars_, logits = [], [], []
    for start in range(0, len(states), batch_size):
        hidden, mask = states.batch(list(range(start, min(start + batch_size, len(states)))))  # (B, T, H)
        out = head(hidden.float().cpu(), mask.cpu())
        means.append(out.mean.float().numpy())
        logits.append(out.logits.float().numpy())
        if out.var is not None:
            vars_.append(out.var.float().numpy())
    return Outputs(np.concatenate(means), np.concatenate(vars_) if vars_ else None, np.concatenate(logits))
