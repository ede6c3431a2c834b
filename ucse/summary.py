"""The few lines a finished training run prints: key figures, the head chosen, the profile, the files.

``ucse train`` and ``ucse.train`` print the same summary; the full figures stay in the run folder
(``metrics.json``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ucse.config.run_layout import RunFolder, trained_on_test

IMBALANCED = 3.0
"""Most / fewest training rows per label from which the summary offers ``calibration.prior=balanced``."""
OFFER_GAIN = 0.01
"""Held-out macro-F1 the balanced prior must add for the summary to offer it: on bench/imbalance.py's runs,
gains below a point on the held-out rows came with test gains of -1.1 to +1.5 points (docs/RESULTS.md)."""
FEW_PER_LABEL = 50
"""Labelled rows per label below which the summary offers ``ucse suggest``: where more labels pay most (on
Banking77 the default gains 6.3 points from 8 to 32 per label, 3.1 from 32 to the full ~130)."""


def describe_flag(ood: Any) -> str:
    """How the out-of-scope threshold was set, in one phrase (for the summary and ``ucse calibrate``)."""
    from ucse.uncertainty.keep_threshold import (
        keepable_tpr,
        mixed_as,
        rows_to_keep,
    )  # torch is loaded with a flag

    info = ood.info  # read back from disk for `ucse calibrate`: every field may be missing
    said = mixed_as(info)
    mix = f" ({said})" if said else ""
    if info.get("threshold_from") == "examples":
        return (
            f"{ood.score.value}, threshold set by {info.get('n_examples')} out-of-scope examples: keeps "
            f"{pct(info.get('inscope_kept'))} of the held-out in-scope texts{mix}, flags "
            f"{pct(info.get('examples_flagged'))} of the examples"
        )
    if ood.threshold == math.inf and mix:  # a label far rarer in the held-out rows than in the target
        tpr = info.get("keepable_tpr")
        lower = f"uncertainty.ood.tpr={tpr:.2f}" if isinstance(tpr, float) else "a lower uncertainty.ood.tpr"
        return (
            f"{ood.score.value}, flags no text: the held-out texts are too few to keep {pct(ood.tpr)} of "
            f"in-scope texts {said} (a label's share there is far above its held-out share; "
            f"{lower} or more held-out texts of that label set one)"
        )
    if ood.threshold == math.inf:  # too few held-out texts for the tpr rule's order statistic: keeps all
        n = info.get("n_heldout")
        text = (
            f"{ood.score.value}, flags no text: a threshold keeping {pct(ood.tpr)} of in-scope texts needs "
            f"{rows_to_keep(ood.tpr)}+ held-out texts"
        )
        if isinstance(n, int) and n > 0:
            text += f", {n} here (uncertainty.ood.tpr={keepable_tpr(n):.2f} sets one)"
        return text
    text = f"{ood.score.value}, keeps {pct(ood.tpr)} of in-scope texts"
    text += f" {said}" if said else ""
    if "examples_flagged" in info:
        text += f", flags {pct(info.get('examples_flagged'))} of your out-of-scope examples"
    return text


def pct(x: float | None) -> str:
    """``0.1234`` -> ``12.34 %`` (``n/a`` for ``None``)."""
    return "n/a" if x is None else f"{100 * x:.2f} %"


def prior_line(info: Any, run_dir: Path | str | None) -> str | None:
    """The class-prior line of the summary: what ``balanced`` or ``target`` did, or an offer of ``balanced``.

    The offer needs :data:`OFFER_GAIN` or more held-out macro-F1. ``info`` is the profile's
    ``info["class_prior"]`` (read back from disk: any field may be missing); the figures are the held-out
    rows' (validation, or the cross-validated rows), never test's. ``run_dir`` None: the run cannot be
    recalibrated (rows passed in memory, the estimator's folder), so the offer is for the next training.
    """
    if not isinstance(info, dict) or not all(isinstance(info.get(k), dict) for k in ("train", "balanced")):
        return None
    counts = info.get("counts") or []
    if not all(isinstance(n, int) for n in counts) or not counts:
        return None
    most, fewest = max(counts), min(counts)
    t, b = info["train"], info["balanced"]
    try:
        f1 = f"held-out macro-F1 {t['f1_macro']:.3f} for the training mix, {b['f1_macro']:.3f} balanced"
        acc = f"accuracy {t['accuracy']:.3f} / {b['accuracy']:.3f}"
    except (KeyError, TypeError, ValueError):
        return None
    if info.get("prior") == "target":
        return _target_line(info)
    if info.get("prior") == "balanced":
        return (
            f"  class prior: balanced (every label equally likely; training rows per label {fewest}-{most}): "
            f"{f1}, {acc}; the test figures above are the head's own decisions, for the training mix"
        )
    if most < IMBALANCED * max(fewest, 1) or not b["f1_macro"] >= t["f1_macro"] + OFFER_GAIN:
        return None
    from ucse.uncertainty.abstain_rule import setting_hint  # numpy and the rule's module: only for the offer

    return (
        f"  classes imbalanced ({fewest} to {most} training rows per label): {f1}; if new texts are as "
        f"likely to be any label, {setting_hint(run_dir, 'uncertainty.calibration.prior=balanced')}"
    )


def _target_line(info: dict) -> str | None:
    """``class prior: target (...)``: the held-out rows weighted to the target mix, under both priors."""
    w = info.get("target")
    try:
        t, g = w["train"], w["target"]
        return (
            f"  class prior: target (the shares you gave): held-out rows weighted to that mix, accuracy "
            f"{t['accuracy']:.3f} for the training mix, {g['accuracy']:.3f} for the target (macro-F1 "
            f"{t['f1_macro']:.3f} / {g['f1_macro']:.3f}); the test figures above are the head's own decisions"
        )
    except (KeyError, TypeError, ValueError):
        return None


def accuracy_interval(accuracy: float, n: Any) -> str:
    """`` (95 % interval lo-hi, n texts)``: Wilson's score interval of an accuracy on ``n`` test texts.

    On the small test slice of a small file (10 texts: 9 right is 0.60-0.98) the point figure alone reads
    as far surer than it is. scipy's ``binomtest`` computes the interval; empty when ``n`` is unknown.
    """
    if not isinstance(n, int) or n <= 0:
        return ""
    from scipy.stats import binomtest

    ci = binomtest(round(accuracy * n), n).proportion_ci(confidence_level=0.95, method="wilson")
    return f" (95 % interval {ci.low:.3f}-{ci.high:.3f}, {n} texts)"


def review_note(review: dict) -> str:
    """The label review's count for the files line: the held-out texts the models doubt, and what to do."""
    doubted, rows, below = review.get("doubted"), review.get("rows"), pct(review.get("below"))
    if doubted == 0:
        return f"none of {rows} held-out texts gets under {below} for its own label"
    cut = review.get("doubted_cut")
    cut = (
        f"; {cut} of them read only up to the token limit (column 'cut')"
        if isinstance(cut, int) and cut > 0
        else ""
    )
    return (
        f"{doubted} of {rows} held-out texts get under {below} for their own label: check those labels "
        f"first{cut}"
    )


def run_label_names(run: str | Path) -> list | None:
    """The run's labels in id order, from its head's ``config.json`` (``None`` where it names none)."""
    from ucse.heads.saved_config import read_config

    names = read_config(RunFolder(run).head / "config.json")[0]["meta"].get("label_names")  # checked there
    return names if isinstance(names, list) and names else None


def train_summary(run_dir: Path, metrics: dict, profile: Any | None) -> str:
    """What ``ucse train`` prints: test/validation scores, the uncertainty profile, the run's files."""
    test, val = metrics.get("test"), metrics.get("val", {})
    everything = trained_on_test(metrics)  # data.refit_test: the shipped head trained on the test rows too
    data = metrics.get("data", {})
    sizes = data.get("sizes", {})
    estimate = {
        "cross-validated": "cross-validated accuracy",
        "held-out, before refit": "validation accuracy before the refit on train + validation",
    }.get(val.get("estimate"), "validation accuracy")
    tested = "no test split"
    if test:
        interval = accuracy_interval(test["accuracy"], sizes.get("test"))
        tested = f"test accuracy {test['accuracy']:.4f}{interval}  "
        tested += f"macro-F1 {test['f1_macro']:.4f}"
        if everything:  # the shipped head trained on the test rows too
            tested += " (the head before its refit with the test rows in: data.refit_test)"
            if val.get("estimate") == "cross-validated":  # with a validation split: that split's, as above
                estimate = "cross-validated accuracy over every row"
    lines = [
        f"run: {run_dir}",
        tested + (f"   ({estimate} {val['accuracy']:.4f})" if "accuracy" in val else ""),
    ]
    # per label: on test, or without one on the held-out rows the estimate above is of
    rows_key = "test_per_label" if test else "heldout_per_label"
    if metrics.get(rows_key):
        from ucse.training.label_report import weakest_line  # torch is loaded once a run has trained

        held = (
            "the cross-validated texts"
            if val.get("estimate") == "cross-validated"
            else "the validation texts"
        )
        weakest = weakest_line(metrics[rows_key], "test" if test else held)
        # and the answers least often right, as `ucse eval` gives them (a trial's rare label: its precision
        # was only in metrics.json)
        unsure = weakest_line(metrics[rows_key], "test" if test else held, of="precision")
        prior = profile.calibrator.prior.value if profile is not None else "train"
        # the head's own decisions, as the test figures above; predict answers under the prior (ucse eval)
        own = (
            ""
            if prior == "train"
            else f"; the head's own decisions: `ucse eval` gives predict's, {prior} prior"
        )
        where = f"all labels: {rows_key} in {RunFolder(run_dir).metrics.name}{own}"
        # one line for both: the summary stays a few lines
        said = [f"{weakest} ({where})"] * bool(weakest) + [unsure] * bool(unsure)
        lines += [f"  {'; '.join(said)}"] if said else []
    sel = metrics.get("selection") or {}
    if "weight" in sel:
        acc, nll = sel["accuracy"], sel["nll"]
        shown = [("logreg", "0.0"), ("textcnn", "1.0"), ("blend w=0.5", "0.5")]
        best = sel.get("best_weight")
        for w in dict.fromkeys([sel["weight"], best]):  # the chosen and the lowest-NLL blends too
            if isinstance(w, (int, float)) and 0 < w < 1 and str(w) != "0.5":
                shown.append((f"blend w={w:g}", str(w)))
        figures = ", ".join(f"{name} {100 * acc[w]:.2f} % / {nll[w]:.3f}" for name, w in shown if w in acc)
        why = (
            f"; w={best:g} had the lowest NLL, but not by more than one standard error: "
            + (
                "the probe alone, w=0"
                if sel["weight"] == 0
                else f"the blend nearest the probe, w={sel['weight']:g}"
            )
            + ", is kept"
            if isinstance(best, (int, float)) and best != sel["weight"]
            else ""
        )
        probe = sel.get("probe")
        c = probe.get("C") if isinstance(probe, dict) else None
        c_said = f"; the probe's C={c:g}" if isinstance(c, (int, float)) and not isinstance(c, bool) else ""
        lines.append(
            f"head: {metrics.get('head')} chosen by {sel['mode']} over {sel['n_heldout']} texts "
            f"(held-out accuracy / NLL: {figures}{why}{c_said})"
        )
    elif "probe" in sel:
        cal = sel.get("calibrated_on")
        fold = (
            f"; trained on all {cal.get('rows')} train + validation texts, calibrated on their out-of-fold "
            f"outputs ({cal.get('folds')} folds: the validation slice is too small on its own)"
            if isinstance(cal, dict)
            else ""
        )
        lines.append(
            f"head: logreg, C={sel['probe']['C']:.3g} chosen by {sel['probe']['folds']}-fold CV{fold}"
        )
    if sizes:
        lines.append(
            f"data: {data.get('num_classes')} labels; train {sizes.get('train')} / validation "
            f"{sizes.get('validation')} / test {sizes.get('test')} texts"
        )
    if profile is not None:
        cal = profile.calibrator
        t = cal.temperature if cal.method.value == "temperature" else None
        lines.append(
            f"uncertainty: calibration {cal.method.value}{f' (T={t:.3f})' if t else ''}, "
            f"default score {profile.score.value}"
        )
        n_cal, acc_cal = profile.info.get("n_validation"), profile.info.get("validation_accuracy")
        cross = val.get("estimate") == "cross-validated" and isinstance(n_cal, int) and n_cal > 0
        if cross and isinstance(acc_cal, float) and abs(acc_cal - val["accuracy"]) > 1 / n_cal:
            # Two out-of-fold views of the same rows: the estimate chose the settings (the probe's C) inside
            # each fold, the profile reads the shipped settings, chosen on these rows too.
            moved = 100 * abs(acc_cal - val["accuracy"])
            lines.append(
                "  (the uncertainty figures below are on out-of-fold predictions at the shipped settings, "
                f"accuracy {acc_cal:.4f}; the estimate above chose the settings inside each fold: on {n_cal} "
                f"texts that choice moves accuracy by {moved:.1f} points, so read both as rough)"
            )
        from ucse.uncertainty.abstain_rule import recalibration_run

        # where `ucse calibrate` (and `ucse review`, which rereads the data too) can serve the run
        recalibrate = recalibration_run(profile.info, run_dir)
        prior = prior_line(profile.info.get("class_prior"), recalibrate)
        if prior:
            lines.append(prior)
        a = profile.abstain
        if a is not None:
            # torch is loaded once a profile exists
            from ucse.uncertainty.abstain_rule import uncertifiable_fix, uncertifiable_outcome

            rule = "target error" if a.rule == "target_error" else "coverage"
            fix = uncertifiable_fix(profile, run_dir)
            met = ""
            if fix is not None:
                met = f" - not certifiable on the held-out texts: {uncertifiable_outcome(profile)}; {fix}"
            # SGR certifies the held-out rows as they are mixed; only the sets and the flag are weighted
            own = ", set on the held-out rows' own mix" if profile.calibrator.prior.value != "train" else ""
            lines.append(
                f"  abstain ({rule} {a.target}{own}): held-out coverage {pct(a.val_coverage)}, "
                f"error {pct(a.val_error)}{met}"
            )
        if profile.conformal is not None and profile.qhat is not None:
            from ucse.uncertainty.inert_parts import inert_sets

            weighted = {"target": "the target mix", "balanced": "every label alike"}
            to = weighted.get(profile.calibrator.prior.value, "the target mix")
            mix = f", weighted to {to}" if isinstance(profile.qhat, list) else ""
            inert = inert_sets(profile)
            lines.append(
                f"  conformal sets: {profile.conformal.method.value}, alpha {profile.conformal.alpha}{mix}"
                + ("" if inert is None else f" - {inert}")
            )
        if profile.decision is not None:
            from ucse.uncertainty.decision import describe_decision

            lines.append(f"  decision: {describe_decision(profile.decision, run_label_names(run_dir))}")
        if profile.ood is not None:
            o = profile.ood
            how, n = o.info.get("heldout"), o.info.get("n_heldout")
            held = (
                f"{n} texts, each scored under the models that did not train on it"
                if how == "selection models"
                else f"{n} {how} texts"
            )
            lines.append(f"  out-of-scope flag: {describe_flag(o)} (held out: {held})")
    run = RunFolder(run_dir)
    shown = {
        p: p.name + ("/" if p.is_dir() else "") for p in (run.config, run.heldout, run.label_review, run.logs)
    }
    review = profile.info.get("label_review") if profile is not None else None
    if isinstance(review, dict):  # the count beside the file, not a line of its own
        # a large set's review holds its validation slice alone: say how to rank every labelled row
        labelled = sum(v for k, v in sizes.items() if k in ("train", "validation") and isinstance(v, int))
        rows = review.get("rows")
        more = ""
        # offered where calibrate can serve the run (info.recalibrate), not for rows passed in memory
        if isinstance(rows, int) and labelled > rows and recalibrate is not None:
            more = f"; `ucse review run={run_dir}` ranks all {labelled} train + validation rows"
        shown[run.label_review] += f" ({review_note(review)}{more})"
    extra = ", ".join(name for p, name in shown.items() if p.exists())
    lines.append(f"files: {run.metrics}, {run.head} (head + calibration), {extra}")
    nxt = f"next: ucse predict run={run_dir} input=<texts.txt> out=<predictions.jsonl>"
    # after data.refit_test the test split trained the shipped head: only new labelled texts are held out
    nxt += f"   |   ucse eval run={run_dir}" + (" input=<new labelled file>" if everything else "")
    labelled = sum(v for k, v in sizes.items() if k in ("train", "validation") and isinstance(v, int))
    classes = data.get("num_classes")
    few = isinstance(classes, int) and classes > 0 and labelled < FEW_PER_LABEL * classes
    if few and not data.get("train_capped"):  # a capped slice has few labels by choice
        # where more labels pay most: say how to choose them (docs/RESULTS.md, "What to label next")
        nxt += f"   |   ucse suggest run={run_dir} input=<unlabelled.txt> n={2 * classes} (to label next)"
    lines.append(nxt)
    return "\n".join(lines)
