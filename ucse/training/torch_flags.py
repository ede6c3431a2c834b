"""The process-wide torch flags a training run sets, given back to the caller when the run ends."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.utils.deterministic

CUBLAS_ENV = "CUBLAS_WORKSPACE_CONFIG"


@contextmanager
def run_torch_flags() -> Iterator[None]:
    """Run a training run under Lightning's torch flags, and restore the caller's at the end.

    Lightning's ``Trainer(deterministic=...)`` sets process-wide state and never restores it:
    ``torch.use_deterministic_algorithms`` (on, or off), ``torch.backends.cudnn.benchmark`` and the
    ``CUBLAS_WORKSPACE_CONFIG`` variable. A notebook that fits a ``UcseClassifier`` would carry them into
    whatever it runs next (an op without a deterministic implementation raising on CUDA, every
    ``torch.empty`` filled with NaN), so they are put back as they were, also when the run fails.

    Inside, ``torch.utils.deterministic.fill_uninitialized_memory`` is off. With deterministic algorithms
    on, torch fills the result of every ``torch.empty`` (and ``empty_like``, ``empty_strided``) with NaN, so
    that a program reading memory before writing it still repeats itself; its documentation says to turn
    the fill off for a program that does not, which keeps it deterministic. No ucse op reads unwritten memory
    (the repeat-run and resume tests compare heads to the byte), and every intermediate tensor of a training
    step is a fresh allocation: the default Banking77 run took 76.3 s with the fill and 74.6 s without, the
    same head to the byte (docs/RESULTS.md section 5).
    """
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.benchmark,
        torch.utils.deterministic.fill_uninitialized_memory,
        os.environ.get(CUBLAS_ENV),
    )
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        algorithms, warn_only, benchmark, fill, cublas = saved
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        torch.backends.cudnn.benchmark = benchmark
        torch.utils.deterministic.fill_uninitialized_memory = fill
        if cublas is None:
            os.environ.pop(CUBLAS_ENV, None)
        else:
            os.environ[CUBLAS_ENV] = cublas
