"""Uncertainty on small data: abstention at the offered target, sets, empty sets, the out-of-scope keep rate.

For each task, size (8 or 32 examples per class, drawn as bench/peers.py draws them) and seed, ucse's default
(``recipe=auto``, ``head=auto``) is trained through the product's pipeline and its saved profile applied to
the official test split:

- abstention at the default target (error <= 5 %); where that is not certifiable, at the target the warning
  offers (``info.offered_target_error``), refitted from the cached states as ``ucse calibrate`` does: the
  share of texts that abstain and the test error among the answered ones (goal: <= target + 1 point);
- conformal sets (alpha 0.1): coverage, with the band a correct procedure shows at these sizes (3 sd of
  the coverage of one calibration draw, Beta with n validation rows, plus the test sample's noise), set size
  and the share of empty sets (goal: 0 by default);
- the out-of-scope flag: share of in-scope test texts kept (target: tpr 0.95).

``--target-mix`` also refits each run's profile with ``uncertainty.calibration.prior=target`` and the
official train split's label mix as the target (as bench/target_mix.py does; the MASSIVE test splits share
that mix) and measures it the same way, with the flag's keep rate at the weighted threshold and at the plain
quantile of the same held-out scores.

    python -m bench.small_data --tasks Banking77Classification --shots 8 32 --seeds 0

Rows go to ``<out>/rows/*.json`` (a rerun skips rows already there); the table to ``<out>/small_data.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np

from bench.peers import grid, outputs_on_test, read, rows_parser, sample, train_ucse
from bench.peers_table import machine

TASKS = ["Banking77Classification", "MassiveIntentClassification", "MassiveScenarioClassification"]


def measure(profile, outputs, y: np.ndarray) -> dict:
    """What a user sees on the test texts with this profile."""
    res = profile.apply(outputs.mean, outputs.var, outputs.logits, sets=True, pooled=outputs.pooled)
    answered = ~res.abstain
    correct = res.prediction == y
    n_val = profile.info["n_validation"]
    alpha = profile.conformal.alpha
    # One calibration draw's coverage is Beta(k, n + 1 - k) with k = ceil((n + 1)(1 - alpha)): its sd, and
    # the binomial noise of the test texts.
    k = math.ceil((n_val + 1) * (1 - alpha))
    sd = math.hypot(
        math.sqrt(k * (n_val + 1 - k) / ((n_val + 1) ** 2 * (n_val + 2))),
        math.sqrt(alpha * (1 - alpha) / len(y)),
    )
    a = profile.abstain
    return {
        "target": a.target if a is not None else None,
        "certified": bool(a.achievable) if a is not None else None,
        "abstain_share": float(res.abstain.mean()),
        "answered_error": float((~correct[answered]).mean()) if answered.any() else None,
        "accuracy": float(correct.mean()),
        "coverage": float(res.sets[np.arange(len(y)), y].mean()),
        "coverage_band": [float(k / (n_val + 1) - 3 * sd), float(k / (n_val + 1) + 3 * sd)],
        "set_size": float(res.sets.sum(1).mean()),
        "empty_sets": float((res.sets.sum(1) == 0).mean()),
        "ood_keep": None if res.ood is None else float((~res.ood).mean()),
        "n_validation": n_val,
        "score": res.score,
    }


def run_row(
    task: str, shots: str, seed: int, out: Path, retrain: bool = True, target_mix: bool = False
) -> dict:
    from ucse.uncertainty.fit import fit_for_run

    test = read(task, "test")
    t_tr, y_tr = sample(*read(task, "train"), shots, seed)
    train = {"texts": t_tr, "y": y_tr, "shots": shots}
    t0 = time.perf_counter()
    run, cfg, data, _, profile = train_ucse(task, train, test, seed, "auto", out, retrain=retrain)
    train_s = time.perf_counter() - t0
    enc, outputs = outputs_on_test(run, cfg, data)
    y = data.labels("test")
    row = {"default": measure(profile, outputs, y), "train_s": train_s, "n_train": len(y_tr)}
    row["lowest_certifiable_error"] = profile.info.get("lowest_certifiable_error")
    offer = profile.info.get("offered_target_error")
    row["offered_target_error"] = offer
    if offer is not None:  # what `ucse calibrate ... uncertainty.abstain.target_error=<offer>` does
        ucfg = dataclasses.replace(
            cfg.uncertainty, abstain=dataclasses.replace(cfg.uncertainty.abstain, target_error=offer)
        )
        refit = fit_for_run(run, cfg, ucfg, data, enc, previous=profile)
        row["offered"] = measure(refit, outputs, y)
    if target_mix:
        row["target"] = target_measure(task, run, cfg, data, enc, outputs, y, offer, profile)
    return row


def target_measure(task, run, cfg, data, enc, outputs, y, offer, previous) -> dict:
    """The run's profile refitted for the pool's label mix (``ucse calibrate ... prior=target``), measured."""
    from ucse.config.uncertainty import ClassPrior
    from ucse.uncertainty.fit import fit_for_run
    from ucse.uncertainty.keep_threshold import keep_threshold

    pool_y = read(task, "train")[1]
    c = int(max(pool_y.max(), y.max())) + 1
    shares = np.bincount(pool_y, minlength=c).clip(min=1) / len(pool_y)
    u = cfg.uncertainty
    cal = dataclasses.replace(
        u.calibration, prior=ClassPrior.target, target_shares={str(i): float(q) for i, q in enumerate(shares)}
    )
    abstain = u.abstain if offer is None else dataclasses.replace(u.abstain, target_error=offer)
    refit = fit_for_run(
        run, cfg, dataclasses.replace(u, calibration=cal, abstain=abstain), data, enc, previous
    )
    m = measure(refit, outputs, y)
    res = refit.apply(outputs.mean, outputs.var, outputs.logits, sets=False, pooled=outputs.pooled)
    plain = keep_threshold(refit.ood.heldout_scores, refit.ood.tpr)
    m["ood_keep_plain"] = float((res.ood_score <= plain).mean())
    m["ood_threshold"], m["ood_threshold_plain"] = refit.ood.threshold, plain
    return m


def table(rows: list[dict]) -> str:
    head = (
        "| task | shots | seed | val texts | 5 % certified | offered target | abstain | answered error |"
        " coverage (band) | set size | empty sets | ood keep |\n|" + "---|" * 12
    )
    lines = [f"Machine: {machine()}", "", head]
    for r in rows:
        m = r.get("offered") or r["default"]
        err = "—" if m["answered_error"] is None else f"{100 * m['answered_error']:.1f} %"
        lo, hi = m["coverage_band"]
        keep = "—" if m["ood_keep"] is None else f"{m['ood_keep']:.3f}"
        lines.append(
            f"| {r['task'].removesuffix('Classification')} | {r['shots']} | {r['seed']} | "
            f"{m['n_validation']} | "
            f"{'yes' if r['default']['certified'] else 'no'} | "
            f"{'—' if r['offered_target_error'] is None else r['offered_target_error']} | "
            f"{100 * m['abstain_share']:.1f} % | {err} | {m['coverage']:.3f} ({lo:.3f}–{hi:.3f}) | "
            f"{m['set_size']:.2f} | {100 * m['empty_sets']:.1f} % | "
            f"{keep} |"
        )
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    """Per task and size, over its seeds: each goal's count of rows that meet it, and the means."""
    head = (
        "| task | shots | seeds | abstain (mean) | answered error <= target + 1 pt | coverage in band |"
        " coverage (mean) | empty sets (max) | ood keep within 2 pts of 0.95 | ood keep (mean) |\n|"
        + "---|"
        * 10
    )
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["task"], str(r["shots"])), []).append(r.get("offered") or r["default"])
    lines = [head]
    for (task, shots), ms in sorted(groups.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
        n = len(ms)
        # no answered text: no error to exceed
        err_ok = sum(m["answered_error"] is None or m["answered_error"] <= m["target"] + 0.01 for m in ms)
        band_ok = sum(m["coverage_band"][0] <= m["coverage"] <= m["coverage_band"][1] for m in ms)
        keeps = [m["ood_keep"] for m in ms if m["ood_keep"] is not None]
        keep_ok = sum(abs(k - 0.95) <= 0.02 for k in keeps)
        lines.append(
            f"| {task.removesuffix('Classification')} | {shots} | {n} | "
            f"{100 * float(np.mean([m['abstain_share'] for m in ms])):.1f} % | {err_ok} of {n} | "
            f"{band_ok} of {n} | {float(np.mean([m['coverage'] for m in ms])):.3f} | "
            f"{100 * max(m['empty_sets'] for m in ms):.1f} % | {keep_ok} of {len(keeps)} | "
            f"{float(np.mean(keeps)) if keeps else float('nan'):.3f} |"
        )
    return "\n".join(lines)


def target_summary(rows: list[dict]) -> str:
    """Per task and size, the default profile against the same head's refitted for the target mix."""
    head = (
        "| task | shots | seeds | accuracy default / target | ood keep default |"
        " ood keep target: plain quantile / weighted (within 2 pts) | coverage default / target |"
        " abstain default / target |"
        " answered error default / target |\n|" + "---|" * 9
    )
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if "target" in r:
            groups.setdefault((r["task"], str(r["shots"])), []).append(r)
    lines = [head]
    for (task, shots), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
        d, t = [r.get("offered") or r["default"] for r in rs], [r["target"] for r in rs]

        def mean(ms, key, scale=1.0):
            vals = [m[key] for m in ms if m[key] is not None]
            return scale * float(np.mean(vals)) if vals else float("nan")

        ok = sum(abs(m["ood_keep"] - 0.95) <= 0.02 for m in t)
        lines.append(
            f"| {task.removesuffix('Classification')} | {shots} | {len(rs)} | "
            f"{mean(d, 'accuracy', 100):.2f} / {mean(t, 'accuracy', 100):.2f} | {mean(d, 'ood_keep'):.3f} | "
            f"{mean(t, 'ood_keep_plain'):.3f} / {mean(t, 'ood_keep'):.3f} ({ok} of {len(t)}) | "
            f"{mean(d, 'coverage'):.3f} / {mean(t, 'coverage'):.3f} | "
            f"{mean(d, 'abstain_share', 100):.1f} / {mean(t, 'abstain_share', 100):.1f} % | "
            f"{mean(d, 'answered_error', 100):.1f} / {mean(t, 'answered_error', 100):.1f} % |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = rows_parser(__doc__, "bench/out/small_data", seeds=(0,), tasks=TASKS)
    ap.add_argument(
        "--refit", action="store_true", help="rows already there: refit their profiles, do not retrain"
    )
    ap.add_argument("--target-mix", action="store_true", help="also refit for the pool's mix (docstring)")
    args = ap.parse_args()
    (args.out / "rows").mkdir(parents=True, exist_ok=True)
    for seed, shots, task in grid(args):
        f = args.out / "rows" / f"{task}-{shots}-s{seed}.json"
        if f.is_file() != args.refit:
            continue
        old = json.loads(f.read_text()) if args.refit else {}
        row = {"task": task, "shots": shots, "seed": seed}
        row |= run_row(task, shots, seed, args.out, not args.refit, args.target_mix)
        if args.refit:
            row["train_s"] = old["train_s"]  # the training measured when the head was trained
        f.write_text(json.dumps(row))
        print(json.dumps(row), flush=True)
    rows = [json.loads(p.read_text()) for p in sorted((args.out / "rows").glob("*.json"))]
    text = table(rows) + "\n\n" + summary(rows)
    if any("target" in r for r in rows):
        text += "\n\nTarget mix (the official train split's), the same heads:\n\n" + target_summary(rows)
    (args.out / "small_data.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
