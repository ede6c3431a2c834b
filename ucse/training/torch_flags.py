"""The process-wide state a training run sets (torch flags, random generators), given back when it ends."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
import torch.utils.deterministic

CUBLAS_ENV = "CUBLAS_WORKSPACE_CONFIG"
SEED_ENV = ("PL_GLOBAL_SEED", "PL_SEED_WORKERS")
"""What ``lightning.seed_everything`` leaves in the environment (later Lightning code reads them)."""


@contextmanager
def run_torch_flags() -> Iterator[None]:
    """Run a training run under Lightning's torch flags, and restore the caller's at the end.

    Lightning's ``Trainer(deterministic=...)`` sets process-wide state and never restores it:
    ``torch.use_deterministic_algorithms`` (on, or off), ``torch.backends.cudnn.benchmark`` and the
    ``CUBLAS_WORKSPACE_CONFIG`` variable. A notebook that fits a ``UcseClassifier`` would carry them into
    whatever it runs next (an op without a deterministic implementation raising on CUDA, every
    ``torch.empty`` filled with NaN), so they are put back as they were, also when the run fails. So are
    the global random generators (Python's, numpy's, torch's CPU and CUDA ones) and the two variables that
    ``seed_everything`` reseeds and sets: a caller's own random stream went on from the run's seed instead.
    ucse itself draws nothing from them after a run (its later draws use their own seeded generators).

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
    cuda = torch.cuda.is_initialized()
    generators = (
        random.getstate(),
        np.random.get_state(),
        torch.get_rng_state(),
        torch.cuda.get_rng_state_all() if cuda else None,
        {k: os.environ.get(k) for k in SEED_ENV},
    )
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        if sys.is_finalizing():
            # A stop landing between this generator's yield and the ExitStack's record of its exit leaves it
            # suspended until the interpreter's shutdown closes it (seen once in a dozen SIGTERMs at random
            # moments: "Exception ignored in <generator run_torch_flags>" and a traceback after the error
            # line): the process is ending, nothing is left to restore, and importing would fail.
            return
        py_state, np_state, torch_state, cuda_states, seed_env = generators
        random.setstate(py_state)
        np.random.set_state(np_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        elif torch.cuda.is_initialized():
            # CUDA started during the run (its generators lazily seeded then, by the run's seed): seed them as
            # the caller's own seed would have, which torch.manual_seed sets for CPU and CUDA alike.
            torch.cuda.manual_seed_all(torch.initial_seed())
        for key, value in seed_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        algorithms, warn_only, benchmark, fill, cublas = saved
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        torch.backends.cudnn.benchmark = benchmark
        torch.utils.deterministic.fill_uninitialized_memory = fill
        if cublas is None:
            os.environ.pop(CUBLAS_ENV, None)
        else:
            os.environ[CUBLAS_ENV] = cublas
