"""Short terminal summary of an evaluation: key figures and where the files are (a run's is ``ucse.summary``).

The full figures stay in the run folder (``eval.json``); the terminal gets a few lines.
"""

from __future__ import annotations

from pathlib import Path


def eval_summary(report: dict, written: Path | None) -> str:
    """What ``ucse eval`` prints after the calibration table: scores, areas, MTEB main scores, files."""
    from ucse.summary import accuracy_interval

    m = report.get("metrics", {})
    lines = []
    d = report.get("decisions")
    prior = (report.get("calibration") or {}).get("prior")
    ruled = isinstance(report.get("decision_rule"), dict)  # uncertainty.decision: one label's threshold
    shifted = prior in ("balanced", "target")
    answers = bool(d) and (shifted or ruled)  # predict answers other labels than the head's argmax
    named = []  # what predict's answers are under, (in full, short): one list for both lines below
    if shifted:
        named.append((f"the {prior} class prior", f"{prior} prior"))
    if ruled:
        named.append(("the decision rule", "decision rule"))
    bases, short = [b for b, _ in named], [s for _, s in named]
    if m:
        # ECE and NLL of the probabilities predict returns where a profile calibrated them (the metrics are
        # the head's own softmax; the calibration table above has both)
        cal = report.get("calibration") or {}
        ece, nll, floor = cal.get("ece_after"), cal.get("nll_after"), cal.get("ece_floor_after")
        probs = f"ECE {m['ece']:.4f}  NLL {m['nll']:.4f}"
        if ece is not None and nll is not None:
            own = f"ECE {m['ece']:.4f} / NLL {m['nll']:.4f}"
            # the ECE a perfectly calibrated model would show on these n texts: what ECE can resolve
            below = "" if floor is None else f" (a perfectly calibrated model: {floor:.4f})"
            probs = (
                f"ECE {ece:.4f}{below}  NLL {nll:.4f} (calibrated, as predict gives them: eval.json's "
                f"calibration; the head's softmax {own}: its metrics)"
            )
        # the interval: two runs compared on one 60-text file differ by 2 texts within it (a trial)
        mark = ", in-sample: the shipped head trained on these rows" if report.get("in_sample") else ""
        # the headline is what predict answers (two trials quoted the head's argmax under a prior from it)
        top = d if answers else m
        lines.append(
            f"{report.get('task')} {report.get('split')} (n={report.get('n')}{mark}): "
            f"accuracy {top['accuracy']:.4f}{accuracy_interval(top['accuracy'], report.get('n'))}  "
            f"macro-F1 {top['f1_macro']:.4f}  "
            f"AUROC {'n/a' if m.get('auroc') is None else format(m['auroc'], '.4f')}  {probs}"
        )
    if report.get("dropped"):  # input= with drop_bad_rows=true
        n = report["dropped"]
        lines.append(f"  {n} bad row{'s' if n != 1 else ''} of the file dropped (drop_bad_rows=true)")
    if answers:
        figures = "" if m else f", accuracy {d['accuracy']:.4f}  macro-F1 {d['f1_macro']:.4f}"
        head = (
            f"; the head's own most probable labels (training mix; eval.json's metrics): accuracy "
            f"{m['accuracy']:.4f}  macro-F1 {m['f1_macro']:.4f}"
            if m
            else ""
        )
        lines.append(
            f"  predict's answers, with {' and '.join(bases)}: balanced accuracy "
            f"{d['balanced_accuracy']:.4f}{figures}{head}"
        )
    fresh = report.get("new_texts")  # input=: the texts that are not copies of the run's rows
    if isinstance(fresh, dict) and isinstance(fresh.get("n"), int):
        lines.append(
            f"  on the {fresh['n']} texts new to the run (not copies of its rows; predict's answers): "
            f"accuracy {fresh['accuracy']:.4f}{accuracy_interval(fresh['accuracy'], fresh['n'])}  "
            f"macro-F1 {fresh['f1_macro']:.4f}"
        )
    # per_label holds predict's answers: under a prior, not the head's argmax of the first line
    rows = report.get("per_label") or []
    held = [r for r in rows if isinstance(r, dict) and r.get("support") and isinstance(r.get("f1"), float)]
    if m and held and len(held) < len(rows):  # a sample without some labels: their predictions score 0 above
        f1 = sum(r["f1"] for r in held) / len(held)
        absent = len(rows) - len(held)
        basis = f" (predict's answers, {' and '.join(short)})" if answers else ""
        above = f"predict's macro-F1 {d['f1_macro']:.4f}" if answers and not m else "the macro-F1 above"
        lines.append(
            f"  macro-F1 over the {len(held)} labels this split holds{basis}: {f1:.4f} ({absent} of the "
            f"run's {len(rows)} labels have no row here; predicted, they count 0 in {above})"
        )
    if report.get("per_label"):  # what predict answers, label by label (eval.json: per_label, confusion)
        from ucse.training.label_report import weakest_line

        split = str(report.get("split"))
        where = written.name if written is not None else "eval.json"
        weakest = weakest_line(report["per_label"], split)
        lines += [f"  {weakest} (every label, and the confusion matrix: {where})"] if weakest else []
        unsure = weakest_line(report["per_label"], split, of="precision")
        lines += [f"  {unsure}"] if unsure else []
    errors = report.get("errors")
    if report.get("errors_total") and errors:  # input=: the wrong answers, the surest first
        e = errors[0]
        text = e["text"] if len(e["text"]) <= 60 else e["text"][:57] + "..."
        where = written.name if written is not None else "the report"
        lines.append(
            f"  {report['errors_total']} wrong answers, the surest first in {where}'s errors (a sure one is "
            f"often a wrong label, or a text too short to tell): {text!r} labelled {e['label']!r}, "
            f"answered {e['answer']!r} at {e['confidence']:.2f}"
        )
    areas = report.get("arc_area")
    if areas:
        shown = "  ".join(f"{k} {v:.4f}" for k, v in areas.items())
        lines.append(f"accuracy-rejection area: {shown}")
    for name, res in (report.get("mteb") or {}).items():
        lines.append(
            f"MTEB {res.get('task_name')} {name}: main score {res['main_score']:.4f} (mteb's own protocol on "
            "its whole test split: a probe fitted on the embeddings, not this head's predictions)"
            + (f"; {res['note']}" if res.get("note") else "")
        )
    if written is not None:
        replaced = f" (replacing the one written {report['replaced']})" if report.get("replaced") else ""
        mteb = " (MTEB scores included)" if report.get("mteb") else ""
        lines.append(f"full report: {written}{mteb}{replaced}")
    for plot in report.get("plots", []):
        lines.append(f"plot: {plot}")
    return "\n".join(lines)
