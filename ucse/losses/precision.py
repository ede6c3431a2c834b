"""The dtype a loss computes in: half-precision inputs raised to float32, float64 kept."""

from __future__ import annotations

import torch


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 when it is fp16 / bf16 (autocast's outputs), else unchanged.

    ``.float()`` also lowered float64, so a float64 gradient check of the losses failed on float32 rounding.
    """
    return x.to(torch.promote_types(x.dtype, torch.float32))
