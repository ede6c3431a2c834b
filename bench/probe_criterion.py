"""How the probe's C is chosen, measured: cross-validated accuracy vs log-loss, against the baseline's grid.

On the fp32 mean-pooled, L2-normalised all-MiniLM-L6-v2 vectors of ``bench/peers.py`` (same cache), for each
task, size (examples per class, drawn as peers.py draws them) and seed, fits ``LogisticRegressionCV`` three
ways on the same stratified folds and scores the official test split:

- ``base``: the practitioner's baseline of peers.py (``Cs=10``, i.e. 1e-4..1e4, accuracy);
- ``nll13``: ucse's grid (``ucse.training.logreg.C_GRID``) chosen by log-loss (ucse before this bench);
- ``acc13``: ucse's grid chosen by accuracy (ucse now).

Prints, per task and size, each variant's mean test accuracy, its paired difference to ``base`` with the
standard error over seeds, and the median chosen C.

    python bench/probe_criterion.py --tasks MassiveScenarioClassification --shots 8 32 --seeds 10
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from peers import TASKS, features, read, sample
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold

from ucse.training.logreg import C_GRID

VARIANTS = {
    "base": {"Cs": 10},
    "nll13": {"Cs": C_GRID, "scoring": "neg_log_loss"},
    "acc13": {"Cs": C_GRID, "scoring": "accuracy"},
}


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=TASKS)
    ap.add_argument("--shots", nargs="+", default=["8", "32"])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1")
    ap.add_argument("--out", type=Path, default=Path("bench/out/peers"))
    args = ap.parse_args()
    cache = args.out / "features"
    cache.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")  # lbfgs convergence notes at extreme C: the same for every variant
    for task in args.tasks:
        test_texts, y_te = read(task, "test")
        x_te = unit(features(task, "test", test_texts, cache))
        for shots in args.shots:
            acc: dict[str, list[float]] = {k: [] for k in VARIANTS}
            cs: dict[str, list[float]] = {k: [] for k in VARIANTS}
            for seed in range(args.seeds):
                texts, y = sample(*read(task, "train"), shots, seed)
                x = unit(features(task, "train", texts, cache))
                folds = min(5, int(np.bincount(y).min()))
                for name, kw in VARIANTS.items():
                    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
                    clf = LogisticRegressionCV(cv=cv, max_iter=3000, **kw).fit(x, y)
                    acc[name].append(100 * float((clf.predict(x_te) == y_te).mean()))
                    cs[name].append(float(clf.C_[0]))
            base = np.array(acc["base"])
            for name in VARIANTS:
                d = np.array(acc[name]) - base
                se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
                print(
                    f"{task} {shots}/class {name:6s} acc {np.mean(acc[name]):6.2f}  "
                    f"vs base {d.mean():+.2f} (se {se:.2f})  median C {np.median(cs[name]):.3g}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
