"""``eval.py run=...`` end to end on a tiny trained run (offline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from ucse.config import build_eval_config
from ucse.evaluation.evaluate import evaluate_run
from ucse.training import train

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny_run(tiny_run_cfg):
    return train(tiny_run_cfg())


def test_evaluate_run_writes_metrics_uncertainty_and_plots(tiny_run):
    cfg = build_eval_config(
        [f"run={tiny_run.run_dir}", "tsne_samples=30", "efficiency_batches=2", "batch_size=8"]
    )
    evaluate_run(cfg)
    report = json.loads((tiny_run.run_dir / "eval.json").read_text())
    m = report["metrics"]
    # Same head, same cached states as the training run's own test pass (bf16 autocast there, fp32 here).
    assert m["accuracy"] == pytest.approx(tiny_run.metrics["test"]["accuracy"], abs=1 / report["n"] + 1e-9)
    assert set(m) >= {"accuracy", "f1_macro", "auroc", "ece", "nll", "brier"}
    unc = report["uncertainty"]
    for curve in unc["arc"].values():
        assert curve["rates"][0] == 0.0 and curve["accuracy"][0] == pytest.approx(m["accuracy"])
    bins = unc["difficulty_bins"]
    assert sum(b["count"] for b in bins.values()) == report["n"]
    errors = round((1 - m["accuracy"]) * report["n"])
    assert sum(b["errors"] for b in bins.values()) == errors
    eff = report["efficiency"]
    assert eff["head_params"] > 0 and eff["backbone_params"] > 0 and eff["full_throughput"] > 0
    for name in ("arc.png", "tsne.png", "difficulty.png"):
        img = mpimg.imread(tiny_run.run_dir / name)
        assert img.ndim == 3 and img.shape[0] > 200 and np.std(img) > 0.01


def test_missing_run_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a finished ucse run"):
        evaluate_run(build_eval_config([f"run={tmp_path}"]))


def test_eval_cli_rejects_unknown_key():
    proc = subprocess.run(
        [sys.executable, str(REPO / "eval.py"), "rnu=x"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 2 and "Did you mean 'run'" in proc.stderr
