"""The benches' one timing loop: wall time of each call, GPU kernels included."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def call_times(fn: Callable[[], object], repeats: int, warmup: int = 1) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn``, after ``warmup`` untimed calls.

    Each call is timed to completion: on a CUDA machine the device is synchronised after it (kernels are
    asynchronous). The warm-up pays the allocator, thread pools, page faults and kernel selection.
    """
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return times
