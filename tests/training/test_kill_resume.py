"""Kill -9 at random points of a real training process, resume with ckpt_path=last: same head, bytes and all.

The training runs as ``python train.py`` in a subprocess on the tiny random BERT and the tiny cue task, so the
kill is a real SIGKILL (no cleanup code runs). The first kill lands at a random time in start-up (data,
backbone, cache); each later one waits until the process has written a new checkpoint (so the run makes
progress) and then a random fraction of an epoch more, so kills land anywhere in an epoch, including
inside a checkpoint write. Points are drawn from a seeded generator.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
KILLS = 4
EPOCHS = 12


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        UCSE_CACHE_DIR=str(cache),
    )
    return env


# UCSE_KILL_TEST_DATA=<folder in the shared/data layout>: the same test on the real MiniLM-L6 backbone and a
# stratified 600/200-row slice of Banking77 (recorded in docs/RESULTS.md section 10).
REAL_DATA = os.environ.get("UCSE_KILL_TEST_DATA")


def _args(task_root: Path, model: Path, out: Path, *extra: str) -> list[str]:
    if REAL_DATA:
        return [
            sys.executable,
            str(ROOT / "train.py"),
            f"data.root={REAL_DATA}",
            "data.max_train_samples=600",
            "data.max_eval_samples=200",
            "backbone.precision=fp32",
            f"optim.epochs={EPOCHS}",
            "recipe=paper",
            "optim.batch_size=32",
            "progress_bar=false",
            "uncertainty.enabled=false",
            f"output_dir={out}",
            *extra,
        ]
    return [
        sys.executable,
        str(ROOT / "train.py"),
        f"data.root={task_root}",
        f"backbone.model={model}",
        "backbone.name=tiny-bert",
        "backbone.precision=fp32",
        "backbone.batch_size=16",
        "optim.lr=5e-3",
        f"optim.epochs={EPOCHS}",
        "recipe=paper",
        "optim.batch_size=8",
        "progress_bar=false",
        "uncertainty.enabled=false",
        f"output_dir={out}",
        *extra,
    ]


def _mtime(run: Path) -> int:
    last = run / "checkpoints" / "last.ckpt"
    return last.stat().st_mtime_ns if last.is_file() else 0


def _epoch_on_disk(run: Path) -> int | None:
    last = run / "checkpoints" / "last.ckpt"
    if not last.is_file():
        return None
    return int(torch.load(last, map_location="cpu", weights_only=True)["epoch"])


@pytest.mark.slow
def test_kill_and_resume_equals_an_uninterrupted_run(tiny_task_root, tiny_bert_dir, tmp_path):
    env = _env(tmp_path / "cache")
    ref = tmp_path / "ref"
    t0 = time.perf_counter()
    subprocess.run(_args(tiny_task_root, tiny_bert_dir, ref), env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    fit_s = json.loads((ref / "metrics.json").read_text())["fit_s"]
    epoch_s, startup_s = fit_s / EPOCHS, max(wall - fit_s, 2.0)  # start-up + final evaluation, roughly

    run = tmp_path / "killed"
    rng = random.Random(10)
    landed = []  # (epoch of last.ckpt before, after the kill)
    for k in range(KILLS):
        extra = ("ckpt_path=last",) if run.exists() else ()
        before = _epoch_on_disk(run)
        stamp = _mtime(run)
        proc = subprocess.Popen(
            _args(tiny_task_root, tiny_bert_dir, run, *extra),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if k == 0:
            time.sleep(rng.uniform(1.0, 0.7 * startup_s))
        else:
            while proc.poll() is None and _mtime(run) == stamp:
                time.sleep(0.02)
            time.sleep(rng.uniform(0, 1.5 * epoch_s))
        alive = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        landed.append((before, _epoch_on_disk(run) if alive else "finished"))
    t1 = time.perf_counter()
    done = subprocess.run(
        _args(tiny_task_root, tiny_bert_dir, run, "ckpt_path=last"), env=env, capture_output=True, text=True
    )
    resume_s = time.perf_counter() - t1
    assert done.returncode == 0, done.stderr[-2000:]
    print(
        f"\nuninterrupted {wall:.1f}s (fit {fit_s:.1f}s); last.ckpt epoch before/after each kill: {landed}; "
        f"last resume {resume_s:.1f}s"
    )

    for name in ("model.safetensors", "config.json"):
        assert (run / "head" / name).read_bytes() == (ref / "head" / name).read_bytes(), name
    assert not [p for p in run.rglob(".*") if p.name.endswith(".tmp") or ".old-" in p.name]
    assert not list(tmp_path.glob(".killed.*"))
    assert (
        sum(after is not None and after != before for before, after in landed) >= KILLS - 2
    )  # made progress
