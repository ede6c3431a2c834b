"""``eval.py run=...`` end to end on a tiny trained run (offline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from ucse.evaluation.config import build_eval_config
from ucse.evaluation.evaluate import evaluate_run
from ucse.training import train

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny_run(tiny_run_cfg):
    # fp32 head: evaluate_run reruns the head in fp32; with auto (bf16-mixed on AVX512-BF16 CPUs only) the
    # training's own test pass would round every activation to 2^-9 and differ by a CPU-dependent amount.
    return train(tiny_run_cfg("head_precision=fp32"))


def test_evaluate_run_writes_metrics_uncertainty_and_plots(tiny_run):
    cfg = build_eval_config(
        [
            f"run={tiny_run.run_dir}",
            "tsne_samples=30",
            "efficiency=true",
            "efficiency_batches=2",
            "batch_size=8",
        ]
    )
    evaluate_run(cfg)
    report = json.loads((tiny_run.run_dir / "eval.json").read_text())
    m = report["metrics"]
    # Same head, same cached states, both fp32 as the training run's own test pass: only a text whose two
    # top logits tie to the rounding of another batch size's sums (~1e-7) could flip; allow one.
    assert m["accuracy"] == pytest.approx(tiny_run.metrics["test"]["accuracy"], abs=1 / report["n"] + 1e-9)
    assert set(m) >= {"accuracy", "f1_macro", "auroc", "ece", "nll", "brier"}
    # the training loop's per-label rows (its torchmetrics confusion matrix) are the evaluation's, whose
    # rows are true labels (tested against scikit-learn): supports equal, predictions within the one tie
    for a, b in zip(tiny_run.metrics["test_per_label"], report["per_label"], strict=True):
        assert a["label"] == b["label"] and a["support"] == b["support"]
        assert abs(a["predicted"] - b["predicted"]) <= 1
    assert [sum(row) for row in report["confusion"]["counts"]] == [r["support"] for r in report["per_label"]]
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


def test_encoder_serves_known_texts_from_attached_states(tiny_run, tiny_task_root):
    from ucse.config import from_yaml
    from ucse.core.encoder import UcseEncoder
    from ucse.data import load_classification
    from ucse.training.run import build_states, task_pool

    cfg = from_yaml(tiny_run.run_dir / "config.yaml")
    enc = UcseEncoder.from_dir(tiny_run.run_dir / "head")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    texts = data.texts("test")[:7]
    fresh = enc.encode_gaussian(texts)
    states, _ = build_states(cfg, enc.backbone, data)
    enc.attach_states(task_pool(data), states["train"].base)
    calls = enc.backbone.forward_calls
    cached = enc.encode_gaussian(texts)
    assert enc.backbone.forward_calls == calls  # served from the cache pool: no backbone pass
    np.testing.assert_allclose(cached.mean, fresh.mean, atol=2e-2)  # fp16 cache vs fp32 on the fly
    enc.encode_gaussian(["a text the pool has never seen"])
    assert enc.backbone.forward_calls == calls + 1
    # A mix: known texts from the pool, the new one from the backbone, all back in input order.
    mixed = [texts[0], "a text the pool has never seen", texts[3], texts[1]]
    out = enc.encode_gaussian(mixed)
    assert enc.backbone.forward_calls == calls + 2
    np.testing.assert_allclose(out.mean[[0, 2, 3]], cached.mean[[0, 3, 1]], rtol=1e-5, atol=1e-6)
    alone = enc.encode_gaussian([mixed[1]])
    np.testing.assert_allclose(out.mean[1], alone.mean[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.logits[[0, 2, 3]], cached.logits[[0, 3, 1]], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_mteb_classification_offline_on_the_tiny_run(tiny_run):
    cfg = build_eval_config([f"run={tiny_run.run_dir}", "mteb=true", "plots=false", "efficiency=false"])
    evaluate_run(cfg)
    mteb = json.loads((tiny_run.run_dir / "eval.json").read_text())["mteb"]
    trained, raw = mteb["trained_encoder_mu"]["main_score"], mteb["raw_backbone_pooled"]["main_score"]
    # Both embeddings carry the cue word, so mteb's few-shot logistic-regression probe (8 samples per label)
    # must land well above chance (1/3) for both; their order is an empirical question, not asserted.
    assert 0.53 < raw <= 1.0 and 0.53 < trained <= 1.0
    assert mteb["trained_encoder_mu"]["task_name"] == "Banking77Classification"
    assert "note" not in mteb["trained_encoder_mu"]  # a trained embedding (only a probe head's is noted)


def test_efficiency_runs_the_backbone_in_both_timed_paths(tiny_run, tmp_path):
    from ucse.backbone.cache import HiddenStateCache
    from ucse.core.encoder import UcseEncoder
    from ucse.evaluation.evaluate import efficiency_report

    enc = UcseEncoder.from_dir(tiny_run.run_dir / "head")
    texts = [f"bank dog guitar {i}" for i in range(12)]
    cached = HiddenStateCache(tmp_path).get_or_build(enc.backbone, texts, "T", "pool")
    enc.attach_states(texts, cached)  # known, cached texts: must not make the timed full path free
    calls = enc.backbone.forward_calls
    report = efficiency_report(enc, texts, batches=3, batch_size=4)
    # (1 warm-up + 3 timed passes) x 3 batches, for the backbone alone and for backbone + head.
    assert enc.backbone.forward_calls - calls == 2 * 4 * 3
    assert report["n_samples"] == 12 and report["head_params"] == sum(
        p.numel() for p in enc.head.parameters()
    )


def test_efficiency_times_forward_passes_of_the_batch_size_it_reports(tiny_run):
    # The backbone split each timed chunk again at its own batch size (64 on a CPU by default): a report of
    # batch_size=256 had timed batches of 64. Here the backbone's own batch is 2 and the report's 4.
    from ucse.core.encoder import UcseEncoder
    from ucse.evaluation.evaluate import efficiency_report

    enc = UcseEncoder.from_dir(tiny_run.run_dir / "head")
    enc.backbone.cfg.batch_size = 2
    sizes = []
    forward = enc.backbone._forward

    def spy(features):
        sizes.append(int(features["input_ids"].shape[0]))
        return forward(features)

    enc.backbone._forward = spy
    report = efficiency_report(enc, [f"bank dog guitar {i}" for i in range(12)], batches=3, batch_size=4)
    assert report["batch_size"] == 4 and set(sizes) == {4}
    assert len(sizes) == 2 * 4 * 3  # (1 warm-up + 3 timed) passes x 3 batches, backbone alone and + head


@pytest.mark.parametrize(
    "bad, message",
    [
        # each was accepted and failed after the whole evaluation (t-SNE's perplexity, an unpack) or never
        ("tsne_samples=2", "tsne_samples=2; it must be at least 4"),
        ("tsne_samples=-5", "tsne_samples=-5"),
        ("batch_size=0", "batch_size=0; it must be at least 1"),
        ("efficiency_batches=0", "efficiency_batches=0"),
        ("sigma_thresholds=[0.5]", r"sigma_thresholds=\[0.5\]; give two increasing"),
        ("sigma_thresholds=[1.0,0.8]", r"sigma_thresholds=\[1.0, 0.8\]"),
        ("out=/tmp/somewhere", "out=: not used when evaluating a run"),  # ignored before: no folder made
        ("task=Nonsense", "task=: not used when evaluating a run"),
    ],
)
def test_eval_settings_are_checked_before_any_work(bad, message):
    from ucse.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        build_eval_config(["run=somewhere", bad])
    build_eval_config(["run=somewhere", "tsne_samples=4", "sigma_thresholds=[0.5,0.9]"])  # the limits pass
