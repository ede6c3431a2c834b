"""Computational cost of a head on top of its backbone (paper Table 5): parameters, latency, throughput."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters of ``module``.

    Shared (tied) parameters are counted once, as ``module.parameters()`` deduplicates them.

    Args:
        module: any module.
        trainable_only: count only parameters with ``requires_grad`` (the head, for a frozen backbone).

    Returns:
        The parameter count.
    """
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def batch_size_of(batch: Any) -> int:
    """Number of samples in a batch: leading dim of a tensor, of a mapping's first tensor, or ``len``."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, Mapping):
        for v in batch.values():
            if isinstance(v, torch.Tensor):
                return int(v.shape[0])
    return len(batch)


def _default_sync() -> None:
    # CUDA kernels run asynchronously; without a sync the timer would only measure kernel launches.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def measure_throughput(
    fn_backbone: Callable[[Any], Any],
    fn_full: Callable[[Any], Any],
    batches: Iterable[Any],
    warmup: int = 2,
    repeats: int = 5,
    *,
    synchronize: Callable[[], None] = _default_sync,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Time the backbone alone and backbone + head on the same batches, interleaved in one run.

    Each repeat times one full pass over all batches for each workload; the order of the two passes
    alternates between repeats so slow drifts (thermal throttling, other processes) hit both equally.
    Both the best-of (least disturbed, the usual benchmark figure) and the median are reported.
    Everything runs under ``torch.inference_mode``.

    Args:
        fn_backbone: runs the backbone on one batch.
        fn_full: runs backbone + head on one batch.
        batches: the batches; materialised once so both workloads see identical inputs.
        warmup: untimed passes of each workload before timing (allocator, kernel autotuning, caches).
        repeats: timed passes of each workload.
        synchronize: called before reading the clock; defaults to a CUDA sync when CUDA is in use.
        clock: monotonic clock in seconds (injectable for tests).

    Returns:
        Flat dict: ``n_samples``, ``repeats``; for ``backbone`` and ``full``: ``{name}_latency_ms`` /
        ``{name}_throughput`` (best-of; latency per sample in ms, samples/s) and the ``_median``
        variants; ``overhead_ratio`` (full / backbone time, best-of), ``overhead_ratio_median`` and
        ``latency_overhead_ms`` (per-sample difference, best-of).
    """
    batches = list(batches)
    if not batches or repeats < 1 or warmup < 0:
        raise ValueError("need at least one batch, repeats >= 1 and warmup >= 0")
    n_samples = sum(batch_size_of(b) for b in batches)
    fns = {"backbone": fn_backbone, "full": fn_full}
    times: dict[str, list[float]] = {"backbone": [], "full": []}

    def one_pass(fn: Callable[[Any], Any]) -> float:
        synchronize()
        start = clock()
        for b in batches:
            fn(b)
        synchronize()
        return clock() - start

    with torch.inference_mode():
        for _ in range(warmup):
            for fn in fns.values():
                one_pass(fn)
        for r in range(repeats):
            order = ("backbone", "full") if r % 2 == 0 else ("full", "backbone")
            for name in order:
                times[name].append(one_pass(fns[name]))

    out: dict[str, float] = {"n_samples": float(n_samples), "repeats": float(repeats)}
    for name, ts in times.items():
        for suffix, t in (("", min(ts)), ("_median", statistics.median(ts))):
            out[f"{name}_latency_ms{suffix}"] = 1000.0 * t / n_samples
            out[f"{name}_throughput{suffix}"] = n_samples / t if t > 0 else float("inf")
    out["overhead_ratio"] = out["full_latency_ms"] / out["backbone_latency_ms"]
    out["overhead_ratio_median"] = out["full_latency_ms_median"] / out["backbone_latency_ms_median"]
    out["latency_overhead_ms"] = out["full_latency_ms"] - out["backbone_latency_ms"]
    return out
