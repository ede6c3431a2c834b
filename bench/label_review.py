"""Label review: do the rows ucse ranks most doubtful find labels flipped on purpose?

For each task, size (8 or 32 examples per class, drawn as bench/peers.py draws them) and seed, a share of the
rows (``--rate``, default 10 %) get another label, drawn uniformly; ucse's default (``recipe=auto``,
``head=auto``) is trained on the noisy rows through the product's pipeline, and its ``label_review.csv``
ranking (the held-out rows by the calibrated probability of their given label, from the models that did not
train on each row) is scored against the flips: AUROC, precision among the top k (k = the number of flips)
and precision / recall of the rows the summary counts (own label under ``DOUBT``). The baseline ranks the same
rows by a tuned logistic regression's cross-validated probabilities on the same frozen pooled vectors
(unit-normalised, C by ``LogisticRegressionCV`` on all the rows, then 5-fold ``cross_val_predict``: the
practitioner's version of the same idea; the C choice sees every fold, which favours the baseline).
``--rate 0`` measures the share of clean rows the summary would count. Each run is then reviewed whole by
``ucse review`` (every row outside test, cross-fitted probes at the run's C), scored the same way.

    UCSE_DATA_DIR=../shared/data python bench/label_review.py --shots 8 32 --seeds 0 1 2

Rows go to ``<out>/rows/*.json`` (a rerun skips rows already there); the table is printed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import grid, read, rows_parser, sample, train_ucse  # noqa: E402


def scores(doubt: np.ndarray, flipped: np.ndarray, cut: float) -> dict:
    """How a ranking by ``doubt`` (the given label's probability, low = doubtful) finds the flipped rows."""
    from sklearn.metrics import roc_auc_score

    k = int(flipped.sum())
    counted = doubt < cut
    out = {"counted": int(counted.sum()), "counted_share": float(counted.mean())}
    if k:
        top = np.argsort(doubt, kind="stable")[:k]
        out |= {
            "auroc": float(roc_auc_score(flipped, -doubt)),
            "precision_at_k": float(flipped[top].mean()),
            "counted_precision": float(flipped[counted].mean()) if counted.any() else None,
            "counted_recall": float(flipped[counted].sum() / k),
        }
    return out


def logreg_doubt(x: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """The given label's cross-validated probability under a tuned logistic regression on unit vectors."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    folds = max(2, min(5, int(np.bincount(y)[np.bincount(y) > 0].min())))  # stratified: at most the rarest
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    c = LogisticRegressionCV(Cs=10, cv=cv, max_iter=2000).fit(x, y).C_[0]
    p = cross_val_predict(LogisticRegression(C=c, max_iter=2000), x, y, cv=cv, method="predict_proba")
    return p[np.arange(len(y)), np.searchsorted(np.unique(y), y)]


def run_row(task: str, shots: str, seed: int, rate: float, out: Path) -> dict:
    from ucse.config.run_layout import RunFolder
    from ucse.training.run import build_states
    from ucse.uncertainty.label_review import DOUBT

    texts, y = sample(*read(task, "train"), shots, seed)
    c = int(y.max()) + 1
    rng = np.random.default_rng(1000 + seed)
    flip = rng.random(len(y)) < rate
    noisy = y.copy()
    noisy[flip] = (y[flip] + rng.integers(1, c, int(flip.sum()))) % c  # another label, uniformly
    t0 = time.perf_counter()
    tag = f"{shots}-noise{rate:g}"
    run, cfg, data, _, _ = train_ucse(
        task, {"texts": texts, "y": noisy, "shots": tag}, read(task, "test"), seed, "auto", out
    )
    train_s = time.perf_counter() - t0
    review = list(csv_rows(RunFolder(run).label_review))
    was_flipped = {t: bool(f) for t, f in zip(texts, flip)}
    rows = [r["text"] for r in review]
    flipped = np.array([was_flipped[t] for t in rows])
    doubt = np.array([float(r["p_label"]) for r in review])
    row = {"n_rows": len(rows), "n_flipped": int(flipped.sum()), "train_s": train_s}
    row["ucse"] = scores(doubt, flipped, DOUBT)
    # the baseline on the same rows: the frozen pooled vectors ucse cached, in the review's row order
    from ucse.core.encoder import UcseEncoder

    enc = UcseEncoder.from_dir(run / "head")
    states, _ = build_states(cfg, enc.backbone, data)
    every = data.texts("train") + data.texts("validation")
    pooled = np.concatenate([enc.run_states(states[s]).pooled for s in ("train", "validation")])
    at = {t: i for i, t in enumerate(every)}
    x = pooled[[at[t] for t in rows]].astype(np.float64)
    given = np.array([data.label_names.index(r["label"]) for r in review])
    row["logreg"] = scores(logreg_doubt(x, given, seed), flipped, DOUBT)
    # `ucse review`: every row outside test, by cross-fitted probes at the run's C
    from ucse.uncertainty.review_run import review_run

    t0 = time.perf_counter()
    path, _ = review_run(run, data=data)
    every_row = list(csv_rows(path))
    row["all_rows_s"] = time.perf_counter() - t0
    flipped_all = np.array([was_flipped[r["text"]] for r in every_row])
    doubt_all = np.array([float(r["p_label"]) for r in every_row])
    row["all_rows"] = {"n_rows": len(every_row), "n_flipped": int(flipped_all.sum())}
    row["all_rows"] |= scores(doubt_all, flipped_all, DOUBT)
    return row


def csv_rows(path: Path):
    import csv

    with path.open(newline="", encoding="utf-8") as fh:
        yield from csv.DictReader(fh)


def table(rows: list[dict]) -> str:
    head = (
        "| task | per class | noise | seeds | rows (flipped) | AUROC ucse / logreg |"
        " precision@k ucse / logreg | counted (share) | counted precision / recall |"
        " `ucse review`: rows (flipped), AUROC, counted precision / recall, s |\n|" + "---|" * 10
    )
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["task"], str(r["shots"]), r["rate"]), []).append(r)
    lines = [head]

    def m(ms, key):
        vals = [x[key] for x in ms if x.get(key) is not None]
        return float(np.mean(vals)) if vals else float("nan")

    for (task, shots, rate), rs in sorted(groups.items()):
        u, g = [r["ucse"] for r in rs], [r["logreg"] for r in rs]
        a = [r["all_rows"] for r in rs if "all_rows" in r]
        every = (
            f"{m(a, 'n_rows'):.0f} ({m(a, 'n_flipped'):.1f}), {m(a, 'auroc'):.3f}, "
            f"{m(a, 'counted_precision'):.3f} / {m(a, 'counted_recall'):.3f}, {m(rs, 'all_rows_s'):.1f}"
            if a
            else "—"
        )
        lines.append(
            f"| {task.removesuffix('Classification')} | {shots} | {rate:g} | {len(rs)} | "
            f"{m(rs, 'n_rows'):.0f} ({m(rs, 'n_flipped'):.1f}) | {m(u, 'auroc'):.3f} / {m(g, 'auroc'):.3f} | "
            f"{m(u, 'precision_at_k'):.3f} / {m(g, 'precision_at_k'):.3f} | "
            f"{m(u, 'counted'):.1f} ({100 * m(u, 'counted_share'):.1f} %) | "
            f"{m(u, 'counted_precision'):.3f} / {m(u, 'counted_recall'):.3f} | {every} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = rows_parser(__doc__, "bench/out/label_review")
    ap.add_argument("--rate", type=float, default=0.1, help="share of rows given another label")
    args = ap.parse_args()
    (args.out / "rows").mkdir(parents=True, exist_ok=True)
    for seed, shots, task in grid(args):
        f = args.out / "rows" / f"{task}-{shots}-s{seed}-r{args.rate:g}.json"
        if f.is_file():
            continue
        row = {"task": task, "shots": shots, "seed": seed, "rate": args.rate}
        row |= run_row(task, shots, seed, args.rate, args.out)
        f.write_text(json.dumps(row))
        print(json.dumps(row), flush=True)
    rows = [json.loads(p.read_text()) for p in sorted((args.out / "rows").glob("*.json"))]
    print(table(rows))


if __name__ == "__main__":
    main()
