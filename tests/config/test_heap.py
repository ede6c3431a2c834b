"""A command's process keeps freed heap memory for the next step, unless the user tunes malloc."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from ucse.config import heap

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# A training step in miniature: ten 4 MiB blocks written, then all freed. Under glibc's dynamic thresholds
# the first round's mappings raise the mmap threshold to 4 MiB and the trim threshold to 8 MiB, so every
# later round's 40 MiB go to the heap and back to the kernel at the end, and are faulted in again.
STEPS = """
import json, resource, sys
import numpy as np
if sys.argv[1] == "fixed":
    from ucse.config.heap import keep_freed_heap
    assert keep_freed_heap()
def step():
    blocks = [np.ones(2**20, dtype=np.float32) for _ in range(10)]
    del blocks
step()
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start))
"""


def faults(mode: str) -> int:
    # glibc's own malloc in the child: no user tuning, and no preloaded allocator (jemalloc, tcmalloc)
    # replacing it, under which mallopt reaches glibc's unused malloc and the test would measure another heap
    dropped = {*heap.MALLOC_ENV, "GLIBC_TUNABLES", "LD_PRELOAD"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    out = subprocess.run(
        [sys.executable, "-c", STEPS, mode], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_fixed_thresholds_keep_a_step_s_memory_in_the_process():
    dynamic, fixed = faults("dynamic"), faults("fixed")
    pages = 5 * 10 * 2**22 // os.sysconf("SC_PAGE_SIZE")  # what five rounds touch
    # glibc 2.3x: about half of it given back and faulted in again every round (25.5k of 51k pages here)
    assert dynamic >= pages // 4
    assert fixed <= pages // 20  # kept: the rounds reuse the same pages (0 here)


@pytest.mark.parametrize(
    ("name", "value"),
    [("MALLOC_TRIM_THRESHOLD_", "1000000"), ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1000000")],
)
def test_the_user_s_own_malloc_settings_win(monkeypatch, name, value):
    called = []
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda *a: called.append(a))
    monkeypatch.setenv(name, value)
    assert heap.user_set_malloc() and heap.keep_freed_heap() is False and not called


def test_other_tunables_leave_malloc_to_ucse(monkeypatch):
    for name in heap.MALLOC_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
    assert not heap.user_set_malloc()
