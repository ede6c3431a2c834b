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
def run_head(
    head: Head,
    states: TokenStates,
    batch_size: int = 256,
    device: torch.device | str | None = None,
    bf16: bool = False,
) -> Outputs:
    """Run ``head`` (eval mode) over every row of ``states`` in order, as predict would run it.

    Args:
        head: the head; it runs on ``device`` and is put back where it was.
        states: the rows' token states.
        batch_size: rows per forward.
        device: where to run (default: the CPU).
        bf16: under bf16 autocast, as predict runs a head wherever its backbone runs bf16 (a training run's
            held-out outputs then carry predict's rounding, and the TextCNN runs at its bf16 speed).

    Returns:
        float32 outputs on the host.
    """
    device = torch.device(device or "cpu")
    home = next(head.parameters()).device
    head = head.eval().to(device)
    means, vars_, logits = [], [], []
    try:
        for start in range(0, len(states), batch_size):
            rows = list(range(start, min(start + batch_size, len(states))))
            hidden, mask = states.batch(rows)  # (B, T, H), (B, T)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = head(hidden.to(device).float(), mask.to(device))
            means.append(out.mean.float().cpu().numpy())
            logits.append(out.logits.float().cpu().numpy())
            if out.var is not None:
                vars_.append(out.var.float().cpu().numpy())
    finally:
        head.to(home)
    return Outputs(np.concatenate(means), np.concatenate(vars_) if vars_ else None, np.concatenate(logits))
