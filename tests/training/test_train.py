"""End-to-end training runs on a tiny random backbone and a tiny learnable task."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from toy_tasks import LEARNS

from ucse.backbone.cache import HiddenStateCache
from ucse.config import from_yaml
from ucse.core.encoder import UcseEncoder
from ucse.training import train


def _check_per_label(metrics: dict, names: list[str]) -> None:
    """test_per_label: every label once, its counts the test split's, recall x support adding to accuracy."""
    rows = metrics["test_per_label"]
    assert [r["label"] for r in rows] == names
    n = metrics["data"]["sizes"]["test"]
    assert sum(r["support"] for r in rows) == sum(r["predicted"] for r in rows) == n
    right = sum(round(r["recall"] * r["support"]) for r in rows if r["support"])
    assert right / n == pytest.approx(metrics["test"]["accuracy"], abs=1e-6)
    f1 = [r["f1"] for r in rows if r["f1"] is not None]
    assert np.mean(f1) == pytest.approx(metrics["test"]["f1_macro"], abs=1e-5)


def _logged_columns(run_dir: Path) -> set[str]:
    with (run_dir / "logs" / "metrics.csv").open() as fh:
        return set(next(csv.reader(fh)))


def test_full_method_run_writes_the_run_folder(tiny_run_cfg):
    cfg = tiny_run_cfg(*LEARNS)
    result = train(cfg)
    d = result.run_dir
    assert (d / "config.yaml").is_file() and from_yaml(d / "config.yaml") == cfg
    metrics = json.loads((d / "metrics.json").read_text())
    assert set(metrics["test"]) == {"accuracy", "f1_macro"} and "accuracy" in metrics["val"]
    # 3 balanced classes with one cue word each: well above chance (1/3; see LEARNS).
    assert metrics["test"]["accuracy"] > 0.5
    _check_per_label(metrics, ["class_0", "class_1", "class_2"])  # the Lightning test loop's confusion matrix
    assert (d / "checkpoints" / "last.ckpt").is_file()
    assert (d / "head" / "config.json").is_file() and (d / "head" / "model.safetensors").is_file()
    # Every loss term is logged.
    cols = _logged_columns(d)
    for term in (
        "train/loss_epoch",
        "train/ce_epoch",
        "train/contrastive_epoch",
        "train/kl_epoch",
        "val/acc",
    ):
        assert term in cols
    # Checkpoints hold the head only: no backbone weights.
    ckpt = torch.load(d / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    assert all(k.startswith(("head.", "val_metrics", "test_metrics")) for k in ckpt["state_dict"])
    assert not list(d.rglob("*.tmp"))


def test_cache_built_once_and_reused_across_runs(tiny_run_cfg, tmp_path):
    cfg = tiny_run_cfg(f"cache.dir={tmp_path / 'cache'}")
    first = train(cfg).metrics["data"]
    assert first["cache_builds"] == 1  # one pool for train, validation and test, once for 3 epochs
    cfg2 = tiny_run_cfg(f"cache.dir={tmp_path / 'cache'}", "seed=1", f"output_dir={tmp_path / 'run2'}")
    assert train(cfg2).metrics["data"]["cache_builds"] == 0
    assert HiddenStateCache(tmp_path / "cache").size_bytes() == first["cache_bytes"] > 0
    # Another task's entry in the same folder is not this run's: the run reports its own entry's bytes.
    other = tmp_path / "cache" / ("f" * 64)
    other.mkdir()
    (other / "states.bin").write_bytes(b"\0" * 4096)
    cfg3 = tiny_run_cfg(f"cache.dir={tmp_path / 'cache'}", "seed=2", f"output_dir={tmp_path / 'run3'}")
    assert train(cfg3).metrics["data"]["cache_bytes"] == first["cache_bytes"]


def test_same_seed_same_result(tiny_run_cfg, tmp_path):
    a = train(tiny_run_cfg("optim.epochs=1", f"output_dir={tmp_path / 'a'}"))
    b = train(tiny_run_cfg("optim.epochs=1", f"output_dir={tmp_path / 'b'}"))
    assert a.metrics["test"] == b.metrics["test"]
    wa, wb = (
        load_file(a.run_dir / "head" / "model.safetensors"),
        load_file(b.run_dir / "head" / "model.safetensors"),
    )
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_resume_from_last_checkpoint(tiny_run_cfg, caplog):
    one = train(tiny_run_cfg("optim.epochs=1"))
    steps_one = torch.load(one.run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    two = train(tiny_run_cfg("optim.epochs=2", "ckpt_path=last"))
    ckpt = torch.load(two.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["epoch"] == 1 and ckpt["global_step"] == 2 * steps_one
    assert "nothing was trained" not in caplog.text
    # resuming the finished run trains nothing, and says so (it silently rewrote the head and metrics)
    train(tiny_run_cfg("optim.epochs=2", "ckpt_path=last"))
    assert f"had finished (step {2 * steps_one}), so nothing was trained" in caplog.text


def test_exported_head_encodes_like_the_trained_module(tiny_run_cfg, tiny_task_root):
    result = train(tiny_run_cfg("head_precision=fp32"))  # auto would be bf16-mixed on AVX512-BF16 CPUs only
    enc = UcseEncoder.from_dir(result.run_dir / "head")
    assert enc.label_names == ["class_0", "class_1", "class_2"]
    texts = [
        json.loads(line)["text"]
        for line in (tiny_task_root / "Banking77Classification" / "test.jsonl").open()
    ]
    labels = [
        json.loads(line)["label"]
        for line in (tiny_task_root / "Banking77Classification" / "test.jsonl").open()
    ]
    out = enc.encode_gaussian(texts)
    assert out.mean.shape == (len(texts), 32) and out.var.shape == out.mean.shape and (out.var > 0).all()
    acc = float((out.logits.argmax(1) == np.array(labels)).mean())
    # The run's own test score used fp16-cached states (2^-11 relative rounding), the encoder fp32 states.
    # Through the head's sums that moves a logit by at most 2^-11 x 32 (a generous bound on cancellation) of
    # the largest one: only texts whose two top logits are closer than that may be labelled differently.
    top2 = np.sort(out.logits, axis=1)[:, -2:]
    near = int((top2[:, 1] - top2[:, 0] < 2**-11 * 32 * np.abs(out.logits).max()).sum())
    assert abs(acc - result.metrics["test"]["accuracy"]) <= near / len(texts) + 1e-9
    # Deterministic inference: encoding twice gives identical means.
    np.testing.assert_array_equal(enc.encode(texts[:5]), enc.encode(texts[:5]))


@pytest.mark.parametrize(
    "overrides",
    [
        ("head=linear",),
        ("head=mean",),
        ("head=mlp",),
        ("head=attention",),
        ("head=textcnn-base",),
        ("head=textcnn", "loss.contrastive=supcon"),
        ("head=textcnn", "loss.contrastive=simcse", "head.gaussian=false"),
        ("head=linear", "head.gaussian=true", "loss.contrastive=lcl"),
    ],
)
def test_every_head_and_objective_trains(tiny_run_cfg, overrides):
    result = train(tiny_run_cfg("optim.epochs=6", "optim.lr=3e-2", "optim.batch_size=8", *overrides))
    # Clearly above chance (1/3, 45 test rows; a chance-level head clears 0.45 with p = 4%) and a falling
    # training loss. Measured over seeds 0-2 x fp32/bf16 heads with these settings: >= 0.58 for every
    # variant here (with 4 epochs x 7 steps at lr 2e-2: down to 0.49, two texts above the floor).
    assert result.metrics["test"]["accuracy"] > 0.45
    with (result.run_dir / "logs" / "metrics.csv").open() as fh:
        losses = [float(r["train/loss_epoch"]) for r in csv.DictReader(fh) if r.get("train/loss_epoch")]
    assert len(losses) == 6 and losses[-1] < losses[0]
    assert (result.run_dir / "head" / "model.safetensors").is_file()


def test_the_step_loss_is_logged_every_log_interval(tiny_run_cfg):
    # The module calls self.log for the step loss only on the steps the loggers write; none may go missing.
    result = train(tiny_run_cfg("optim.epochs=3", "optim.batch_size=8", "log_every_n_steps=2"))
    with (result.run_dir / "logs" / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    logged = [int(r["step"]) for r in rows if r.get("train/loss_step")]
    last = max(int(r["step"]) for r in rows)
    assert len(logged) >= 3 and logged == list(range(1, last + 1, 2))
    assert all(math.isfinite(float(r["train/loss_step"])) for r in rows if r.get("train/loss_step"))


def test_decoder_backbone_last_token(tiny_run_cfg, tiny_qwen3_dir):
    cfg = tiny_run_cfg(
        "backbone.pooling=last",
        "backbone.append_eos=true",
        "backbone.padding_side=left",
        "head=linear",
        "optim.epochs=3",
        "recipe=paper",
        model_dir=tiny_qwen3_dir,
    )
    result = train(cfg)
    assert result.metrics["test"]["accuracy"] > 0.5


def test_logreg_probe(tiny_run_cfg):
    result = train(tiny_run_cfg("head=logreg"))
    m = result.metrics
    assert m["selection"]["probe"]["converged"] and m["test"]["accuracy"] > 0.6
    _check_per_label(m, ["class_0", "class_1", "class_2"])  # an in-memory head's predictions
    assert (result.run_dir / "head" / "model.safetensors").is_file()  # a head like any other


def test_cache_off_recomputes(tiny_run_cfg):
    m = train(tiny_run_cfg("cache.enabled=false", *LEARNS)).metrics
    # One epoch learnt nothing reliable (0.38-0.40: chance); see LEARNS.
    assert m["data"]["cache_builds"] == 0 and m["test"]["accuracy"] > 0.5


def test_sweep_trains_the_grid_resumes_and_writes_the_table(tiny_task_root, tiny_bert_dir, tmp_path):
    from ucse.cli.sweep import run_sweep

    overrides = [
        f"data.root={tiny_task_root}",
        f"backbone.model={tiny_bert_dir}",
        "backbone.name=tiny-bert",
        "backbone.precision=fp32",
        "optim.epochs=2",
        "recipe=paper",
        "optim.batch_size=16",
        "optim.lr=5e-3",
        f"cache.dir={tmp_path / 'cache'}",
    ]
    out = tmp_path / "sweep"
    summary = run_sweep(
        ["Banking77Classification"], "minilm-l6", 2, ["textcnn-both", "logreg"], out, overrides
    )
    cells = summary["tasks"]["Banking77Classification"]
    assert cells["textcnn-both"]["seeds"] == 2 and cells["logreg"]["seeds"] == 2
    runs = sorted(p.parent.relative_to(out).as_posix() for p in out.rglob("metrics.json"))
    assert runs == [
        f"Banking77Classification/{v}/seed{s}" for v in ("logreg", "textcnn-both") for s in (0, 1)
    ]
    # One backbone pass for the whole grid: only the first run built the cache.
    builds = [json.loads((out / r / "metrics.json").read_text())["data"]["cache_builds"] for r in runs]
    assert sum(builds) == 1
    stamp = (out / runs[0] / "metrics.json").stat().st_mtime_ns
    run_sweep(["Banking77Classification"], "minilm-l6", 2, ["textcnn-both", "logreg"], out, overrides, True)
    assert (out / runs[0] / "metrics.json").stat().st_mtime_ns == stamp  # resumed: nothing retrained
    assert "textcnn-both" in (out / "ablation.md").read_text()
    # evaluate=True: every head run got an eval.json, and the calibration table averages them.
    ece = [
        json.loads((out / f"Banking77Classification/textcnn-both/seed{s}/eval.json").read_text())["metrics"][
            "ece"
        ]
        for s in (0, 1)
    ]
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["Banking77Classification"]["textcnn-both"]["ECE"] == pytest.approx(ece)
    assert f"{np.mean(ece):.4f}" in (out / "calibration.md").read_text()


def test_train_cli_reports_input_errors_without_a_traceback(tmp_path):
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        # runs_dir in tmp: where `make train` already ran, the default run folder exists and is refused first
        [sys.executable, str(repo / "train.py"), f"data.root={tmp_path / 'missing'}", f"runs_dir={tmp_path}"],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "error: Data root" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, str(repo / "train.py"), "loss.lcl_weigth=0.5"],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=300,
    )
    assert proc.returncode == 2 and "Did you mean 'loss.lcl_weight'" in proc.stderr


def _best_checkpoint(run_dir: Path, metrics: dict) -> dict:
    return torch.load(run_dir / "checkpoints" / metrics["best_checkpoint"], weights_only=True)


def test_the_shipped_head_is_the_best_checkpoint_without_reading_it_back(tiny_run_cfg, monkeypatch):
    # The best epoch's weights and validation scores are kept in memory; they must be exactly what the
    # checkpoint holds and what a validation pass over it reports.
    reads, real_load = [], torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: reads.append(a) or real_load(*a, **k))
    result = train(tiny_run_cfg("optim.epochs=4", "head_precision=fp32"))
    assert not reads  # no checkpoint was read back during the run
    monkeypatch.undo()
    best = _best_checkpoint(result.run_dir, result.metrics)
    shipped = UcseEncoder.from_dir(result.run_dir / "head").head.state_dict()
    assert shipped and all(torch.equal(v, best["state_dict"][f"head.{k}"]) for k, v in shipped.items())
    saved_score = next(v["best_model_score"] for k, v in best["callbacks"].items() if "Checkpoint" in k)
    assert result.metrics["val"]["accuracy"] == pytest.approx(float(saved_score), abs=0)


def test_a_run_resumed_after_its_best_epoch_ships_the_checkpointed_best(tiny_run_cfg):
    # Resumed with nothing left to train, the best epoch ran in an earlier process: its weights come
    # from its checkpoint, and the scores from a validation pass over them.
    first = train(tiny_run_cfg("optim.epochs=2", "head_precision=fp32"))
    again = train(tiny_run_cfg("optim.epochs=2", "head_precision=fp32", "ckpt_path=last"))
    best = _best_checkpoint(again.run_dir, again.metrics)
    shipped = UcseEncoder.from_dir(again.run_dir / "head").head.state_dict()
    assert all(torch.equal(v, best["state_dict"][f"head.{k}"]) for k, v in shipped.items())
    assert again.metrics["val"] == first.metrics["val"] and again.metrics["test"] == first.metrics["test"]
