"""``import ucse`` shortens GNU OpenMP's spin (torch's CPU threads) before torch loads, unless the user set
a wait policy or a spin count: spinning threads made a small run tenfold slower beside one busy process on 2
cores (bench/shared_cpu.py; docs/RESULTS.md section 5). Each case is a fresh interpreter, since libgomp reads
the setting once, when torch first loads it."""

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
print(os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
"""


@pytest.mark.parametrize(
    ("given", "seen"),
    [
        ({}, "None 10000"),
        ({"OMP_WAIT_POLICY": "PASSIVE"}, "PASSIVE None"),  # the user's policy decides the spin
        ({"OMP_WAIT_POLICY": "active"}, "active None"),
        ({"GOMP_SPINCOUNT": "0"}, "None 0"),
    ],
)
def test_import_ucse_shortens_the_spin_unless_the_user_chose(given, seen):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")} | given
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == seen
