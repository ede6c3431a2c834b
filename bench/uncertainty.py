"""Which uncertainty signal works: AURC, OOD, calibration, conformal sets, abstention; sigma ablations.

Usage (data from ``UCSE_DATA_DIR`` or ``data.root=``; take the heavy lock):
    python -m bench.uncertainty out=runs/bench-uncertainty seeds=3 variants=default [tasks=A,B] [heldout=0.25]
    python -m bench.uncertainty out=runs/bench-uncertainty seeds=1 \
        variants=kl0,kl1e-2,klmean,dropout0.1,logvar-4

For every (task, variant, seed) it trains the full method (``textcnn`` head, UCL + LCL, the paper's recipe)
with the variant's overrides, fits the uncertainty profile on validation (``fit_run_uncertainty``) and
measures on test: accuracy, ECE / NLL before and after calibration, AURC and E-AURC of every score,
selective error and coverage of the saved threshold, conformal coverage and set size, sigma's spread, and
OOD AUROC / FPR@95%TPR of every score for cross-domain texts (Banking77 <-> MASSIVE) and, with
``heldout=<fraction>``, for classes held out of training (``data.exclude_labels``). Each run's figures go
to ``<run>/bench.json`` (reused on a rerun); ``<out>/summary.md`` gathers them.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from ucse.backbone.cache import SubsetStates
from ucse.config import build_config, from_yaml
from ucse.config.run_layout import RunFolder
from ucse.config.uncertainty import OodScore
from ucse.core.encoder import UcseEncoder
from ucse.data import load_classification
from ucse.heads import bottleneck
from ucse.training import train
from ucse.training.auto_run import read_heldout
from ucse.training.run import build_states, task_pool
from ucse.uncertainty.calibration import calibration_metrics
from ucse.uncertainty.fit import fit_run_uncertainty
from ucse.uncertainty.ood import fpr_at_tpr, ood_auroc
from ucse.uncertainty.ood_detector import OodDetector
from ucse.uncertainty.profile import load_uncertainty_profile
from ucse.uncertainty.selective import aurc, e_aurc
from ucse.uncertainty.train_split import encode_splits, fit_run_ood

log = logging.getLogger("bench.uncertainty")
TASKS = [
    "AmazonCounterfactualClassification",
    "Banking77Classification",
    "MassiveIntentClassification",
    "MassiveScenarioClassification",
]
# Binary tasks: the held-out-class setting does not apply to them.
TWO_LABEL_TASKS = {"AmazonCounterfactualClassification"}
# Cross-domain OOD: a head of the key task scores the test texts of the value task.
CROSS = {
    "Banking77Classification": "MassiveIntentClassification",
    "MassiveIntentClassification": "Banking77Classification",
    "MassiveScenarioClassification": "Banking77Classification",
}
D_MINILM = 384
# Variants: train overrides, plus an optional initial bias of the log-variance branch (bench-only knob).
VARIANTS: dict[str, tuple[list[str], float | None]] = {
    "default": ([], None),
    "kl0": (["loss.kl_weight=0"], None),
    "kl1e-2": (["loss.kl_weight=1e-2"], None),
    "kl1e-1": (["loss.kl_weight=1e-1"], None),
    # KL averaged over D instead of summed: the same loss as lambda_kl / D.
    "klmean": ([f"loss.kl_weight={1e-3 / D_MINILM:.6g}"], None),
    "dropout0.1": (["head.dropout=0.1"], None),
    "logvar-4": ([], -4.0),
}


def killed_run_flags(run_dir: Path) -> list[str]:
    """A run killed before ``metrics.json``: resume it from ``last.ckpt``, or start it afresh without one."""
    if not run_dir.exists():
        return []
    return ["ckpt_path=last"] if (run_dir / "checkpoints" / "last.ckpt").is_file() else ["overwrite=true"]


@contextlib.contextmanager
def log_var_bias(value: float | None) -> Iterator[None]:
    """Initialise every log-variance branch's bias to ``value`` (sigma_0 = exp(value / 2)) while training."""
    if value is None:
        yield
        return
    original = bottleneck.GaussianBottleneck.__init__

    def init(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        if self.log_var is not None:
            torch.nn.init.constant_(self.log_var.bias, value)

    bottleneck.GaussianBottleneck.__init__ = init
    try:
        yield
    finally:
        bottleneck.GaussianBottleneck.__init__ = original


def ood_detectors(run_dir: Path, cfg, encoder, data, profile) -> dict[str, OodDetector]:
    """Every out-of-scope score's flag, fitted the way ``ucse train`` fits the saved one (same rows, tpr)."""
    read = read_heldout(RunFolder(run_dir).heldout, len(data.label_names))
    heldout, dist = (None, None) if read is None else ((read.outputs, read.labels), read.distances)
    outs = encode_splits(cfg, encoder, data, ("train", "validation"))
    held = outs["validation"] if heldout is None else heldout[0]
    probs = profile.calibrator.probs(held.logits)
    base = cfg.uncertainty.ood
    return {
        s.value: fit_run_ood(
            dataclasses.replace(base, score=s),
            data,
            outs,
            held,
            probs,
            heldout is not None,
            cfg.uncertainty.seed,
            held_distances=dist,
        )
        for s in OodScore
        if s is not OodScore.auto
    }


def ood_metrics(profile, detectors, encoder, out_in, states_out) -> dict:
    """AUROC and FPR@95 of every uncertainty score and every out-of-scope flag's score (``ood:<name>``)."""
    out_ood = encoder.run_states(states_out)
    s_in = profile.scores(out_in.mean, out_in.var, out_in.logits)
    s_out = profile.scores(out_ood.mean, out_ood.var, out_ood.logits)
    for name, det in detectors.items():
        s_in[f"ood:{name}"] = det.scores(
            det.features(out_in.mean, out_in.pooled), profile.calibrator.probs(out_in.logits), out_in.logits
        )
        s_out[f"ood:{name}"] = det.scores(
            det.features(out_ood.mean, out_ood.pooled),
            profile.calibrator.probs(out_ood.logits),
            out_ood.logits,
        )
    res = {k: {"auroc": ood_auroc(s_in[k], s_out[k]), "fpr95": fpr_at_tpr(s_in[k], s_out[k])} for k in s_in}
    for name, det in detectors.items():  # the flag itself: share of OOD texts flagged at its threshold
        res[f"ood:{name}"]["flagged"] = float((s_out[f"ood:{name}"] > det.threshold).double().mean())
    return res


def _full_pool_states(cfg, encoder):
    """States of the task's full pool (no labels held out): cached once per task, shared by every seed."""
    full = copy.deepcopy(cfg)
    full.data.exclude_labels = None
    data = load_classification(full.task, full.data, full.seed)
    states, _ = build_states(full, encoder.backbone, data)
    return states["train"].base, {t: i for i, t in enumerate(task_pool(data))}


def measure(run_dir: Path) -> dict:
    """Every figure of one run (see the module docstring)."""
    cfg = from_yaml(run_dir / "config.yaml")
    encoder = UcseEncoder.from_dir(run_dir / "head")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    ood_texts = list(data.ood["text"]) if getattr(data, "ood", None) is not None else None
    if ood_texts is None:
        states, _ = build_states(cfg, encoder.backbone, data)
        test_states = states["test"]
    else:  # held-out labels: test and OOD texts are rows of the full task's cached pool
        base, row = _full_pool_states(cfg, encoder)
        test_states = SubsetStates(base, [row[t] for t in data.texts("test")])
        ood_states = SubsetStates(base, [row[t] for t in ood_texts])
    out = encoder.run_states(test_states)
    y = data.labels("test")
    profile = load_uncertainty_profile(run_dir / "head")
    res = profile.apply(out.mean, out.var, out.logits, sets=True, pooled=out.pooled)
    raw = torch.softmax(torch.from_numpy(out.logits).double(), 1)
    correct = res.prediction == y
    all_scores = {k: v.numpy() for k, v in profile.scores(out.mean, out.var, out.logits).items()}
    after = calibration_metrics(res.probs, y)  # its ece_floor: what perfect calibration shows on these texts
    r: dict = {
        "accuracy": float(correct.mean()),
        "calibration_before": calibration_metrics(raw, y),
        "calibration_after": after,
        "temperature": profile.calibrator.temperature,
        "ece_floor": after["ece_floor"],
        "aurc": {k: aurc(v, correct) for k, v in all_scores.items()},
        "e_aurc": {k: e_aurc(v, correct) for k, v in all_scores.items()},
        "default_score": res.score,
        "val_aurc": profile.info["validation_aurc"],
        "selective": {
            "coverage": float((~res.abstain).mean()),
            # None where every text abstains: no error among answered texts to report (0.0 read as perfect)
            "error": float((~correct[~res.abstain]).mean()) if (~res.abstain).any() else None,
            "target": profile.abstain.target,
        },
        "conformal": {
            "coverage": float(res.sets[np.arange(len(y)), y].mean()),
            "mean_set_size": float(res.sets.sum(1).mean()),
        },
    }
    if out.var is not None:
        sig = np.sqrt(out.var).mean(1)
        log_var = np.log(out.var)
        r["sigma"] = {
            "p05": float(np.quantile(sig, 0.05)),
            "p50": float(np.median(sig)),
            "p95": float(np.quantile(sig, 0.95)),
            "error_minus_correct": float(sig[~correct].mean() - sig[correct].mean()),
            # > 0: sigma grows with the MSP uncertainty; < 0: confident texts get the larger sigma.
            "spearman_vs_msp": float(spearmanr(sig, all_scores["msp"]).statistic),
            "log_var_min": float(log_var.min()),
            "log_var_max": float(log_var.max()),
            "clamped_share": float(
                (
                    (log_var <= bottleneck.LOG_VAR_MIN + 1e-4) | (log_var >= bottleneck.LOG_VAR_MAX - 1e-4)
                ).mean()
            ),
        }
        # Samples ablation: predictive entropy's AURC with S Monte-Carlo samples (0 = probit).
        r["predictive_entropy_by_samples"] = {}
        saved = profile.samples  # the OOD scores below use the profile's own S, as predict does
        try:
            for s in (0, 1, 8, 32, 128) if profile.weight is not None else ():
                profile.samples = s
                pe = profile.scores(out.mean, out.var, out.logits, ["predictive_entropy"])[
                    "predictive_entropy"
                ]
                r["predictive_entropy_by_samples"][str(s)] = aurc(pe.numpy(), correct)
        finally:
            profile.samples = saved
    detectors = ood_detectors(run_dir, cfg, encoder, data, profile)
    test_probs = profile.calibrator.probs(out.logits)
    # In-scope test texts each flag keeps (target: uncertainty.ood.tpr) and the saved flag's own keep rate.
    r["ood_keep"] = {
        name: float(
            (det.scores(det.features(out.mean, out.pooled), test_probs, out.logits) <= det.threshold)
            .double()
            .mean()
        )
        for name, det in detectors.items()
    }
    r["ood_flag"] = None
    if res.ood is not None:
        r["ood_flag"] = {
            "score": profile.ood.score.value,
            "tpr": profile.ood.tpr,
            "keep": float((~res.ood).mean()),
            "fitted_on": profile.ood.info.get("heldout"),
        }
    r["ood"] = {}
    if ood_texts is not None:
        r["ood"]["heldout"] = ood_metrics(profile, detectors, encoder, out, ood_states)
        r["heldout_labels"] = list(data.excluded_labels)
    other = CROSS.get(cfg.task.name)
    if other and ood_texts is None:
        ocfg = build_config(
            [f"task={other}", f"backbone={cfg.backbone.name}", f"data.root={cfg.data.root or ''}"]
        )
        ocfg.data.root = cfg.data.root
        odata = load_classification(ocfg.task, ocfg.data, cfg.seed)
        ostates, _ = build_states(ocfg, encoder.backbone, odata)
        r["ood"]["cross"] = ood_metrics(profile, detectors, encoder, out, ostates["test"])
    return r


def main(argv: list[str]) -> int:
    """Train what is missing, measure, and write ``summary.md``."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    opts = {
        "out": "runs/bench-uncertainty",
        "seeds": "3",
        "variants": "default",
        "tasks": ",".join(TASKS),
        "heldout": "",
    }
    overrides = []
    for tok in argv:
        key, _, value = tok.partition("=")
        if key in opts:
            opts[key] = value
        else:
            overrides.append(tok)
    out = Path(opts["out"])
    # Seed-major order: an interrupted run still has every task and variant at seed 0.
    for seed in range(int(opts["seeds"])):
        for task in opts["tasks"].split(","):
            for variant in opts["variants"].split(","):
                extra, bias = VARIANTS[variant]
                for held in [None, float(opts["heldout"])] if opts["heldout"] else [None]:
                    name = variant if held is None else f"{variant}-heldout{held}"
                    run_dir = out / task / name / f"seed{seed}"
                    if (run_dir / "bench.json").is_file():
                        continue
                    if held is not None and task in TWO_LABEL_TASKS:
                        # Holding out a fraction of 2 labels leaves one: no classifier to train.
                        log.info("%s: %s skipped (2 labels, nothing can be held out)", task, name)
                        continue
                    t0 = time.perf_counter()
                    if not (run_dir / "metrics.json").is_file():
                        ex = [] if held is None else [f"data.exclude_labels={held}"]
                        cfg = build_config(
                            [
                                f"task={task}",
                                *extra,
                                *ex,
                                *overrides,
                                f"seed={seed}",
                                f"output_dir={run_dir}",
                                "progress_bar=false",
                                *killed_run_flags(run_dir),
                            ]
                        )
                        with log_var_bias(bias):
                            train(cfg)
                    fit_run_uncertainty(run_dir)
                    result = {"task": task, "variant": name, "seed": seed, **measure(run_dir)}
                    (run_dir / "bench.json").write_text(json.dumps(result, indent=2))
                    log.info(
                        "%s %s seed%d: acc %.4f (%.0f s)",
                        task,
                        name,
                        seed,
                        result["accuracy"],
                        time.perf_counter() - t0,
                    )
    results = [json.loads(p.read_text()) for p in sorted(out.glob("*/*/seed*/bench.json"))]
    (out / "results.json").write_text(json.dumps(results, indent=1))
    from bench.uncertainty_summary import write_summary

    print(write_summary(results, out / "summary.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
