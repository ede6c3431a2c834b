"""Which numeric precision a computation really runs in: ``auto`` resolved against the device."""

from __future__ import annotations

import functools

import torch

from ucse.config import Precision


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX), as oneDNN's fast bf16 kernels need.

    Without it torch emulates bf16 on CPU: measured 6x *slower* than fp32 for MiniLM-L6 on an AVX2-only
    AMD EPYC (16.5 vs 2.7 ms per text), so ``auto`` must not pick bf16 there. oneDNN's own
    ``_is_mkldnn_bf16_supported`` (what torch's CPU autocast checks) is true on any AVX-512 CPU, those
    without bf16 instructions too (Skylake to Ice Lake: a review measured MiniLM 1.18x slower in bf16 with
    oneDNN capped at AVX512_CORE), so the instruction sets are asked for directly.
    """
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())  # noqa: SLF001
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
        # not emulated: is_bf16_supported() alone is true on a T4 or V100 (compute capability 7.x), without
        # bf16 tensor cores
        native = torch.cuda.is_bf16_supported(including_emulation=False)
        return Precision.bf16 if native else Precision.fp32
    return Precision.bf16 if device.type == "cpu" and cpu_has_native_bf16() else Precision.fp32
