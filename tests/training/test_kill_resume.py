"""Kill -9 at random points of a real training process, resume with ckpt_path=last: same head, bytes and all.

The training runs as ``python train.py`` in a subprocess on the tiny random BERT and the tiny cue task, so the
kill is a real SIGKILL (no cleanup code runs). The uninterrupted run's wall time sets the window the kill
points are drawn from (seeded), so they land in start-up, training, checkpoint writes and the final export.
"""

from __future__ import annotations

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
KILLS = 5


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


def _args(task_root: Path, model: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "train.py"),
        f"data.root={task_root}",
        f"backbone.model={model}",
        "backbone.name=tiny-bert",
        "backbone.precision=fp32",
        "backbone.batch_size=16",
        "optim.lr=5e-3",
        "optim.epochs=8",
        "optim.batch_size=8",
        "progress_bar=false",
        "uncertainty.enabled=false",
        f"output_dir={out}",
        *extra,
    ]


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

    run = tmp_path / "killed"
    rng = random.Random(10)
    landed = []  # (delay s, epoch of last.ckpt after the kill)
    for _ in range(KILLS):
        extra = ("ckpt_path=last",) if run.exists() else ()
        proc = subprocess.Popen(
            _args(tiny_task_root, tiny_bert_dir, run, *extra),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        delay = rng.uniform(0.2 * wall, 0.9 * wall)
        time.sleep(delay)
        finished = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        landed.append((round(delay, 2), "finished" if finished else _epoch_on_disk(run)))
    t1 = time.perf_counter()
    done = subprocess.run(
        _args(tiny_task_root, tiny_bert_dir, run, "ckpt_path=last"), env=env, capture_output=True, text=True
    )
    resume_s = time.perf_counter() - t1
    assert done.returncode == 0, done.stderr[-2000:]
    print(
        f"\nuninterrupted {wall:.1f}s; kills (delay s, epoch on disk): {landed}; last resume {resume_s:.1f}s"
    )

    for name in ("model.safetensors", "config.json"):
        assert (run / "head" / name).read_bytes() == (ref / "head" / name).read_bytes(), name
    assert not [p for p in run.rglob(".*") if p.name.endswith(".tmp") or ".old-" in p.name]
    assert not list(tmp_path.glob(".killed.*"))
    assert sum(1 for _, e in landed if e != "finished") == KILLS  # every kill hit a live process
