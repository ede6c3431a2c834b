"""The ``calibration``, ``selective`` and ``conformal`` sections of ``eval.json``, their plots and table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ucse.core.encoder import EncodedBatch
from ucse.evaluation.per_label import label_breakdown, lowest_coverage_line, most_flagged_line
from ucse.evaluation.plots import plot_reliability, plot_risk_coverage
from ucse.uncertainty.calibration import calibration_metrics, reliability_bins
from ucse.uncertainty.class_prior import decision_scores
from ucse.uncertainty.keep_threshold import mixed_as
from ucse.uncertainty.profile import UncertaintyOutput, UncertaintyProfile
from ucse.uncertainty.selective import aurc, e_aurc, risk_coverage_curve


def actionable_report(
    profile: UncertaintyProfile,
    out: EncodedBatch,
    labels: np.ndarray,
    plots_dir: Path | None = None,
    label_names: Sequence[str | int] | None = None,
    res: UncertaintyOutput | None = None,
) -> dict:
    """Judge a fitted profile on held-out outputs (normally the test split).

    Args:
        profile: the fitted (or saved) uncertainty profile.
        out: head outputs on the evaluated split.
        labels: (N,) its labels.
        plots_dir: write ``reliability.png`` and ``risk_coverage.png`` there (``None``: no plots).
        label_names: the C labels as the data wrote them (ints for integer labels; ``None``: the ids as text).
        res: ``profile.apply`` of ``out`` with sets, when the caller has it already (``None``: applied here).

    Returns:
        ``{"calibration": ..., "selective": ..., "conformal": ..., "out_of_scope": ..., "per_label": [...],
        "confusion": {...}, "plots": [...]}``; ``out_of_scope``: the flag's score, tpr and the share of these
        texts flagged; ``per_label`` / ``confusion``: :func:`ucse.evaluation.per_label.label_breakdown` of
        what ``predict`` answers.
    """
    y = np.asarray(labels)
    raw = torch.softmax(torch.as_tensor(out.logits, dtype=torch.float64), dim=1)
    if res is None:
        res = profile.apply(out.mean, out.var, out.logits, sets=True, pooled=out.pooled)
    before, after = calibration_metrics(raw, y), calibration_metrics(res.probs, y)
    calibration = {
        "method": profile.calibrator.method.value,
        "temperature": profile.calibrator.temperature,
        "prior": profile.calibrator.prior.value,
        **{f"{k}_before": v for k, v in before.items()},
        **{f"{k}_after": v for k, v in after.items()},
    }
    correct = res.prediction == y
    all_scores = {k: v.numpy() for k, v in profile.scores(out.mean, out.var, out.logits).items()}
    a = profile.abstain
    answered = ~res.abstain
    selective = {
        "aurc": {k: aurc(v, correct) for k, v in all_scores.items()},
        "e_aurc": {k: e_aurc(v, correct) for k, v in all_scores.items()},
        "default_score": res.score,
        "rule": None if a is None else a.rule,
        "target_error": None if a is None or a.rule != "target_error" else a.target,
        "target_coverage": None if a is None or a.rule != "coverage" else a.target,
        "delta": None if a is None else a.delta,
        "threshold": None if a is None or not np.isfinite(a.threshold) else a.threshold,
        "validation_bound": None if a is None else a.bound,
        "certified": None if a is None else bool(a.achievable),
        "test_coverage": float(answered.mean()),
        # undefined when every text abstains (0 read as perfect once averaged into a sweep's table)
        "test_error": float((~correct[answered]).mean()) if answered.any() else None,
    }
    conformal = None
    if res.sets is not None:
        conformal = {
            "alpha": profile.conformal.alpha,
            "method": profile.conformal.method.value,
            "coverage": float(res.sets[np.arange(len(y)), y].mean()),
            "mean_set_size": float(res.sets.sum(1).mean()),
            "empty_sets": float((res.sets.sum(1) == 0).mean()),
        }
    ood = None
    if res.ood is not None:  # in-scope texts: about 1 - tpr flagged; far more on new data means a shift
        o = profile.ood
        ood = {"score": o.score.value, "tpr": o.tpr, "flagged": float(res.ood.mean())}
        ood |= {"mix": o.info["mix"]} if isinstance(o.info.get("mix"), str) else {}  # the prior's, weighted
        if o.info.get("threshold_from") == "examples":  # tpr is then not what the threshold keeps
            ood["threshold_from"] = "examples"
            ood["heldout_kept"] = o.info.get("inscope_kept")
        ood["set"] = bool(np.isfinite(o.threshold))  # too few held-out texts: no threshold, nothing flagged
    report = {
        "profile_fitted": profile.fitted,
        "out_of_scope": ood,
        # what predict answers: the profile's top label (another than the logits' under another prior)
        "decisions": decision_scores(y, res.prediction),
        "decision_rule": None if profile.decision is None else profile.decision.to_saved(),
        "calibration": calibration,
        "selective": selective,
        "conformal": conformal,
    }
    names = [str(i) for i in range(out.logits.shape[1])] if label_names is None else list(label_names)
    prior = profile.info.get("class_prior")  # read back from disk: may be missing or damaged
    counts = prior.get("counts") if isinstance(prior, dict) else None
    rows = counts if isinstance(counts, list) and len(counts) == len(names) else None
    if rows is not None and not all(isinstance(n, int) and not isinstance(n, bool) for n in rows):
        rows = None
    report |= label_breakdown(y, res.prediction, names, res.abstain, res.sets, res.ood, rows)
    if plots_dir is not None:
        t = profile.calibrator.temperature
        after_name = f"after ({profile.calibrator.method.value}" + (f", T={t:.2f})" if t else ")")
        curves = {
            f"{k} (AURC {selective['aurc'][k]:.4f})": risk_coverage_curve(v, correct)
            for k, v in all_scores.items()
        }
        report["plots"] = [
            str(
                plot_reliability(
                    {
                        "before (softmax)": reliability_bins(raw, y),
                        after_name: reliability_bins(res.probs, y),
                    },
                    plots_dir / "reliability.png",
                )
            ),
            str(
                plot_risk_coverage(
                    curves,
                    plots_dir / "risk_coverage.png",
                    None
                    if selective["test_error"] is None
                    else (selective["test_coverage"], selective["test_error"]),
                )
            ),
        ]
    return report


def format_table(report: dict) -> str:
    """A short plain-text table of an ``actionable_report`` (printed by ``eval.py``)."""
    c, s, k = report["calibration"], report["selective"], report["conformal"]
    t, prior = c["temperature"], c.get("prior", "train")
    lines = [
        f"calibration ({c['method']}{f', T={t:.3f}' if t else ''}"
        f"{'' if prior == 'train' else f', {prior} prior'})   before    after",
        f"  ECE (15 equal-width bins)        {c['ece_before']:.4f}   {c['ece_after']:.4f}",
        # what a perfectly calibrated model would show on these texts: the noise an ECE cannot get below
        *(
            [f"  ECE floor (perfect calibration)  {c['ece_floor_before']:.4f}   {c['ece_floor_after']:.4f}"]
            if "ece_floor_after" in c
            else []
        ),
        f"  ECE (15 equal-mass bins)         {c['adaptive_ece_before']:.4f}   {c['adaptive_ece_after']:.4f}",
        f"  NLL                              {c['nll_before']:.4f}   {c['nll_after']:.4f}",
        f"  Brier                            {c['brier_before']:.4f}   {c['brier_after']:.4f}",
        "selective prediction              AURC     E-AURC",
    ]
    for name, v in sorted(s["aurc"].items(), key=lambda kv: kv[1]):
        mark = "  <- default" if name == s["default_score"] else ""
        lines.append(f"  {name:<32}{v:.4f}   {s['e_aurc'][name]:.4f}{mark}")
    target = (
        f"target error {s['target_error']:.3f}"
        if s["target_error"] is not None
        else f"target coverage {s['target_coverage']:.3f}"
        if s["target_coverage"] is not None
        else "no abstention rule"
    )
    error = "n/a (every text abstains)" if s["test_error"] is None else f"{s['test_error']:.4f}"
    if s.get("certified") is False:  # no threshold met the target on validation (eval.json: certified)
        target += ", not certified on validation"
    scored = "error on the file" if report.get("input") else f"{report.get('split', 'test')} error"
    lines.append(f"  abstain ({target}): {scored} {error} at coverage {s['test_coverage']:.4f}")
    if k is not None:
        lines.append(
            f"conformal {k['method']} (alpha {k['alpha']}): coverage {k['coverage']:.4f}, "
            f"mean set size {k['mean_set_size']:.2f}"
        )
        low = lowest_coverage_line(report.get("per_label"), k["alpha"])
        lines += [low] if low else []
    o = report.get("out_of_scope")
    if o is not None and o.get("set") is False:
        lines.append(
            f"out-of-scope flag ({o['score']}): inert, no threshold could be set on the held-out texts"
        )
    elif o is not None:
        kept, said = o.get("heldout_kept"), mixed_as(o)
        how = (
            f"threshold set by your out-of-scope examples, kept {kept:.2f} of held-out in-scope texts"
            if o.get("threshold_from") == "examples" and isinstance(kept, float)
            else f"keeps {o['tpr']:.2f} of in-scope texts" + (f" {said}" if said else "")
        )
        lines.append(f"out-of-scope flag ({o['score']}, {how}): flags {o['flagged']:.4f} of these texts")
        high = None
        if o.get("threshold_from") != "examples":  # examples set the threshold, not the keep rate
            high = most_flagged_line(report.get("per_label"), o["tpr"], weighted=said is not None)
        lines += [high] if high else []
    return "\n".join(lines)
