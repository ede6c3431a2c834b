"""The hidden-state cache under faults: a build killed by SIGKILL, and folders it did not make."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tiny_models import sample_texts

from ucse.backbone import HiddenStateCache

TEXTS = sample_texts(11, seed=5, min_words=1, max_words=15)


def test_only_the_cache_own_temporary_names_are_cleaned(tiny_bert_backbone, tmp_path):
    # The cache folder is the user's choice; a name that merely starts like a temporary entry is not ours.
    key = HiddenStateCache(tmp_path).key(tiny_bert_backbone, TEXTS, "Toy", "train")
    mine = tmp_path / f".tmp-{key}-notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("keep")
    HiddenStateCache(tmp_path).get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    assert (mine / "keep.txt").read_text() == "keep"


# Builds a cache entry in a child process and stops in the middle of the backbone pass (after its first
# batch is in the memory map) until the test kills it with SIGKILL: no clean-up code runs.
_BUILD_AND_HANG = """
import sys, time
from pathlib import Path
from tiny_models import make_tiny_bert_cfg, sample_texts
from ucse.backbone import FrozenBackbone, HiddenStateCache

model, root, marker = sys.argv[1:4]
fb = FrozenBackbone(make_tiny_bert_cfg(model))
original = fb.iter_states

def hang_after_one_batch(texts, batch_size=None, tokenized=None):
    for n, item in enumerate(original(texts, batch_size, tokenized)):
        if n == 1:
            Path(marker).touch()
            time.sleep(600)
        yield item

fb.iter_states = hang_after_one_batch
HiddenStateCache(root).get_or_build(fb, sample_texts(11, seed=5, min_words=1, max_words=15), "Toy", "train")
"""


def test_a_build_killed_midway_is_never_reused(tiny_bert_dir, tiny_bert_backbone, tmp_path):
    root, marker = tmp_path / "cache", tmp_path / "half-built"
    tests = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{tests}{os.pathsep}{tests.parent}", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _BUILD_AND_HANG, str(tiny_bert_dir), str(root), str(marker)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (half,) = root.iterdir()  # the killed build left its temporary folder, and no entry
    assert half.name.startswith(".tmp-") and (half / "states.npy").is_file()
    cache = HiddenStateCache(root)
    entry = cache.get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    assert cache.builds == 1  # built afresh, not taken from the half-written folder
    assert [p.name for p in root.iterdir()] == [entry.path.name]  # the dead builder's folder is gone
    reference = HiddenStateCache(tmp_path / "fresh").get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    assert np.array_equal(entry.offsets, reference.offsets)
    rows = list(range(len(TEXTS)))
    assert torch.equal(entry.batch(rows)[0], reference.batch(rows)[0])
