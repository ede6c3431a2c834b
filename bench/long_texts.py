"""Long texts read whole (``backbone.long_texts=windows``) against their first ``max_length`` tokens.

A synthetic check of the mechanism, not a benchmark of long-document classification (no long-document task
is at hand offline): each document is ``--filler`` Banking77 training texts of labels outside the task,
with one text of the task's label put at a uniformly drawn place among them, so the deciding sentence is
past the backbone's 512 tokens in part of the documents. The same documents, MiniLM-L6, ucse's default
(``head=auto``) trained with ``long_texts=truncate`` and ``=windows``, and a tuned logistic regression on
each run's own pooled vectors (``head=logreg``); test accuracy and the share of test documents whose deciding
sentence starts past the first window.

Usage: UCSE_DATA_DIR=../shared/data python bench/long_texts.py [--labels 10] [--per-label 40] [--filler 60]
       [--modes truncate windows]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(os.environ.get("UCSE_DATA_DIR", "../shared/data")) / "Banking77Classification"


def read(split: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{split}.jsonl").open()]


def documents(rows: list[dict], task: list[str], per_label: int, filler: int, rng) -> tuple[list, list, list]:
    """(texts, labels, the deciding sentence's start in words) of ``per_label`` documents per task label."""
    by_label: dict[str, list[str]] = {}
    for r in rows:
        by_label.setdefault(r["label_text"], []).append(r["text"])
    others = [t for name, ts in by_label.items() if name not in task for t in ts]
    texts, labels, starts = [], [], []
    for name in task:
        pool = by_label[name]
        for _ in range(per_label):
            body = [others[i] for i in rng.choice(len(others), filler, replace=False)]
            at = int(rng.integers(0, filler + 1))
            words_before = sum(len(s.split()) for s in body[:at])
            body.insert(at, pool[int(rng.integers(len(pool)))])
            texts.append(" ".join(body))
            labels.append(name)
            starts.append(words_before)
    return texts, labels, starts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels", type=int, default=10)
    ap.add_argument("--per-label", type=int, default=40)
    ap.add_argument("--test-per-label", type=int, default=20)
    ap.add_argument("--filler", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", nargs="+", default=["truncate", "windows"], choices=["truncate", "windows"])
    args = ap.parse_args()
    import ucse
    from ucse.backbone.encoder import FrozenBackbone
    from ucse.config import build_config

    rng = np.random.default_rng(args.seed)
    train_rows, test_rows = read("train"), read("test")
    names = sorted({r["label_text"] for r in train_rows})
    task = sorted(rng.choice(names, args.labels, replace=False).tolist())
    train = documents(train_rows, task, args.per_label, args.filler, rng)
    test = documents(test_rows, task, args.test_per_label, args.filler, rng)
    backbone = FrozenBackbone(build_config([]).backbone)
    lengths = backbone.token_lengths(test[0])  # truncated at max_length: where the first window ends
    full = FrozenBackbone(build_config(["backbone.long_texts=windows"]).backbone).token_lengths(test[0])
    # the deciding sentence starts past the first window: its words-before, tokenised, reach max_length
    before = [" ".join(t.split()[:s]) for t, s in zip(test[0], test[2])]
    past = float(np.mean(backbone.token_lengths([b or "x" for b in before]) >= backbone.max_length - 1))
    print(
        f"labels {task}\ndocuments: train {len(train[0])}, test {len(test[0])}; test tokens median "
        f"{int(np.median(full))} (max {int(full.max())}), first window {backbone.max_length}; "
        f"deciding sentence past the first window in {past:.1%} of test documents"
    )
    assert (lengths <= backbone.max_length).all()
    out = Path(tempfile.mkdtemp(prefix="ucse-long-"))
    print("| long_texts | head | test accuracy | train s |\n|---|---|---|---|")
    for mode in args.modes:
        for head in ("auto", "logreg"):
            t0 = time.perf_counter()
            clf = ucse.UcseClassifier(
                head=head,
                output_dir=str(out / f"{mode}-{head}"),
                overrides={"backbone.long_texts": mode, "seed": args.seed},
            ).fit(train[0], train[1])
            secs = time.perf_counter() - t0
            acc = float(np.mean(clf.predict(test[0]) == np.asarray(test[1])))
            print(f"| {mode} | {head} | {acc:.4f} | {secs:.0f} |", flush=True)


if __name__ == "__main__":
    main()
