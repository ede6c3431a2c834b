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

from ucse.data import load_classification
from ucse.evaluation.evaluate import load_run
from ucse.uec.config import AlignMode, load_ensemble_config
from ucse.uec.convolution import convolve, paper_temperature
from ucse.uec.ensemble_members import align_members, build_member, fit_pairs
from ucse.uec.ensemble_task import task_config
from ucse.uncertainty.profile import load_uncertainty_profile


def main(argv: list[str]) -> dict:
    args = dict(a.split("=", 1) for a in argv)
    root = Path(args.get("data_root", "../shared/data"))
    ens = load_ensemble_config(args.get("ensemble", "trained-heads"))
    task = task_config(args["task"], root)
    built = []
    for m in ens.members:
        m.head_dir = (m.head_dir or "").replace("{task}", task.name)
        pairs = fit_pairs(m.fit, task, root, lambda name: task_config(name, root))
        built.append(build_member(m, pairs, torch.device("cpu"), ens.calibrate, task.name, root)[0])
    members, _ = align_members(built, AlignMode(ens.align), pairs.texts())
    _, run_cfg = load_run(Path(built[0].head_dir).parent, str(root))
    data = load_classification(run_cfg.task, run_cfg.data, run_cfg.seed)  # the heads' own label ids
    texts, y = data.texts("test"), np.asarray(data.labels("test"))  # (N,)
    temperature = ens.temperature or paper_temperature(ens.temperature_family)
    weights = convolve(
        [m.encode(texts) for m in members], ens.rule, temperature, True, ens.temperature_mode
    ).weights
    w = weights.double().numpy()  # (N, K)
    probs, correct = [], []
    for m in built:  # the heads' own (calibrated) classifiers, in their own label order = the data's
        profile = load_uncertainty_profile(m.head_dir)
        logits = profile.calibrator.logits(m.encoder.encode_gaussian(texts).logits)
        p = torch.softmax(logits.double(), dim=1).numpy()  # (N, C)
        probs.append(p)
        correct.append(p.argmax(1) == y)
    probs_k = np.stack(probs)  # (K, N, C)
    ok = np.stack(correct).T  # (N, K)

    def acc(p: np.ndarray) -> float:
        return float((p.argmax(1) == y).mean())

    def nll(p: np.ndarray) -> float:
        return float(-np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None)).mean())

    uniform = probs_k.mean(0)
    uec = (w.T[..., None] * probs_k).sum(0)
    split = ok.any(1) & ~ok.all(1)  # the heads disagree in correctness on these texts
    rows = {m.member_id: {"accuracy": acc(p), "nll": nll(p)} for m, p in zip(built, probs)}
    rows["uniform probability average"] = {"accuracy": acc(uniform), "nll": nll(uniform)}
    rows["UEC-weighted probability average"] = {"accuracy": acc(uec), "nll": nll(uec)}
    report = {
        "task": task.name,
        "n": len(y),
        "temperature": temperature,
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
