"""Predict throughput vs a backbone-only encode of the same texts (MiniLM-L6 + Gaussian TextCNN).

Measured in one run, on the same N real texts (Banking77 test, in file order), on the same loaded backbone:
  A. backbone only: ``FrozenBackbone.pooled(texts)`` (tokenise, length-sorted batches, forward, pool);
  B. predict: ``UcseClassifier.predict_with_uncertainty(texts)`` (the same backbone pass straight into the
     head, then the uncertainty profile: calibrated probabilities, default score, abstention, conformal sets,
     rows with label names);
and the throughput ratio A-time / B-time (issue 20 goal >= 0.95). Each is timed ``repeats`` times,
alternating, after one warm-up; the best time of each is kept.

Usage:
    UCSE_DATA_DIR=../shared/data python bench/predict.py [run=<run>] [n=3000] [repeats=3] [device=cpu|cuda]

Without ``run=``, a TextCNN head with random weights and Banking77's 77 classes is saved to a temporary folder
(the cost of a forward pass does not depend on the weights' values); it has no calibration, so the profile is
the plain softmax. With ``run=``, the run's head and its fitted profile are used.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from ucse.config import build_config
from ucse.heads import build_head, save_head
from ucse.inference.classifier import UcseClassifier


def read_texts(n: int) -> list[str]:
    root = Path(os.environ.get("UCSE_DATA_DIR", "../shared/data"))
    path = root / "Banking77Classification" / "test.jsonl"
    rows = [json.loads(line) for line in path.open()]
    if len(rows) < n:
        rows = rows * -(-n // len(rows))  # n above the file's 3080 rows repeats them in order (a longer run)
    return [r["text"] for r in rows[:n]]


def random_head_dir(out: Path) -> Path:
    """A random-weight MiniLM-L6 TextCNN head with 77 classes, saved as a training run would save it."""
    from omegaconf import OmegaConf

    from ucse.backbone.encoder import FrozenBackbone

    cfg = build_config(["backbone=minilm-l6", "head=textcnn"])
    backbone = FrozenBackbone(cfg.backbone, torch.device("cpu"))
    torch.manual_seed(0)
    head = build_head(cfg.head, backbone.hidden_size, 77, cfg.backbone.pooling)
    meta = {
        "label_names": [f"intent_{i}" for i in range(77)],
        "backbone": OmegaConf.to_container(OmegaConf.structured(cfg.backbone), enum_to_str=True),
        "task": "Banking77Classification",
        "instruction": "",
        "seed": 0,
    }
    save_head(head.eval(), out / "head", meta)
    return out / "head"


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv)
    n, repeats = int(opts.get("n", 3000)), int(opts.get("repeats", 3))
    texts = read_texts(n)
    with tempfile.TemporaryDirectory(prefix="ucse-bench-predict-") as tmp:
        head_dir = Path(opts["run"]) if "run" in opts else random_head_dir(Path(tmp))
        clf = UcseClassifier.from_pretrained(head_dir, device=opts.get("device", "cpu"))
        backbone = clf.encoder_.backbone
        batch = backbone.cfg.batch_size or (
            512 if backbone.device.type == "cuda" else 64
        )  # iter_states' default
        print(
            f"{n} Banking77 test texts; backbone {backbone.cfg.model} ({backbone.precision.value}, "
            f"batch {batch}); head {head_dir}; "
            f"profile fitted: {clf.profile_.fitted} "
            f"(score {clf.uncertainty_score_}); torch threads {torch.get_num_threads()}"
        )
        warm = texts[:200]
        backbone.pooled(warm)
        clf.predict_with_uncertainty(warm)
        times: dict[str, list[float]] = {"backbone": [], "predict": []}
        for _ in range(repeats):
            t0 = time.perf_counter()
            backbone.pooled(texts)
            times["backbone"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rows = clf.predict_with_uncertainty(texts)
            times["predict"].append(time.perf_counter() - t0)
        assert len(rows) == n and [r["text"] for r in rows] == texts
        # Where predict's time goes, from one more pass split at its stages: the backbone + head pass (outputs
        # on the host), the profile's decisions without and with the out-of-scope flag, and the rest (rows).
        t0 = time.perf_counter()
        out = clf.encode_gaussian(texts)
        t1 = time.perf_counter()
        clf.profile_.apply(out.mean, out.var, out.logits, sets=True)
        t2 = time.perf_counter()
        clf.profile_.apply(out.mean, out.var, out.logits, sets=True, pooled=out.pooled)
        t3 = time.perf_counter()
        split = (t1 - t0, t2 - t1, t3 - t2, min(times["predict"]) - (t1 - t0) - (t3 - t2))
    a, b = min(times["backbone"]), min(times["predict"])
    for name, best in (("backbone only", a), ("predict", b)):
        every = ", ".join(f"{t:.2f}" for t in times[name.split()[0]])
        print(f"{name:<14}: {best:7.2f} s  {n / best:7.1f} texts/s   (all runs: {every})")
    print(f"throughput ratio predict / backbone = {a / b:.3f}  (issue 20 goal >= 0.95)")
    print(
        "one more predict, split: backbone + head {:.3f} s, profile without the flag {:.3f} s, "
        "with it {:.3f} s; the rest (rows), from the best predict {:.3f} s".format(*split)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
