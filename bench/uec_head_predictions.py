"""Do UEC's per-input weights point at the head that is right? Trained heads' own predictions, fused.

`eval.py ensemble=trained-heads` scores each variant's *embedding* with mteb's few-shot probe. This bench
asks the practitioner's question instead: each member is a trained classifier, so fuse their calibrated
class probabilities (uniformly, or with UEC's per-input weights from the members' variances) and compare
with the best head alone, on the full test split. It also measures whether the weights carry per-input
reliability: among test texts where the heads disagree in correctness, how much weight the right heads get.

Members are built exactly as the ensemble builds them (variance scales on held-out pairs, Procrustes
alignment, the runs' cached token states), so the weights are the ones `eval.py ensemble=...` reports.

Usage::

    python bench/uec_head_predictions.py task=Banking77Classification [ensemble=trained-heads] \
        [data_root=../shared/data] [out=report.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.config import MemberScales, load_ensemble_config
from ucse.uec.convolution import convolve, paper_temperature
from ucse.uec.ensemble_members import build_members
from ucse.uec.ensemble_task import task_config
from ucse.uec.label_scales import fit_label_scales, head_outputs


def main(argv: list[str]) -> dict:
    args = dict(a.split("=", 1) for a in argv)
    root = Path(args.get("data_root", "../shared/data"))
    ens = load_ensemble_config(args.get("ensemble", "trained-heads"))
    task = task_config(args["task"], root)
    temperature = ens.temperature or paper_temperature(ens.temperature_family)
    ens.member_scales = MemberScales.none.value  # the label-scaled variant is fitted below, as its own row
    built, members, _, _ = build_members(ens, task, root, torch.device("cpu"), temperature)

    def weights(gauss: list, t: float) -> np.ndarray:  # (N, K) UEC weights at temperature t
        return convolve(gauss, ens.rule, t, True, ens.temperature_mode).weights.double().numpy()

    def acc(p: np.ndarray, y: np.ndarray) -> float:
        return float((p.argmax(1) == y).mean())

    def nll(p: np.ndarray, y: np.ndarray) -> float:
        return float(-np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None)).mean())

    def fuse(w: np.ndarray, probs_k: np.ndarray) -> np.ndarray:  # (N, K), (K, N, C) -> (N, C)
        return (w.T[..., None] * probs_k).sum(0)

    # Chosen on the runs' validation split (the one each head's calibration was fitted on): UEC's T, and the
    # global member weights of the plain weighted average (simplex grid, step 0.1), both by validation NLL.
    val_gauss, val_probs, val_y = head_outputs(members, built, root, "validation")
    grid_t = [0.5, 1.0, 1.8, 3.0, 5.0, 10.0, 20.0, 50.0]
    best_t = min(grid_t, key=lambda t: nll(fuse(weights(val_gauss, t), val_probs), val_y))
    k = len(built)
    grid_w = [np.array(c) / 10 for c in np.ndindex(*(11,) * k) if sum(c) == 10]
    best_w = min(grid_w, key=lambda g: nll(np.tensordot(g, val_probs, 1), val_y))

    # Member-level reliability inside UEC (ensemble option member_scales: labels): relative variance scales
    # chosen on validation by the fused NLL (ucse/uec/label_scales.py).
    best_s, _ = fit_label_scales(val_gauss, val_probs, val_y, ens.rule, temperature, ens.temperature_mode)

    def rescaled(gauss: list, scales: list) -> list:
        return [GaussianEmbeddings(g.mean, g.var * f, g.meta) for g, f in zip(gauss, scales)]

    gauss, probs_k, y = head_outputs(members, built, root, "test")
    w = weights(gauss, temperature)  # (N, K)
    ok = (probs_k.argmax(2) == y).T  # (N, K)
    split = ok.any(1) & ~ok.all(1)  # the heads disagree in correctness on these texts
    fused = {
        "uniform probability average": probs_k.mean(0),
        f"weighted probability average (w = {best_w.round(2).tolist()} on validation)": np.tensordot(
            best_w, probs_k, 1
        ),
        "UEC-weighted probability average": fuse(w, probs_k),
        f"UEC-weighted, T = {best_t:g} on validation": fuse(weights(gauss, best_t), probs_k),
        f"UEC-weighted, member scales {list(best_s)} on validation": fuse(
            weights(rescaled(gauss, best_s), temperature), probs_k
        ),
    }
    rows = {m.member_id: {"accuracy": acc(p, y), "nll": nll(p, y)} for m, p in zip(built, probs_k)}
    rows.update({name: {"accuracy": acc(p, y), "nll": nll(p, y)} for name, p in fused.items()})
    report = {
        "task": task.name,
        "n": len(y),
        "temperature": temperature,
        "temperature_on_validation": best_t,
        "rows": rows,
        "mean_weight": dict(zip([m.member_id for m in built], w.mean(0).round(4).tolist())),
        "disagreements": int(split.sum()),
        # On those texts: mean total weight on the heads that are right, vs their share under uniform weights.
        "weight_on_correct_heads": float((w[split] * ok[split]).sum(1).mean()) if split.any() else None,
        "uniform_share_of_correct_heads": float(ok[split].mean(1).mean()) if split.any() else None,
        "heaviest_head_correct": float(ok[np.arange(len(y)), w.argmax(1)].mean()),
    }
    print(json.dumps(report, indent=1))
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
