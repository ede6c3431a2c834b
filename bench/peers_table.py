"""The table ``bench/peers.py`` prints: its rows averaged over seeds per task and size, with the machine."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import numpy as np


def machine() -> str:
    """CPU model, its AVX/AMX flags and the core count (float results differ between AVX2 and AVX-512)."""
    model, flags = platform.machine(), []
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name") and model == platform.machine():
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = sorted(f for f in line.split(":", 1)[1].split() if f.startswith(("avx", "amx")))
                break
    return f"{model}, {' '.join(flags) or 'no AVX'}, {os.cpu_count()} cores"


def table(out: Path) -> str:
    """The rows under ``out/rows``, per task and size (means over seeds); also saved to ``out/peers.md``."""
    rows = [json.loads(p.read_text()) for p in sorted((out / "rows").glob("*.json"))]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["task"], r["shots"]), {}).setdefault(r["method"], []).append(r)
    lines = [
        f"machine: {machine()}",
        "",
        "| task | per class | seeds | auto acc / F1 / ECE (choice) | tuned logreg acc / F1 / ECE "
        "| paper acc / F1 / ECE | auto - logreg |",
        "|---|---|---|---|---|---|---|",
    ]
    deltas = []
    for (task, shots), m in sorted(groups.items()):

        def cell(name):
            rs = m.get(name, [])
            if not rs:
                return "—", None
            a = np.mean([r["accuracy"] for r in rs]) * 100
            f = np.mean([r["f1_macro"] for r in rs]) * 100
            e = np.mean([r["ece"] for r in rs])
            return f"{a:.2f} / {f:.2f} / {e:.3f}", a

        seeds = sorted({r["seed"] for rs in m.values() for r in rs})
        auto, a = cell("auto")
        lr, b = cell("logreg" if "logreg" in m else "probe")  # probe: ucse's tuned probe, same states
        paper, _ = cell("paper")
        choice = ",".join(
            f"{r['head']}" + (f"{r['weight']}" if r["head"] == "blend" else "") for r in m.get("auto", [])
        )
        d = None if a is None or b is None else a - b
        if d is not None:
            deltas.append(d)
        lines.append(
            f"| {task.replace('Classification', '')} | {shots} | {len(seeds)} | {auto} ({choice}) | {lr} "
            f"| {paper} | "
            f"{'' if d is None else f'{d:+.2f}'} |"
        )
    if deltas:
        lines.append(
            f"\nauto - logreg: mean {np.mean(deltas):+.2f}, worst {min(deltas):+.2f} over {len(deltas)} rows"
        )
    text = "\n".join(lines)
    (out / "peers.md").write_text(text + "\n")
    return text
