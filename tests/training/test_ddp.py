"""Training on several processes (``devices=2 strategy=ddp`` on CPU, gloo) against one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from ucse.backbone.states import CachedStates
from ucse.config import build_config
from ucse.training import train
from ucse.training.datamodule import LengthBucketSampler

REPO = Path(__file__).resolve().parents[2]
# Nothing random in the step: no dropout, no sampled z, no batch-coupled contrastive term. CE is a per-text
# mean, so DDP's average of the two ranks' gradients equals the gradient over their union.
DETERMINISTIC = [
    "head.dropout=0",
    "head.gaussian=false",
    "loss.contrastive=none",
    "uncertainty.enabled=false",
]


@pytest.mark.parametrize(("n", "bs", "world"), [(203, 8, 2), (100, 5, 3), (7, 3, 3), (193, 8, 2), (32, 5, 3)])
def test_ranks_split_the_single_process_global_batches(n, bs, world):
    lengths = np.random.default_rng(n).integers(1, 40, size=n)
    lent = 0
    for shuffle in (True, False):
        single = LengthBucketSampler(lengths, bs * world, shuffle, seed=4, bucket_batches=3)
        ranks = [
            LengthBucketSampler(lengths, bs, shuffle, seed=4, bucket_batches=3, rank=r, world_size=world)
            for r in range(world)
        ]
        for epoch in range(2):
            for s in (single, *ranks):
                s.set_epoch(epoch)
            expected = list(single)
            parts = [list(r) for r in ranks]
            assert all(len(p) == len(expected) == len(r) for p, r in zip(parts, ranks))  # same step count
            for step, batch in enumerate(expected):
                got = [i for p in parts for i in p[step]]
                if len(batch) >= world:
                    assert got == batch  # rank 0's part, then rank 1's, ...: exactly the global batch
                else:  # a last global batch smaller than the world lends its first text to empty ranks
                    lent += 1
                    copy = batch[0] if shuffle else -1 - batch[0]  # evaluation marks the copy (not counted)
                    assert got[: len(batch)] == batch and set(got[len(batch) :]) == {copy}
    assert lent == 4 * int(n % (bs * world) in range(1, world))  # in both epochs of both modes


def _cli(*args: str) -> dict:
    """Run ``python train.py`` as a user would (Lightning's ddp launcher re-runs this command per rank)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "train.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"stdout": proc.stdout, "stderr": proc.stderr}


LR, STEPS = 5e-3, 27  # optim.lr of these runs; optimiser steps of the longest one (3 epochs x 108 / 12)
U = 2.0**-24  # fp32 unit roundoff
TEXTS, POSITIONS = 12, 64  # texts of a global batch; a bound on the tokens of a text (<= 13 here)
# Tolerance from the arithmetic. The head trains in fp32 (pinned below) and nothing in a step is random, so
# the runs differ only in how a gradient's per-text terms are summed: one sum over 12 texts, or two sums of
# 6 added by the all-reduce. Two orders of an n-term fp32 sum differ by <= 2*n*U*sum|g_i| (n = 12 texts x 64
# positions for a conv weight): RHO = 2 * 768 * 2^-24 ~ 9.2e-5 relative to the gradient's scale (the terms
# of a training batch do not cancel heavily). AdamW's step lr * m / sqrt(v) has |m / sqrt(v)| <= 1 and a
# relative sensitivity <= 1 to such a change, so each step moves the runs apart by <= LR * RHO, plus one
# rounding of the weight (U * |w|, |w| <= 1). Over STEPS steps: STEPS * (LR * RHO + U) ~ 1.4e-5. Measured on
# an AVX-512 CPU: 2.2e-8 (one or two ulps of |w| ~ 0.15). A wrong reduction (a sum instead of a mean, a
# rank's own half batch) moves weights by ~LR per step, 300x more; bf16-mixed (head_precision=auto on an
# AVX512-BF16 CPU, fp32 elsewhere) rounds activations to 2^-9 and differed by up to 6.7e-3: hence fp32.
ATOL = STEPS * (LR * 2 * TEXTS * POSITIONS * U + U)


def _heads_close(a: Path, b: Path) -> None:
    wa, wb = load_file(a / "head" / "model.safetensors"), load_file(b / "head" / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=ATOL, rtol=0)


@pytest.mark.slow  # two 2-process runs (~20 s each here): process start-up and gloo, not model size
def test_ddp_on_two_processes_gives_the_head_of_one_process_with_the_global_batch(
    tiny_task_root, tiny_bert_dir, tmp_path
):
    common = [
        f"data.root={tiny_task_root}",
        f"backbone.model={tiny_bert_dir}",
        "backbone.name=tiny-bert",
        "backbone.precision=fp32",
        "backbone.batch_size=16",
        f"optim.lr={LR}",
        "optim.epochs=2",
        "recipe=paper",
        "progress_bar=false",
        "head_precision=fp32",  # the same arithmetic on every CPU (auto is bf16 on AVX512-BF16 only)
        *DETERMINISTIC,
    ]
    one = train(
        build_config(
            [*common, "optim.batch_size=12", f"cache.dir={tmp_path / 'c1'}", f"output_dir={tmp_path / 'one'}"]
        )
    )
    assert one.metrics["data"]["sizes"]["train"] % 12 == 0  # 108 texts: every global batch splits evenly
    ddp_dir = tmp_path / "ddp"
    out = _cli(
        *common,
        "devices=2",
        "strategy=ddp",
        "optim.batch_size=6",
        f"cache.dir={tmp_path / 'c2'}",
        f"output_dir={ddp_dir}",
    )
    assert out["stdout"].count("test accuracy") == 1  # rank 1 reports nothing
    _heads_close(one.run_dir, ddp_dir)
    metrics = json.loads((ddp_dir / "metrics.json").read_text())
    # Heads within ATOL of each other: only a test text whose two top logits tie to that rounding could be
    # labelled differently; allow one such text.
    n_test = metrics["data"]["sizes"]["test"]
    assert metrics["test"]["accuracy"] == pytest.approx(
        one.metrics["test"]["accuracy"], abs=1 / n_test + 1e-9
    )
    assert metrics["data"]["cache_builds"] == 1
    # Written once, by rank 0: one best and one last checkpoint, one head, one config.
    assert sorted(p.name for p in (ddp_dir / "checkpoints").iterdir()) == sorted(
        p.name for p in (one.run_dir / "checkpoints").iterdir()
    )
    ckpt = torch.load(ddp_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 2 * 108 // 12
    # The cache both ranks built in shards is the single-process entry.
    (e1,), (e2,) = [list((tmp_path / c).iterdir()) for c in ("c1", "c2")]
    assert e1.name == e2.name
    s1, s2 = CachedStates(e1), CachedStates(e2)
    assert np.array_equal(s1.offsets, s2.offsets)
    all_rows = list(range(len(s1)))
    torch.testing.assert_close(s1.batch(all_rows)[0], s2.batch(all_rows)[0], atol=3e-3, rtol=2e-3)

    # Resume under DDP: one more epoch from last.ckpt, as one process resumes its own run.
    _cli(
        *common,
        "devices=2",
        "strategy=ddp",
        "optim.batch_size=6",
        f"cache.dir={tmp_path / 'c2'}",
        f"output_dir={ddp_dir}",
        "optim.epochs=3",
        "recipe=paper",
        "ckpt_path=last",
    )
    resumed_one = train(
        build_config(
            [
                *common,
                "optim.batch_size=12",
                f"cache.dir={tmp_path / 'c1'}",
                f"output_dir={tmp_path / 'one'}",
                "optim.epochs=3",
                "recipe=paper",
                "ckpt_path=last",
            ]
        )
    )
    assert torch.load(ddp_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 27
    _heads_close(resumed_one.run_dir, ddp_dir)


def test_devices_below_one_fails_before_writing(tiny_run_cfg, tmp_path):
    from ucse.config import ConfigError

    cfg = tiny_run_cfg("devices=0", f"output_dir={tmp_path / 'never'}")
    with pytest.raises(ConfigError, match="devices=0 must be >= 1"):
        train(cfg)
    assert not (tmp_path / "never").exists()


def test_fsdp_without_a_gpu_fails_in_one_line(tiny_run_cfg, tmp_path):
    from ucse.config import ConfigError

    with pytest.raises(ConfigError, match="strategy=fsdp needs CUDA GPUs.*use strategy=ddp"):
        train(
            tiny_run_cfg("strategy=fsdp", "devices=2", "accelerator=cpu", f"output_dir={tmp_path / 'never'}")
        )
    assert not (tmp_path / "never").exists()


def test_strategy_is_a_string_enum(tiny_run_cfg):
    from ucse.config import ConfigError

    assert tiny_run_cfg("strategy=ddp_spawn").strategy.value == "ddp_spawn"
    with pytest.raises(ConfigError, match="strategy.*Did you mean 'ddp'"):
        tiny_run_cfg("strategy=dpp")
