"""Aggregate sweep runs into the paper's Table-7 layout: rows = tasks + average, columns = variants."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from ucse import atomic, json_read
from ucse.config.run_layout import read_run_metrics

log = logging.getLogger(__name__)


def collect(sweep_dir: str | Path, metric: str = "accuracy") -> dict[str, dict[str, list[float]]]:
    """``{task: {variant: [test metric per seed]}}`` from ``<sweep>/<task>/<variant>/seed*/metrics.json``.

    A seed whose file is unreadable or holds no finite test ``metric`` is left out with a warning naming the
    file (the average row then says the grid is incomplete), instead of failing the whole table.
    """
    table: dict[str, dict[str, list[float]]] = {}
    for path in sorted(Path(sweep_dir).glob("*/*/seed*/metrics.json")):
        task, variant = path.parts[-4], path.parts[-3]
        metrics = read_run_metrics(path.parent, "this seed is left out of the table")
        test = metrics.get("test")
        value = _finite(test.get(metric) if isinstance(test, dict) else None)
        if value is None:
            if metrics:  # an unreadable file was named by the reader already
                log.warning("%s has no finite test %s: this seed is left out of the table.", path, metric)
            continue
        table.setdefault(task, {}).setdefault(variant, []).append(value)
    return table


def _finite(value: object) -> float | None:
    """``value`` as a finite float; ``None`` for anything else (booleans, text, NaN, an integer too large).

    Read from an untrusted file: ``math.isfinite`` of a 400-digit JSON integer raises ``OverflowError``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def summarise(table: dict[str, dict[str, list[float]]], variants: list[str]) -> dict:
    """Mean and spread (sample std over seeds) per cell, plus the across-task average row.

    The average row averages the per-task means over the tasks that have that variant, and is marked
    incomplete when a task is missing it, so a partial grid is never mistaken for a full one.
    """
    cells: dict[str, dict[str, dict]] = {}
    for task, row in table.items():
        cells[task] = {}
        for v in variants:
            vals = row.get(v, [])
            if vals:
                arr = np.asarray(vals) * 100
                cells[task][v] = {
                    "mean": float(arr.mean()),
                    "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0,
                    "seeds": len(arr),
                }
    average = {}
    for v in variants:
        means = [cells[t][v]["mean"] for t in cells if v in cells[t]]
        if means:
            average[v] = {
                "mean": float(np.mean(means)),
                "tasks": len(means),
                "complete": len(means) == len(cells),
            }
    return {"metric_percent": True, "variants": variants, "tasks": cells, "average": average}


def _cells(row: dict[str, dict], variants: list[str], text) -> list[str]:
    """Markdown cells of a row: ``text(cell)`` per variant, the best mean bold, a dash if missing.

    In the Average row only variants measured on every task compete for bold: a mean over fewer (perhaps
    easier) tasks is not comparable.
    """
    best = max((c["mean"] for c in row.values() if c.get("complete", True)), default=None)
    shown = None if best is None else f"{best:.2f}"  # ties as printed: float32 accuracies differ by 1e-7
    cells = []
    for v in variants:
        c = row.get(v)
        bold = c is not None and c.get("complete", True) and f"{c['mean']:.2f}" == shown
        cells.append("—" if c is None else f"**{text(c)}**" if bold else text(c))
    return cells


def to_markdown(summary: dict) -> str:
    """Render a summary as a Markdown table; the best mean of each row is bold."""
    variants = summary["variants"]
    lines = ["| task | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for task, row in summary["tasks"].items():
        cells = _cells(
            row, variants, lambda c: f"{c['mean']:.2f}" + (f" ± {c['std']:.2f}" if c["seeds"] > 1 else "")
        )
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    cells = _cells(
        summary["average"],
        variants,
        lambda c: f"{c['mean']:.2f}" + ("" if c["complete"] else f" ({c['tasks']} tasks)"),
    )
    lines.append("| **Average** | " + " | ".join(cells) + " |")
    seeds = sorted({c["seeds"] for row in summary["tasks"].values() for c in row.values()})
    lines.append("")
    lines.append(f"Test accuracy (%), mean ± sample std over {'/'.join(map(str, seeds))} seeds.")
    return "\n".join(lines) + "\n"


CALIBRATION_KEYS = {
    "ECE": ("metrics", "ece"),
    "ECE calibrated": ("calibration", "ece_after"),
    "NLL": ("metrics", "nll"),
    "NLL calibrated": ("calibration", "nll_after"),
    "ARC area (max prob)": ("uncertainty", "arc", "max probability", "area"),
    "ARC area (sigma)": ("uncertainty", "arc", "sigma (UCL)", "area"),
    "AURC (msp)": ("selective", "aurc", "msp"),
    "AURC (default score)": ("selective", "aurc", "{default_score}"),
    "selective error": ("selective", "test_error"),
    "selective coverage": ("selective", "test_coverage"),
    "conformal coverage": ("conformal", "coverage"),
    "set size": ("conformal", "mean_set_size"),
}


def collect_eval(sweep_dir: str | Path) -> dict[str, dict[str, dict[str, list[float]]]]:
    """``{task: {variant: {quantity: [value per seed]}}}`` from each run's ``eval.json``."""
    table: dict = {}
    for path in sorted(Path(sweep_dir).glob("*/*/seed*/eval.json")):
        task, variant = path.parts[-4], path.parts[-3]
        try:
            report = json_read.loads(path.read_text())
        except (OSError, ValueError) as err:  # a damaged file must not stop the sweep that writes this table
            log.warning("%s is unreadable (%s): this seed is left out of the calibration table.", path, err)
            continue
        for name, keys in CALIBRATION_KEYS.items():
            node = report
            for k in keys:
                if k == "{default_score}":  # the score the run's profile reports as its uncertainty
                    selective = report.get("selective") if isinstance(report, dict) else None
                    k = selective.get("default_score") if isinstance(selective, dict) else None
                node = node.get(k) if isinstance(node, dict) and isinstance(k, str) else None
            value = _finite(node)  # untrusted: true, text, NaN or 1e400 count as absent
            if value is not None:
                table.setdefault(task, {}).setdefault(variant, {}).setdefault(name, []).append(value)
    return table


def calibration_markdown(table: dict) -> str:
    """One row per (task, variant) with seed-mean ECE, NLL and accuracy-rejection areas."""
    names = list(CALIBRATION_KEYS)
    lines = ["| task | variant | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for task, rows in table.items():
        for variant, values in rows.items():
            cells = []
            for n in names:
                vals = values.get(n)
                cells.append(
                    f"{np.mean(vals):.4f} ± {np.std(vals, ddof=1) if len(vals) > 1 else 0:.4f}"
                    if vals
                    else "—"
                )
            lines.append(f"| {task} | {variant} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Test split; mean ± sample std over seeds. ARC area: area under accuracy-rejection, rates 0-0.9. "
        "Calibrated: with the run's fitted profile (temperature by default); AURC: area under risk-coverage "
        "(lower is better); selective error / coverage: at the saved abstention threshold; conformal: "
        "test coverage and mean size of the prediction sets.",
    ]
    return "\n".join(lines) + "\n"


def write_ablation(sweep_dir: str | Path, variants: list[str]) -> dict:
    """Write ``ablation.json`` and ``ablation.md`` into ``sweep_dir``; return the summary."""
    summary = summarise(collect(sweep_dir), variants)
    atomic.write_json(Path(sweep_dir) / "ablation.json", summary)
    atomic.write_text(Path(sweep_dir) / "ablation.md", to_markdown(summary))
    calibration = collect_eval(sweep_dir)
    if calibration:
        atomic.write_json(Path(sweep_dir) / "calibration.json", calibration)
        atomic.write_text(Path(sweep_dir) / "calibration.md", calibration_markdown(calibration))
    return summary
