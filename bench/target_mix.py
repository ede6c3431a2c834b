"""A known deployment mix: ``calibration.prior=target`` on balanced few-shot rows, against tuned logreg.

A practitioner labels the same number of texts per label (8 or 32, drawn with the seed from the official train
split, as in ``bench/peers.py``) but knows how often each label comes up in the traffic the model will see.
Here that mix is the official train split's (the pool the rows were drawn from: historic traffic), given as
``uncertainty.calibration.target_shares``; each task's official test split is scored as it is. On
AmazonCounterfactual both splits are about four to one; the MASSIVE tasks' splits share an uneven mix;
Banking77's test split is balanced while its train split is not, so there the given mix is the wrong one.

Per task, size and seed it reports accuracy, balanced accuracy and macro-F1 on test of:

- ``auto``: ucse's default (``recipe=auto``, ``head=auto``), probabilities for the training rows' mix;
- ``auto+target``: the same run's head, its profile refitted with ``prior=target`` and the pool's shares (what
  ``ucse calibrate run=... uncertainty.calibration.prior=target uncertainty.calibration.target_shares=...``
  does; no retraining);
- ``auto+em`` (``--em N``, once the runs above exist): the same head, the mix estimated instead of given, by
  EM (Saerens et al. 2002) on the calibrated probabilities of N unlabelled texts drawn from the pool;
- ``logreg`` / ``logreg+target``: ``bench/peers.py``'s independent baseline (unit vectors,
  ``LogisticRegressionCV(Cs=10)``, stratified 5-fold CV) on the same rows, its probabilities as they are and
  multiplied by the target share over the training rows' share, renormalised (the same Bayes correction).

    UCSE_DATA_DIR=../shared/data python bench/target_mix.py --shots 8 32 --seeds 0 1 2
    UCSE_DATA_DIR=../shared/data python bench/target_mix.py --shots 8 32 --seeds 0 1 2 --em 3000   # then

Rows are saved as JSON under ``<out>/rows`` (a rerun skips rows already there); the table is printed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from imbalance import choice, figures, logreg, run_and_refit  # noqa: E402
from peers import outputs_on_test, read, rows_parser, sample, train_ucse  # noqa: E402

METHODS = ("logreg", "logreg+target", "auto", "auto+target", "auto+em")


def ucse_both(task, texts, y, test, seed, out, tag, shares) -> tuple[np.ndarray, np.ndarray, dict]:
    """Probabilities on test of the default run, then of its profile refitted for the target mix."""
    from ucse.config.uncertainty import ClassPrior

    mix = {str(c): float(q) for c, q in enumerate(shares)}
    plain, target, m, _, after = run_and_refit(
        task, texts, y, test, seed, out, tag, prior=ClassPrior.target, target_shares=mix
    )
    held = after.info["class_prior"]["target"]  # held-out rows weighted to the mix, under each prior
    return plain, target, {**choice(m), "heldout_weighted": held}


def em_mix(probs: np.ndarray, train_mix: np.ndarray, iters: int = 1000) -> np.ndarray:
    """(C,) the mix of unlabelled texts by EM (Saerens et al. 2002): q <- mean posterior under q, from pi.

    ``probs``: (N, C) calibrated probabilities for the training mix ``train_mix``. Tried here, not built into
    ucse (few lines; no library of the stack has it).
    """
    q = train_mix.copy()
    for _ in range(iters):
        post = probs * (q / train_mix)
        new = (post / post.sum(1, keepdims=True)).mean(0)
        if np.abs(new - q).max() < 1e-8:
            return new
        q = new
    return q


def ucse_em(task, texts, y, test, seed, out, tag, pool: list[str], n: int) -> tuple[np.ndarray, dict]:
    """Test probabilities of an earlier run's head, its profile refitted for an estimated mix.

    The mix is what EM reads off ``n`` unlabelled pool texts drawn with ``seed``.
    """
    from ucse.config.uncertainty import ClassPrior
    from ucse.pipeline import fit_uncertainty

    train = {"texts": texts, "y": y, "shots": tag}
    run, cfg, data, _, profile = train_ucse(task, train, test, seed, "auto", out, retrain=False)
    enc, outputs = outputs_on_test(run, cfg, data)
    picked = np.random.default_rng(seed).choice(len(pool), min(n, len(pool)), replace=False)
    unlabelled = enc.run_texts([pool[i] for i in picked]).logits
    counts = np.asarray(profile.info["class_prior"]["counts"], dtype=np.float64).clip(min=1.0)
    q = em_mix(profile.calibrator.probs(unlabelled).numpy(), counts / counts.sum())
    cfg.uncertainty.calibration.prior = ClassPrior.target
    cfg.uncertainty.calibration.target_shares = {str(c): float(v) for c, v in enumerate(q) if v > 0}
    target = fit_uncertainty(run, cfg, data)
    return target.calibrator.probs(outputs.logits).numpy(), {"em_shares": q.tolist(), "em_texts": len(picked)}


def shifted(probs: np.ndarray, y: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """(N, C) ``probs`` turned from the training rows' mix to ``shares`` (Bayes: p * q / pi, renormalised)."""
    pi = np.bincount(y, minlength=probs.shape[1]).clip(min=1) / len(y)
    p = probs * shares / pi
    return p / p.sum(1, keepdims=True)


def table(rows: list[dict]) -> str:
    named = " | ".join(f"{m} acc / bal. acc / macro-F1" for m in METHODS)
    head = f"| task | per class | seeds | {named} |"
    lines = [head, "|" + "---|" * (3 + len(METHODS))]
    keys = ("accuracy", "balanced_accuracy", "f1_macro")
    for key in dict.fromkeys((r["task"], r["shots"]) for r in rows):
        mine = [r for r in rows if (r["task"], r["shots"]) == key]
        seeds = sorted({r["seed"] for r in mine})
        cells = []
        for m in METHODS:
            got = [r for r in mine if r["method"] == m]
            mean = [f"{100 * np.mean([r[k] for r in got]):.2f}" for k in keys] if got else ["—"]
            own = sorted({r["seed"] for r in got})
            note = f" (seeds {','.join(map(str, own))})" if got and own != seeds else ""
            cells.append(" / ".join(mean) + note)
        lines.append(f"| {key[0]} | {key[1]} | {','.join(map(str, seeds))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = rows_parser(__doc__, "bench/out/target-mix")
    ap.add_argument(
        "--em", type=int, default=0, help="also: the mix estimated by EM from this many unlabelled pool texts"
    )
    args = ap.parse_args()
    (args.out / "rows").mkdir(parents=True, exist_ok=True)
    (args.out / "features").mkdir(parents=True, exist_ok=True)
    for task in args.tasks:
        test = read(task, "test")
        pool_texts, pool_y = read(task, "train")
        c = int(max(pool_y.max(), test[1].max())) + 1
        shares = np.bincount(pool_y, minlength=c).clip(min=1) / len(pool_y)  # the pool's (traffic's) mix
        for shots in args.shots:
            for seed in args.seeds:
                f = args.out / "rows" / f"{task}-{shots}-s{seed}.json"
                fe = args.out / "rows" / f"{task}-{shots}-s{seed}-em.json"
                texts, y = sample(pool_texts, pool_y, shots, seed)
                if args.em and f.is_file() and not fe.is_file():  # after the run below: its head is reused
                    probs, info = ucse_em(task, texts, y, test, seed, args.out, shots, pool_texts, args.em)
                    base = {"task": task, "shots": shots, "seed": seed, "n_train": len(y)}
                    row = {**base, "method": "auto+em", **figures(probs, test[1]), **info}
                    fe.write_text(json.dumps([row]))
                    print(json.dumps({k: v for k, v in row.items() if k != "em_shares"}), flush=True)
                if f.is_file():
                    continue
                base = {"task": task, "shots": shots, "seed": seed, "n_train": len(y)}
                t0 = time.perf_counter()
                plain, target, info = ucse_both(task, texts, y, test, seed, args.out, shots, shares)
                ucse_s = time.perf_counter() - t0
                out = [
                    {**base, "method": "auto", **figures(plain, test[1]), **info, "train_s": ucse_s},
                    {**base, "method": "auto+target", **figures(target, test[1])},
                ]
                probs = logreg(task, texts, y, test, seed, args.out / "features", None)
                out.append({**base, "method": "logreg", **figures(probs, test[1])})
                out.append({**base, "method": "logreg+target", **figures(shifted(probs, y, shares), test[1])})
                f.write_text(json.dumps(out))
                for r in out:
                    print(json.dumps({k: v for k, v in r.items() if k != "heldout_weighted"}), flush=True)
    rows = [r for p in sorted((args.out / "rows").glob("*.json")) for r in json.loads(p.read_text())]
    print(table(rows))
    print("target shares: each task's official train split; test split scored as it is")


if __name__ == "__main__":
    main()
