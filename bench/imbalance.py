"""Imbalanced training data: ucse's default and ``calibration.prior=balanced`` against tuned logreg.

ucse's default, with and without ``uncertainty.calibration.prior=balanced``, against tuned logistic regression
with and without ``class_weight="balanced"``, on the same frozen model and rows.

For each task and seed, a long-tailed training set is drawn from the official train split: the labels in a
seeded random order get ``--most`` rows down to ``--most / --ratio`` (geometric in the rank), so which labels
are rare has nothing to do with the test split's mix. On the official test split (Banking77's is balanced,
the MASSIVE tasks' follow their own mix) it reports accuracy, balanced accuracy (mean per-label recall) and
macro-F1 of:

- ``auto``: ucse's default (``recipe=auto``, ``head=auto``), probabilities for the training mix;
- ``auto+balanced``: the same run's head, its profile refitted with ``uncertainty.calibration.prior=balanced``
  (what ``ucse calibrate`` does; no retraining);
- ``logreg`` / ``logreg+balanced``: ``bench/peers.py``'s independent baseline (transformers' AutoModel, mean
  pooling, L2 normalisation, ``LogisticRegressionCV(Cs=10)`` with stratified 5-fold CV), without and with
  ``class_weight="balanced"``, on the same rows;
- ``setfit`` (``--setfit``, the ``peers`` extra): ``bench/peers.py``'s SetFit run on the same rows
  (contrastive fine-tuning of the same model, 20 pairs per text, 1 epoch, its default, unweighted head).

    UCSE_DATA_DIR=../shared/data python bench/imbalance.py --seeds 0 1 2

``--natural`` trains on the whole official train split instead, in its own mix (AmazonCounterfactual's is
about four to one, like its test split): what the prior costs where new texts come mixed like the training
rows.

Rows are saved as JSON under ``<out>/rows`` (a rerun skips rows already there); the table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import features, outputs_on_test, read, setfit_probs, train_ucse  # noqa: E402

TASKS = ["Banking77Classification", "MassiveIntentClassification", "MassiveScenarioClassification"]


def long_tail(y: np.ndarray, most: int, ratio: float, seed: int) -> np.ndarray:
    """Row indices: the label of rank r (seeded order) keeps ``round(most * ratio ** (-r / (C - 1)))``."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.unique(y))
    keep = []
    for r, c in enumerate(labels):
        n = max(1, round(most * ratio ** (-r / max(len(labels) - 1, 1))))
        rows = np.flatnonzero(y == c)
        keep += rng.choice(rows, min(n, len(rows)), replace=False).tolist()
    return np.sort(np.asarray(keep))


def figures(probs: np.ndarray, y: np.ndarray) -> dict:
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score

    pred = probs.argmax(1)
    return {
        "accuracy": float(accuracy_score(y, pred)),
        "balanced_accuracy": float(balanced_accuracy_score(y, pred)),
        "f1_macro": float(f1_score(y, pred, average="macro")),
    }


def logreg(task, texts, y, test, seed, cache, class_weight) -> np.ndarray:
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Normalizer

    x_tr, x_te = features(task, "train", texts, cache), features(task, "test", test[0], cache)
    cv = StratifiedKFold(min(5, int(np.bincount(y)[np.unique(y)].min())), shuffle=True, random_state=seed)
    clf = make_pipeline(
        Normalizer(), LogisticRegressionCV(Cs=10, cv=cv, max_iter=3000, class_weight=class_weight)
    )
    clf.fit(x_tr, y)
    probs = np.zeros((len(x_te), int(test[1].max()) + 1))
    probs[:, clf.classes_] = clf.predict_proba(x_te)
    return probs


def run_and_refit(task, texts, y, test, seed, out, tag, **calibration):
    """Train ucse's default on the rows, then refit its profile with other calibration settings.

    ``calibration``: ``uncertainty.calibration`` fields (what ``ucse calibrate`` does; no retraining).

    Returns:
        (test probabilities before, after, the run's metrics, the profile before, the profile after).
    """
    from ucse.pipeline import fit_uncertainty
    from ucse.uncertainty.profile import load_uncertainty_profile

    train = {"texts": texts, "y": y, "shots": tag}
    run, cfg, data, result, _ = train_ucse(task, train, test, seed, "auto", out)
    _, outputs = outputs_on_test(run, cfg, data)
    before = load_uncertainty_profile(run / "head", len(data.label_names))
    for key, value in calibration.items():
        setattr(cfg.uncertainty.calibration, key, value)
    after = fit_uncertainty(run, cfg, data)
    probs = [p.calibrator.probs(outputs.logits).numpy() for p in (before, after)]
    return probs[0], probs[1], result.metrics, before, after


def choice(metrics: dict) -> dict:
    """The head auto shipped and its blend weight, from a run's metrics."""
    return {"head": metrics.get("head"), "weight": metrics.get("selection", {}).get("weight")}


def ucse_both(task, texts, y, test, seed, out, tag) -> tuple[np.ndarray, np.ndarray, dict]:
    """Probabilities on test of the default run, then of its profile refitted for a balanced prior."""
    from ucse.config.uncertainty import ClassPrior

    balanced = {"prior": ClassPrior.balanced}
    plain, shifted, m, profile, _ = run_and_refit(task, texts, y, test, seed, out, tag, **balanced)
    # the held-out figures the summary's offer reads (ucse.summary.prior_line), under each prior
    held = {k: v for k, v in profile.info["class_prior"].items() if k in ("train", "balanced")}
    return plain, shifted, {**choice(m), "heldout": held}


def seen(rows: list[dict]) -> set[str]:
    return {r["method"] for r in rows}


def table(rows: list[dict]) -> str:
    methods = [m for m in ("logreg", "logreg+balanced", "setfit", "auto", "auto+balanced") if m in seen(rows)]
    head = "| task | seeds | " + " | ".join(f"{m} acc / bal. acc / macro-F1" for m in methods) + " |"
    lines = [head, "|" + "---|" * (2 + len(methods))]
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        seeds = sorted({r["seed"] for r in mine if r["method"] != "setfit"})
        cells = []
        for m in methods:
            got = [r for r in mine if r["method"] == m]
            if not got:
                cells.append("—")
                continue
            keys = ("accuracy", "balanced_accuracy", "f1_macro")
            mean = {k: 100 * np.mean([r[k] for r in got]) for k in keys}
            cells.append(" / ".join(f"{mean[k]:.2f}" for k in mean))
        lines.append(f"| {task} | {','.join(map(str, seeds))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=TASKS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--most", type=int, default=64, help="training rows of the commonest label")
    ap.add_argument("--ratio", type=float, default=16.0, help="commonest / rarest label's rows")
    ap.add_argument("--out", type=Path, default=Path("bench/out/imbalance"))
    ap.add_argument("--setfit", action="store_true", help="SetFit too, as its own row file (peers extra)")
    ap.add_argument(
        "--natural", action="store_true", help="the whole official train split, in its own mix (no long tail)"
    )
    args = ap.parse_args()
    (args.out / "rows").mkdir(parents=True, exist_ok=True)
    (args.out / "features").mkdir(parents=True, exist_ok=True)
    tag = "natural" if args.natural else f"lt{args.most}x{args.ratio:g}"
    for task in args.tasks:
        test = read(task, "test")
        all_texts, all_y = read(task, "train")
        for seed in args.seeds:
            f = args.out / "rows" / f"{task}-{tag}-s{seed}.json"
            fs = args.out / "rows" / f"{task}-{tag}-s{seed}-setfit.json"
            idx = np.arange(len(all_y)) if args.natural else long_tail(all_y, args.most, args.ratio, seed)
            texts, y = [all_texts[i] for i in idx], all_y[idx]
            base = {"task": task, "seed": seed, "n_train": len(y), "counts": np.bincount(y).tolist()}
            if args.setfit and not fs.is_file():
                probs, info = setfit_probs({"texts": texts, "y": y}, test, seed, 20)
                row = {**base, "method": "setfit", **figures(probs, test[1]), **info}
                fs.write_text(json.dumps([row]))
                print(json.dumps({k: v for k, v in row.items() if k != "counts"}), flush=True)
            if f.is_file():
                continue
            t0 = time.perf_counter()
            plain, balanced, info = ucse_both(task, texts, y, test, seed, args.out, tag)
            ucse_s = time.perf_counter() - t0
            out = [
                {**base, "method": "auto", **figures(plain, test[1]), **info, "train_s": ucse_s},
                {**base, "method": "auto+balanced", **figures(balanced, test[1]), **info},
            ]
            for cw, name in ((None, "logreg"), ("balanced", "logreg+balanced")):
                probs = logreg(task, texts, y, test, seed, args.out / "features", cw)
                out.append({**base, "method": name, **figures(probs, test[1])})
            f.write_text(json.dumps(out))
            for r in out:
                print(json.dumps({k: v for k, v in r.items() if k != "counts"}), flush=True)
    files = sorted((args.out / "rows").glob(f"*-{tag}-s*.json"))
    rows = [r for p in files for r in json.loads(p.read_text())]
    print(table(rows))


if __name__ == "__main__":
    main()
