"""glibc's heap settings for a ``ucse`` command's own process: freed memory is kept for the next step.

Every training step allocates its intermediate tensors afresh (tens of MB at batch 64) and frees them at
the end. Under glibc's default, dynamic thresholds the heap top goes back to the kernel after most steps and
is faulted in again, page by page, in the next one: the paper recipe's 3-epoch Banking77 run on MiniLM-L6
took 280k-510k minor page faults, 110k-130k with fixed thresholds; its fit 10.41 s on average over nine
runs, 9.93 s over thirteen (each spread wider than the gain), peak memory 20-40 MiB higher
(docs/RESULTS.md section 5).

Only commands call this, for the process they own (``ucse train``, ``python train.py``, ``ucse sweep``, and
``bench/train_cost.py``, which times a training run as ``ucse train`` makes it): the settings are process-wide
and glibc gives no way back to its dynamic thresholds, so the library (``ucse.train``,
``UcseClassifier.fit``) leaves a caller's process as it is.
"""

from __future__ import annotations

import ctypes
import os
import platform

MMAP_THRESHOLD = 32 * 2**20
"""Allocations above this get their own mapping (32 MiB: the ceiling of glibc's dynamic threshold, 64-bit)."""

TRIM_THRESHOLD = 128 * 2**20
"""Free memory at the heap top is given back to the kernel only above this. 64 MiB (glibc's own ceiling,
2 x the mmap threshold) still faulted 260k pages per run: a step's transient tensors exceed it."""

M_TRIM_THRESHOLD = -1  # <malloc.h>
M_MMAP_THRESHOLD = -3
MALLOC_ENV = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
)


def user_set_malloc() -> bool:
    """True when the environment already tunes glibc's malloc (the user's settings win)."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return any(os.environ.get(k) for k in MALLOC_ENV) or "glibc.malloc." in tunables


def keep_freed_heap() -> bool:
    """Fix glibc's mmap and trim thresholds for this process; ``False`` where nothing was changed.

    Nothing changes off glibc (macOS, musl, Windows) or when the user's environment tunes malloc itself.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or user_set_malloc():
        return False
    libc = ctypes.CDLL(None)  # the running process's C library
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success; the mmap threshold first: setting either one ends the dynamic regime
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
