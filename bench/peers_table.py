"""The table ``bench/peers.py`` prints: its rows averaged over seeds per task and size, with the machine."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import numpy as np


def ece(probs: np.ndarray, y: np.ndarray) -> float:
    """Top-label expected calibration error, 15 equal-width bins (torchmetrics).

    In float64, as ucse computes it: probabilities that differ below float32's resolution (a very high
    temperature) would otherwise tie, and torchmetrics' argmax of a tie is class 0, not the prediction.
    """
    import torch
    from torchmetrics.functional.classification import multiclass_calibration_error

    return float(
        multiclass_calibration_error(
            torch.as_tensor(probs, dtype=torch.float64), torch.as_tensor(y), probs.shape[1], n_bins=15
        )
    )


def ece_gap(out: Path, stems: list[tuple[str, str]], draws: int = 200) -> tuple[float, float, str] | None:
    """Mean ECE(a) - ECE(b) over seeds, its standard error, and how that was estimated.

    With every pair's test probabilities saved: a bootstrap that, per draw, resamples the test texts once
    (every seed scores the same texts, so their errors are correlated) and the seeds with replacement (the
    seed-to-seed spread of the models), ``"boot"``. Without them: the per-seed ECE values of the rows, their
    differences' standard deviation over sqrt(seeds), ``"seeds"``; None with fewer than two seeds.

    Args:
        out: the bench's folder (``rows/<row>.json``, ``probs/<row>.npy``, ``probs/<task>-test-labels.npy``).
        stems: (a row, b row) file stems, one pair per seed.
        draws: bootstrap draws.
    """
    labels = out / "probs" / f"{stems[0][0].split('-')[0]}-test-labels.npy"
    files = [[out / "probs" / f"{s}.npy" for s in pair] for pair in stems]
    if labels.is_file() and all(f.is_file() for pair in files for f in pair):
        y = np.load(labels)
        pairs = [[np.load(f).astype(np.float64) for f in pair] for pair in files]
        diffs = [ece(pa, y) - ece(pb, y) for pa, pb in pairs]
        rng = np.random.default_rng(0)
        boot = []
        for _ in range(draws):
            i = rng.integers(0, len(y), len(y))  # one resample of the test texts, shared by every seed
            seeds = rng.integers(0, len(pairs), len(pairs))
            gap = {s: ece(pairs[s][0][i], y[i]) - ece(pairs[s][1][i], y[i]) for s in set(seeds.tolist())}
            boot.append(np.mean([gap[s] for s in seeds]))
        return float(np.mean(diffs)), float(np.std(boot, ddof=1)), "boot"
    rows = [[out / "rows" / f"{s}.json" for s in pair] for pair in stems]
    if len(rows) < 2 or not all(f.is_file() for pair in rows for f in pair):
        return None
    diffs = [json.loads(a.read_text())["ece"] - json.loads(b.read_text())["ece"] for a, b in rows]
    return float(np.mean(diffs)), float(np.std(diffs, ddof=1) / np.sqrt(len(diffs))), "seeds"


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
    """The rows under ``out/rows``, per task and size (means over seeds); also saved to ``out/peers.md``.

    Train time: ucse's whole run (encoding its rows, selection, refit, profile, test outputs) against the
    logistic regression's cross-validated fit on vectors already encoded.
    """
    rows = [json.loads(p.read_text()) for p in sorted((out / "rows").glob("*.json"))]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["task"], r["shots"]), {}).setdefault(r["method"], []).append(r)
    lines = [
        f"machine: {machine()}",
        "",
        "| task | per class | seeds | auto acc / F1 / ECE (choice) | tuned logreg acc / F1 / ECE "
        "| paper acc / F1 / ECE | auto - logreg | ECE floor auto / logreg | ECE auto - logreg (se) "
        "| ECE logreg+T | ECE auto - logreg+T (se) | train s: auto run / logreg fit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
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
        # No fallback to ucse's own probe: this column is the independent baseline or nothing.
        lr, b = cell("logreg")
        paper, _ = cell("paper")
        choice = ",".join(
            f"{r['head']}" + (f"{r['weight']}" if r["head"] == "blend" else "") for r in m.get("auto", [])
        )
        d = None if a is None or b is None else a - b
        if d is not None:
            deltas.append(d)

        def floor(name):
            rs = [r["ece_floor"] for r in m.get(name, []) if "ece_floor" in r]
            return f"{np.mean(rs):.3f}" if rs else "—"

        def seconds(name, key):
            rs = [r[key] for r in m.get(name, []) if key in r]
            return f"{np.mean(rs):.1f}" if rs else "—"

        def gap(base):
            have = {r["seed"] for r in m.get("auto", [])} & {r["seed"] for r in m.get(base, [])}
            pairs = [(f"{task}-{shots}-s{s}-auto", f"{task}-{shots}-s{s}-{base}") for s in sorted(have)]
            g = ece_gap(out, pairs) if pairs else None
            return "—" if g is None else f"{g[0]:+.3f} ({g[1]:.3f} {g[2]})"

        ece_t = [r["ece"] for r in m.get("logreg_t", [])]
        lines.append(
            f"| {task.replace('Classification', '')} | {shots} | {len(seeds)} | {auto} ({choice}) | {lr} "
            f"| {paper} | "
            f"{'' if d is None else f'{d:+.2f}'} | {floor('auto')} / {floor('logreg')} | "
            f"{gap('logreg')} | {f'{np.mean(ece_t):.3f}' if ece_t else '—'} | {gap('logreg_t')} | "
            f"{seconds('auto', 'train_s')} / {seconds('logreg', 'fit_s')} |"
        )
    if deltas:
        lines.append(
            f"\nauto - logreg: mean {np.mean(deltas):+.2f}, worst {min(deltas):+.2f} over {len(deltas)} rows"
        )
    text = "\n".join(lines)
    (out / "peers.md").write_text(text + "\n")
    return text
