"""How much a text's answer depends on the texts predicted with it, under bf16 and fp32.

    UCSE_DATA_DIR=../shared/data .venv/bin/python bench/batch_companions.py --run <a run folder>

Predicts the official Banking77 test texts in one call, then every ``--every``-th of them in a call of their
own (other batch companions, so other padding), under the run's precision and under ``precision=fp32``, and
prints per precision: the largest differences of confidence and out-of-scope score between the two calls, how
many labels, abstentions and out-of-scope flags changed, and the seconds of the full call.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from ucse.inference.classifier import UcseClassifier

ROOT = Path(__file__).resolve().parents[1]


def answers(clf: UcseClassifier, texts: list[str]) -> dict[str, np.ndarray]:
    rows = clf.predict_with_uncertainty(texts)
    return {
        "label": np.array([str(r["label"]) for r in rows]),
        "confidence": np.array([r["confidence"] for r in rows], dtype=np.float64),
        "abstain": np.array([r["abstain"] for r in rows]),
        "ood": np.array([bool(r["ood"]) for r in rows]),
        "ood_score": np.array([r["ood_score"] or 0.0 for r in rows], dtype=np.float64),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--every", type=int, default=7)
    args = ap.parse_args()
    root = Path(os.environ.get("UCSE_DATA_DIR", ROOT.parent / "shared" / "data"))
    path = root / "Banking77Classification" / "test.jsonl"
    texts = [json.loads(line)["text"] for line in path.open()]
    picked = list(range(0, len(texts), args.every))
    for precision in (None, "fp32"):
        clf = UcseClassifier.from_pretrained(args.run, device="cpu", precision=precision, warn=False)
        t = time.perf_counter()
        whole = answers(clf, texts)
        seconds = time.perf_counter() - t
        alone = answers(clf, [texts[i] for i in picked])
        sub = {k: v[picked] for k, v in whole.items()}
        name = precision or f"the run's ({clf.encoder_.backbone.precision.value})"
        print(
            f"{name}: {len(texts)} texts in {seconds:.1f} s; {len(picked)} of them predicted alone: "
            f"max |confidence diff| {np.abs(sub['confidence'] - alone['confidence']).max():.2e}, "
            f"max |ood_score diff| {np.abs(sub['ood_score'] - alone['ood_score']).max():.2e}, "
            f"changed: {int((sub['label'] != alone['label']).sum())} labels, "
            f"{int((sub['abstain'] != alone['abstain']).sum())} abstentions, "
            f"{int((sub['ood'] != alone['ood']).sum())} flags"
        )


if __name__ == "__main__":
    main()
