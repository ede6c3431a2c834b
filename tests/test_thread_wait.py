"""``import ucse`` asks GNU OpenMP (torch's CPU threads) to wait passively, before torch loads, unless the
user chose a policy: spinning threads made a small run tenfold slower beside one busy process on 2 cores
(bench/shared_cpu.py; docs/RESULTS.md section 5). Each case is a fresh interpreter, since libgomp reads the
setting once, when torch first loads it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHILD = """
import os, sys
import ucse
assert "torch" not in sys.modules  # set before libgomp can have read it
import torch
print(os.environ.get("OMP_WAIT_POLICY"))
"""


@pytest.mark.parametrize(("given", "seen"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE"), ("passive", "passive")])
def test_import_ucse_sets_a_passive_wait_unless_the_user_chose(given, seen):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env |= {} if given is None else {"OMP_WAIT_POLICY": given}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == seen
