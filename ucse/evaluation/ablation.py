"""Aggregate sweep runs into the paper's Table-7 layout: rows = tasks + average, columns = variants."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ucse import atomic


def collect(sweep_dir: str | Path, metric: str = "accuracy") -> dict[str, dict[str, list[float]]]:
    """``{task: {variant: [test metric per seed]}}`` from ``<sweep>/<task>/<variant>/seed*/metrics.json``."""
    table: dict[str, dict[str, list[float]]] = {}
    for path in sorted(Path(sweep_dir).glob("*/*/seed*/metrics.json")):
        task, variant = path.parts[-4], path.parts[-3]
        value = json.loads(path.read_text())["test"][metric]
        table.setdefault(task, {}).setdefault(variant, []).append(float(value))
    return table


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


def to_markdown(summary: dict) -> str:
    """Render a summary as a Markdown table; the best mean of each row is bold."""
    variants = summary["variants"]
    lines = ["| task | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for task, row in summary["tasks"].items():
        best = max((c["mean"] for c in row.values()), default=None)
        cells = []
        for v in variants:
            c = row.get(v)
            if c is None:
                cells.append("—")
                continue
            text = f"{c['mean']:.2f} ± {c['std']:.2f}"
            cells.append(f"**{text}**" if c["mean"] == best else text)
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    avg = summary["average"]
    best = max((c["mean"] for c in avg.values()), default=None)
    cells = []
    for v in variants:
        c = avg.get(v)
        if c is None:
            cells.append("—")
            continue
        text = f"{c['mean']:.2f}" + ("" if c["complete"] else f" ({c['tasks']} tasks)")
        cells.append(f"**{text}**" if c["mean"] == best else text)
    lines.append("| **Average** | " + " | ".join(cells) + " |")
    seeds = sorted({c["seeds"] for row in summary["tasks"].values() for c in row.values()})
    lines.append("")
    lines.append(f"Test accuracy (%), mean ± sample std over {'/'.join(map(str, seeds))} seeds.")
    return "\n".join(lines) + "\n"


def write_ablation(sweep_dir: str | Path, variants: list[str]) -> dict:
    """Write ``ablation.json`` and ``ablation.md`` into ``sweep_dir``; return the summary."""
    summary = summarise(collect(sweep_dir), variants)
    atomic.write_json(Path(sweep_dir) / "ablation.json", summary)
    atomic.write_text(Path(sweep_dir) / "ablation.md", to_markdown(summary))
    return summary
