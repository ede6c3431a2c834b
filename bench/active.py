"""Which texts to label next: ``ucse suggest``'s picks against random picks of as many texts.

For each task and seed: draw ``--start`` examples per class from the official train split, train ucse's
default (``UcseClassifier()``: ``recipe=auto``, ``head=auto``), let it pick ``--add`` x C more texts from the
rest of the train split with each strategy (``suggest_to_label``: ``diverse_margin``, ``margin``, ``random``,
leaving out what the out-of-scope flag raises unless ``--include-out-of-scope``;
the pool's labels are hidden from the picks and revealed for the retraining, as a labeller would), retrain the
default on start + picks, and score every model on the official test split. One JSON line per task and seed
under ``--out``; a table of test accuracy (mean over the seeds and each strategy's gain over random) printed
at the end.

    UCSE_DATA_DIR=../shared/data python bench/active.py --tasks Banking77Classification --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from ucse import UcseClassifier
from ucse.inference.suggest import suggest_to_label
from ucse.uncertainty.acquisition import Strategy

ROOT = Path(os.environ.get("UCSE_DATA_DIR", "../shared/data"))


def read(task: str, split: str) -> tuple[list[str], np.ndarray]:
    """A split's texts and label names (``label_text`` where the file has it)."""
    rows = [json.loads(line) for line in (ROOT / task / f"{split}.jsonl").open()]
    return [r["text"] for r in rows], np.asarray([str(r.get("label_text", r["label"])) for r in rows])


def one(task: str, seed: int, start: int, add: int, include_out_of_scope: bool = False) -> dict:
    """The start model's test accuracy, then each strategy's after its picks are labelled and trained on."""
    texts, labels = read(task, "train")
    test_texts, test_labels = read(task, "test")
    rng = np.random.default_rng(seed)
    classes = sorted(set(labels.tolist()))
    # a label with fewer rows than start (MassiveIntent has one of 4) gives all of them, as bench/peers.py
    by_label = [np.flatnonzero(labels == c) for c in classes]
    first = np.concatenate([rng.choice(rows, min(start, len(rows)), replace=False) for rows in by_label])
    pool = np.setdiff1d(np.arange(len(texts)), first)
    n = add * len(classes)
    t0 = time.perf_counter()
    clf = UcseClassifier(seed=seed).fit([texts[i] for i in first], labels[first])
    row = {"task": task, "seed": seed, "start": start, "add": add, "n_start": len(first), "n_add": n}
    row["include_out_of_scope"] = include_out_of_scope
    row["start_acc"] = float((clf.predict(test_texts) == test_labels).mean())
    row["start_head"] = clf.metrics_.get("head")  # what head=auto shipped
    pool_texts = [texts[i] for i in pool]
    for strategy in Strategy:
        picks = suggest_to_label(clf, pool_texts, n, strategy, seed, include_out_of_scope).positions
        rows = np.concatenate([first, pool[picks]])
        model = UcseClassifier(seed=seed).fit([texts[i] for i in rows], labels[rows])
        row[strategy.value] = float((model.predict(test_texts) == test_labels).mean())
        row[f"{strategy.value}_classes"] = len(set(labels[pool[picks]].tolist()))  # labels the picks cover
        print(f"{task} seed {seed} {strategy.value}: {row[strategy.value]:.4f}", flush=True)
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def table(rows: list[dict]) -> str:
    """Mean test accuracy (%) per task: start, each strategy, and each strategy's gain over random."""
    lines = [
        "| task | seeds | start (n) | + picks | random | margin | diverse_margin | margin - random | "
        "diverse - random (per seed) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]

        def mean(key: str, mine: list[dict] = mine) -> float:
            return 100 * float(np.mean([r[key] for r in mine]))

        per_seed = " / ".join(f"{100 * (r['diverse_margin'] - r['random']):+.2f}" for r in mine)
        lines.append(
            f"| {task} | {len(mine)} | {mean('start_acc'):.2f} ({mine[0]['n_start']}) | {mine[0]['n_add']} | "
            f"{mean('random'):.2f} | {mean('margin'):.2f} | {mean('diverse_margin'):.2f} | "
            f"{mean('margin') - mean('random'):+.2f} | {mean('diverse_margin') - mean('random'):+.2f} "
            f"({per_seed}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["Banking77Classification"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--start", type=int, default=8, help="labelled examples per class to start from")
    parser.add_argument("--add", type=int, default=2, help="texts picked per class (x the number of classes)")
    parser.add_argument(
        "--include-out-of-scope", action="store_true", help="keep the texts the flag raises among the picks"
    )
    parser.add_argument("--out", default="runs/bench-active")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for task in args.tasks:
        for seed in args.seeds:
            path = out / f"{task}-start{args.start}-add{args.add}-seed{seed}.json"
            if path.exists():  # a rerun skips what it has
                rows.append(json.loads(path.read_text()))
                continue
            row = one(task, seed, args.start, args.add, args.include_out_of_scope)
            path.write_text(json.dumps(row) + "\n")
            rows.append(row)
    print(table(rows))


if __name__ == "__main__":
    main()
