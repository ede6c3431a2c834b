"""The estimator and the library's start-up, measured in one run.

    UCSE_DATA_DIR=../shared/data .venv/bin/python bench/estimator.py --run <a Banking77 run folder>

Prints:
  A. seconds of ``import ucse; ucse.UcseClassifier`` in a fresh interpreter, and whether Lightning,
     ``datasets`` or ``mteb`` were imported; then ``from_pretrained(run)`` + the first ``predict``.
  B. ``cross_val_score`` (3 stratified folds) on a Banking77 slice (``--intents`` intents x ``--per-intent``
     training texts, real MiniLM) of ``UcseClassifier(head=logreg)`` and ``UcseClassifier(head=auto)``
     beside scikit-learn's ``LogisticRegressionCV`` on the same frozen features (ucse's pooled, L2-normalised
     states), with the seconds each took.
  C. ``ucse calibrate`` on ``--run`` (a copy of it: the run itself is not changed), in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def startup(run: Path | None) -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import ucse; ucse.UcseClassifier; "
        "heavy = [m for m in ('lightning', 'datasets', 'mteb') if m in sys.modules]; "
        "print(round(time.perf_counter() - t, 2), heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    print(
        f"A. import ucse; ucse.UcseClassifier: {out.split()[0]} s; "
        f"heavy modules imported: {out.split(' ', 1)[1].strip()}"
    )
    if run is None:
        return
    code = (
        "import time; t = time.perf_counter(); import ucse; "
        f"clf = ucse.UcseClassifier.from_pretrained({str(run)!r}, device='cpu'); t1 = time.perf_counter(); "
        "clf.predict(['I still have not received my new card']); t2 = time.perf_counter(); "
        "print(round(t1 - t, 2), round(t2 - t1, 3))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    print(f"   import + from_pretrained: {out[0]} s; first predict (one text): {out[1]} s")


def estimator(intents: int, per_intent: int, heads: list[str]) -> None:
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from ucse.inference.classifier import UcseClassifier
    from ucse.training.logreg import probe_features

    root = Path(os.environ.get("UCSE_DATA_DIR", ROOT.parent / "shared" / "data"))
    rows = [json.loads(line) for line in (root / "Banking77Classification" / "train.jsonl").open()]
    names = sorted({r["label_text"] for r in rows})[:intents]
    picked = [r for n in names for r in [r for r in rows if r["label_text"] == n][:per_intent]]
    texts, y = [r["text"] for r in picked], np.asarray([r["label_text"] for r in picked], dtype=object)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    print(
        f"B. Banking77, {intents} intents x {per_intent} texts, "
        "3-fold cross_val_score (accuracy, mean of folds)"
    )
    fitted = None
    for head in heads:
        t = time.perf_counter()
        est = UcseClassifier(backbone="minilm-l6", head=head, device="cpu")
        scores = cross_val_score(est, texts, y, cv=folds)
        print(
            f"   UcseClassifier(head={head}): {100 * scores.mean():.2f} %  ({time.perf_counter() - t:.1f} s)"
        )
        if fitted is None:
            fitted = est.fit(texts, y)
    feats = probe_features(fitted.encoder_.states_for(texts), fitted.encoder_.backbone.cfg.pooling)
    t = time.perf_counter()
    ref = cross_val_score(LogisticRegressionCV(Cs=10, max_iter=2000), feats, y, cv=folds)
    print(
        f"   LogisticRegressionCV(Cs=10), same features: {100 * ref.mean():.2f} %  "
        f"({time.perf_counter() - t:.1f} s)"
    )


def calibrate(run: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(run, copy)
        t = time.perf_counter()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "ucse",
                "calibrate",
                f"run={copy}",
                "uncertainty.abstain.target_error=0.1",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        print(f"C. ucse calibrate uncertainty.abstain.target_error=0.1: {time.perf_counter() - t:.1f} s")
        print("   " + "\n   ".join(out.strip().splitlines()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, help="a finished Banking77 run (for A's load and C)")
    ap.add_argument("--intents", type=int, default=10)
    ap.add_argument("--per-intent", type=int, default=40)
    ap.add_argument("--skip-cv", action="store_true")
    ap.add_argument("--heads", nargs="+", default=["logreg", "auto"], help="UcseClassifier heads for part B")
    args = ap.parse_args()
    startup(args.run)
    if not args.skip_cv:
        estimator(args.intents, args.per_intent, args.heads)
    if args.run is not None:
        calibrate(args.run)


if __name__ == "__main__":
    main()
