"""A real decoder backbone (SmolLM2-135M, GGUF, last-token): TextCNN vs linear probe vs logistic regression.

For each task the data (optionally a stratified subset, drawn once with seed 0) is loaded once and every
run gets it in memory, so the pool of texts, and so the hidden-state cache entry, is the same for every
head and seed: one backbone pass per task, timed by the first run (texts/s of the GGUF backbone pass).

Rows (test accuracy, mean and std over seeds, and mean fit wall time):
  textcnn       the full method (Gaussian TextCNN + LCL + KL) with the backbone config's recipe
  linear        last-token state + Linear, trained by the same loop (the "pooled EOS embedding" probe)
  logreg-last   scikit-learn LogisticRegression on the last-token state
  logreg-mean   the same on mean-pooled token states

Usage:
  UCSE_DATA_DIR=../shared/data python bench/decoder_table.py [--tasks A B] [--seeds 0 1 2]
      [--train-rows N] [--eval-rows N] [--cache-dir DIR] [--runs-dir DIR] [--out results.json] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ucse.config import build_config
from ucse.data import load_classification
from ucse.training import train

VARIANTS = {
    "textcnn": ["head=textcnn"],
    "linear": ["head=linear"],
    "logreg-last": ["head=logreg", "backbone.pooling=last"],
    "logreg-mean": ["head=logreg", "backbone.pooling=mean"],
}


def main(argv: list[str]) -> int:
    """Run the grid and print a markdown table (and write ``--out`` JSON)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--tasks", nargs="+", default=["AmazonCounterfactualClassification", "Banking77Classification"]
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--backbone", default="smollm2-135m")
    ap.add_argument("--train-rows", type=int, default=None, help="stratified train subset (seed 0)")
    ap.add_argument("--eval-rows", type=int, default=None, help="stratified validation/test subsets (seed 0)")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--runs-dir", default="/tmp/ucse-decoder-table")
    ap.add_argument("--out", default=None)
    args, overrides = ap.parse_known_args(argv)

    results: dict = {}
    for task in args.tasks:
        base = [
            f"backbone={args.backbone}",
            f"task={task}",
            "progress_bar=false",
            f"runs_dir={args.runs_dir}",
        ]
        if args.train_rows:
            base.append(f"data.max_train_samples={args.train_rows}")
        if args.eval_rows:
            base.append(f"data.max_eval_samples={args.eval_rows}")
        if args.cache_dir:
            base.append(f"cache.dir={args.cache_dir}")
        cfg0 = build_config(base + overrides)
        data = load_classification(cfg0.task, cfg0.data, 0)
        test_labels = np.asarray(data.labels("test"))
        majority = float(np.bincount(test_labels).max() / len(test_labels))
        sizes = {s: len(data.splits[s]) for s in ("train", "validation", "test")}
        res: dict = {"sizes": sizes, "majority": majority, "rows": {}}
        print(f"# {task}: {sizes}, test majority rate {majority:.4f}", flush=True)
        for variant in args.variants:
            runs = []
            for seed in args.seeds:
                cfg = build_config(
                    base + VARIANTS[variant] + [f"seed={seed}", f"name={variant}-seed{seed}"] + overrides
                )
                t0 = time.perf_counter()
                m = train(cfg, data=data).metrics
                wall = time.perf_counter() - t0
                runs.append({"seed": seed, "test_acc": m["test"]["accuracy"], "wall_s": round(wall, 2)})
                if m["data"]["cache_builds"]:
                    texts, secs = sum(sizes.values()), m["timing"]["states_s"]
                    res["backbone_pass"] = {"s": secs, "texts": texts, "texts_per_s": texts / secs}
                    print(
                        f"  backbone pass: {secs:.1f} s, {texts / secs:.2f} texts/s ({texts} texts)",
                        flush=True,
                    )
                print(
                    f"  {variant} seed {seed}: test acc {m['test']['accuracy']:.4f}  ({wall:.1f} s)",
                    flush=True,
                )
            accs = [r["test_acc"] for r in runs]
            res["rows"][variant] = {
                "runs": runs,
                "mean": statistics.mean(accs),
                "std": statistics.stdev(accs) if len(accs) > 1 else 0.0,
                "wall_s": statistics.mean(r["wall_s"] for r in runs),
            }
        results[task] = res

    print("\n| task | head | test accuracy (mean +- std over seeds) | seeds | mean wall per run |")
    print("|---|---|---|---|---|")
    for task, res in results.items():
        for variant, row in res["rows"].items():
            n = len(row["runs"])
            acc = f"{100 * row['mean']:.2f} +- {100 * row['std']:.2f}"
            print(f"| {task} | {variant} | {acc} | {n} | {row['wall_s']:.1f} s |")
        print(f"| {task} | majority class | {100 * res['majority']:.2f} | | |")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
