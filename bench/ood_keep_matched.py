"""The out-of-scope flag as shipped, retrained: in-scope keep rate at tpr 0.95 and cross-domain AUROC.

Trains the default recipe (``head=auto``) on ``bench/peers.py``'s draw of ``shots`` examples per class (or
the full train + validation splits), then scores the task's test texts (in scope) and another task's test
texts (out of scope) with the run's own flag. Used to check the matched bank
(``ucse.uncertainty.train_split.matched_rows``) against the rows of
``docs/measurements/uncertainty-ood/ood-bank-size.jsonl``. One JSON line per seed.

    UCSE_DATA_DIR=../shared/data python bench/ood_keep_matched.py Banking77Classification 8 0 1 2
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from ood_bank_size import OTHER, features, scores  # noqa: E402

from ucse.inference.classifier import UcseClassifier  # noqa: E402


def measure(task: str, shots: str, seed: int, out: Path) -> dict:
    test = peers.read(task, "test")
    texts, y = peers.sample(*peers.read(task, "train"), shots, seed)
    by_split = [("train", texts)]
    if shots == "full":  # as bench/peers.py: train + validation where the task has one
        t_va, y_va = peers.read(task, "validation")
        if t_va:
            by_split.append(("validation", t_va))
            texts, y = texts + t_va, np.concatenate([y, y_va])
    train = {"texts": texts, "y": y, "shots": shots, "by_split": by_split}
    run, *_ = peers.train_ucse(task, train, test, seed, "auto", out)
    clf = UcseClassifier.from_pretrained(run, device="cpu")
    det = clf.profile_.ood
    other = peers.read(OTHER.get(task, "Banking77Classification"), "test")[0]
    d_in, d_out = (scores(det, features(clf, batch), det.stats.bank) for batch in (test[0], other))
    auroc = roc_auc_score(np.r_[np.zeros(len(d_in)), np.ones(len(d_out))], np.r_[d_in, d_out])
    return {
        "task": task,
        "shots": shots,
        "seed": seed,
        "bank_rows": int(det.stats.bank.shape[0]),
        "threshold": round(float(det.threshold), 5),
        "keep": round(float(np.mean(d_in <= det.threshold)), 4),
        "auroc_cross": round(float(auroc), 4),
    }


def main() -> None:
    peers.print_seed_rows(measure, "ood-keep-matched")


if __name__ == "__main__":
    main()
