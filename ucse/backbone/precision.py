"""Which numeric precision a computation really runs in: ``auto`` resolved against the device."""

from __future__ import annotations

import functools

import torch

from ucse.config import Precision


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX), as oneDNN's bf16 kernels need.

    Without it torch emulates bf16 on CPU: measured 6x *slower* than fp32 for MiniLM-L6 on an AVX2-only
    AMD EPYC (16.5 vs 2.7 ms per text), so ``auto`` must not pick bf16 there.
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())  # noqa: SLF001 - what torch's CPU autocast checks
    except (AttributeError, RuntimeError):
        return False


def effective_precision(precision: Precision | str, device: torch.device | str) -> Precision:
    """``fp32`` or ``bf16`` for ``precision`` on ``device``; ``auto`` picks bf16 only where it is native.

    Args:
        precision: the configured precision (``auto``, ``bf16`` or ``fp32``).
        device: where the computation runs.

    Returns:
        ``Precision.bf16`` or ``Precision.fp32``. An explicit choice is kept as asked.
    """
    precision = Precision(precision)
    if precision is not Precision.auto:
        return precision
    device = torch.device(device)
    if device.type == "cuda":
        return Precision.bf16 if torch.cuda.is_bf16_supported() else Precision.fp32
    return Precision.bf16 if device.type == "cpu" and cpu_has_native_bf16() else Precision.fp32
