"""Markdown tables of ``bench/uncertainty.py`` results (mean ± sample std over seeds)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

SCORES = ["msp", "entropy", "sigma", "predictive_entropy", "mutual_information", "mahalanobis", "density"]
SHORT = {
    "AmazonCounterfactualClassification": "AmazonCF",
    "Banking77Classification": "Banking77",
    "MassiveIntentClassification": "MassIntent",
    "MassiveScenarioClassification": "MassScenario",
}


def _cell(values: list[float], digits: int = 4, scale: float = 1.0) -> str:
    v = np.asarray([x for x in values if x is not None], dtype=float) * scale
    if v.size == 0:
        return "—"
    return f"{v.mean():.{digits}f}" + (f" ± {v.std(ddof=1):.{digits}f}" if v.size > 1 else "")


def _get(r: dict, path: str):
    for key in path.split("."):
        if not isinstance(r, dict) or key not in r:
            return None
        r = r[key]
    return r


def _group(results: list[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in results:
        groups[(r["variant"], r["task"])].append(r)
    return groups


def ood_flag_tables(results: list[dict]) -> list[str]:
    """The out-of-scope flags (``ood:<score>``): AUROC per setting, in-scope keep rate, margin over MSP.

    The margin column is what picks ``uncertainty.ood.score``'s default: the smallest (over tasks and both
    settings) gain in AUROC over the flag's MSP score, averaged over seeds.
    """
    names = sorted({k.removeprefix("ood:") for r in results for k in r.get("ood_keep", {})})
    if not names:
        return []
    cells: dict[tuple[str, str, str], list[float]] = defaultdict(list)  # (score, task, setting) -> AUROCs
    keep: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in results:
        for setting, by_score in r.get("ood", {}).items():
            for n in names:
                if f"ood:{n}" in by_score:
                    cells[(n, r["task"], setting)].append(by_score[f"ood:{n}"]["auroc"])
        for n, v in r.get("ood_keep", {}).items():
            keep[(n, r["task"])].append(v)
    cases = sorted({(t, st) for _, t, st in cells})
    lines = [
        "## Out-of-scope flags (``uncertainty.ood.score``)",
        "",
        "AUROC per task and setting (cross = another task's test texts; heldout = classes held out of"
        " training); in-scope test keep rate at tpr 0.95 (mean over both settings' runs); margin = smallest"
        " AUROC gain over the MSP flag across tasks and settings (mean over seeds).",
        "",
        "| score | " + " | ".join(f"{SHORT.get(t, t)} {st}" for t, st in cases) + " | keep | margin |",
        "|" + "---|" * (len(cases) + 3),
    ]
    for n in names:
        margin = min(
            (float(np.mean(cells[(n, t, st)])) - float(np.mean(cells[("msp", t, st)])) for t, st in cases),
            default=float("nan"),
        )
        kept = [v for (m, _), vs in keep.items() if m == n for v in vs]
        lines.append(
            f"| {n} | "
            + " | ".join(_cell(cells[(n, t, st)], 3) for t, st in cases)
            + f" | {_cell(kept, 3)} | {margin:+.3f} |"
        )
    flags = [r["ood_flag"] for r in results if r.get("ood_flag")]
    if flags:
        lines += [
            "",
            f"Saved flag ({', '.join(sorted({f['score'] for f in flags}))}): in-scope test keep rate "
            f"{_cell([f['keep'] for f in flags], 3)} at tpr {flags[0]['tpr']} over {len(flags)} runs"
            f" (threshold {', '.join(sorted({f['fitted_on'] for f in flags}))}).",
        ]
    return lines + [""]


def write_summary(results: list[dict], path: Path) -> str:
    """Write the tables to ``path`` and return them."""
    groups = _group(results)
    lines = ["# bench/uncertainty.py", "", *ood_flag_tables(results)]
    for variant in sorted({v for v, _ in groups}):
        tasks = sorted(t for v, t in groups if v == variant)
        lines += [
            f"## {variant}",
            "",
            "| task | seeds | accuracy | ECE before | ECE after | adaptive ECE after | ECE floor |"
            " NLL before | NLL after | conformal coverage | set size | selective error | coverage |"
            " default score |",
            "|" + "---|" * 14,
        ]
        for t in tasks:
            rs = groups[(variant, t)]
            chosen = ", ".join(sorted({r["default_score"] for r in rs}))
            lines.append(
                f"| {SHORT.get(t, t)} | {len(rs)} | {_cell([r['accuracy'] for r in rs], 2, 100)} | "
                + " | ".join(
                    _cell([_get(r, p) for r in rs])
                    for p in (
                        "calibration_before.ece",
                        "calibration_after.ece",
                        "calibration_after.adaptive_ece",
                        "ece_floor",
                        "calibration_before.nll",
                        "calibration_after.nll",
                        "conformal.coverage",
                        "conformal.mean_set_size",
                        "selective.error",
                        "selective.coverage",
                    )
                )
                + f" | {chosen} |"
            )
        lines += [
            "",
            "AURC (test, lower is better); last column: the default score chosen on validation.",
            "",
            "| task | " + " | ".join(SCORES) + " | default |",
            "|" + "---|" * (len(SCORES) + 2),
        ]
        for t in tasks:
            rs = groups[(variant, t)]
            default = [r["aurc"][r["default_score"]] for r in rs]
            lines.append(
                f"| {SHORT.get(t, t)} | "
                + " | ".join(_cell([_get(r, f"aurc.{s}") for r in rs]) for s in SCORES)
                + f" | {_cell(default)} |"
            )
        for setting in ("cross", "heldout"):
            rows = [t for t in tasks if any(_get(r, f"ood.{setting}") for r in groups[(variant, t)])]
            if not rows:
                continue
            lines += [
                "",
                f"OOD ({setting}): AUROC / FPR@95%TPR (higher / lower is better)",
                "",
                "| task | " + " | ".join(SCORES) + " |",
                "|" + "---|" * (len(SCORES) + 1),
            ]
            for t in rows:
                rs = groups[(variant, t)]
                cells = [
                    f"{_cell([_get(r, f'ood.{setting}.{s}.auroc') for r in rs], 3)} / "
                    f"{_cell([_get(r, f'ood.{setting}.{s}.fpr95') for r in rs], 3)}"
                    for s in SCORES
                ]
                lines.append(f"| {SHORT.get(t, t)} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## sigma",
        "",
        "| variant | task | seeds | accuracy | sigma p05-p95 | sigma err - correct |"
        " log-var range | AURC sigma | AURC pred. entropy | AURC msp | cross-OOD AUROC sigma |"
        " cross-OOD AUROC pred. entropy | AURC pred. entropy S=0/1/8/32/128 |",
        "|" + "---|" * 13,
    ]
    for (variant, t), rs in sorted(groups.items()):
        if not any(r.get("sigma") for r in rs):
            continue
        spread = " - ".join(_cell([_get(r, f"sigma.{q}") for r in rs], 3) for q in ("p05", "p95"))
        lo, hi = min(_get(r, "sigma.log_var_min") for r in rs), max(_get(r, "sigma.log_var_max") for r in rs)
        lv = f"[{lo:.2f}, {hi:.2f}]"
        acc = _cell([r["accuracy"] for r in rs], 2, 100)
        by_s = " / ".join(
            _cell([_get(r, f"predictive_entropy_by_samples.{s}") for r in rs])
            for s in ("0", "1", "8", "32", "128")
        )
        lines.append(
            f"| {variant} | {SHORT.get(t, t)} | {len(rs)} | {acc} | {spread} | "
            f"{_cell([_get(r, 'sigma.error_minus_correct') for r in rs])} | {lv} | "
            + " | ".join(
                _cell([_get(r, p) for r in rs], 4 if "aurc" in p else 3)
                for p in (
                    "aurc.sigma",
                    "aurc.predictive_entropy",
                    "aurc.msp",
                    "ood.cross.sigma.auroc",
                    "ood.cross.predictive_entropy.auroc",
                )
            )
            + f" | {by_s} |"
        )
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text
