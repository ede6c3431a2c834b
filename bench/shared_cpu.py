"""A default run beside another busy process: how torch's OpenMP threads wait.

Usage: ``UCSE_DATA_DIR=../shared/data python bench/shared_cpu.py [--labels 8] [--rows 20] [--busy 1]
[--policies default ucse PASSIVE] [--timeout 900]``. Writes a small own-file task (``--labels`` Banking77
intents x ``--rows`` training texts, as a CSV), then times ``ucse train`` on it in fresh processes, each
with a fresh output folder and the same warm cache, alone and beside ``--busy`` processes that spin on the
CPU (``while True: pass``), under each policy: ``default`` is GNU OpenMP's own wait (a thread spins 300,000
turns, then sleeps; run with an empty ``OMP_WAIT_POLICY``, which libgomp warns about and ignores, since
``import ucse`` would otherwise shorten the spin), ``ucse`` sets neither variable (``import ucse`` then sets
``GOMP_SPINCOUNT=10000``), ``ACTIVE`` spins without end and ``PASSIVE`` sleeps at once. Prints each run's
wall and fit seconds, the test accuracy (the same head either way: the policy changes when a thread
waits, not what it computes) and the ratios busy / alone, from one run. On a 2-core machine one busy
process takes one core, and each of the head's small ops waits for a descheduled thread. A run past
``--timeout`` is reported as such.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUSY = "while True: pass"


def write_task(data_dir: Path, labels: int, rows: int, out: Path) -> Path:
    """``labels`` Banking77 intents (the first in name order), ``rows`` training texts each, as one CSV."""
    by_label: dict[str, list[str]] = {}
    with (data_dir / "Banking77Classification" / "train.jsonl").open() as f:
        for line in f:
            r = json.loads(line)
            by_label.setdefault(r["label_text"], []).append(r["text"])
    chosen = sorted(by_label)[:labels]
    path = out / "task.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for name in chosen:
            w.writerows((t, name) for t in by_label[name][:rows])
    return path


def train(task: Path, out: Path, policy: str, busy: int, timeout: float) -> dict:
    """One ``ucse train`` in a fresh process under ``policy``, beside ``busy`` spinning processes."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if policy != "ucse":  # ucse: neither set, so `import ucse` sets its own spin
        env["OMP_WAIT_POLICY"] = "" if policy == "default" else policy
    hogs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(busy)]
    try:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "ucse", "train", f"data.path={task}", f"output_dir={out}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        wall = time.perf_counter() - start
    except subprocess.TimeoutExpired:
        return {"wall_s": None, "fit_s": None, "accuracy": None}
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    if proc.returncode != 0:
        raise SystemExit(f"ucse train failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    return {"wall_s": wall, "fit_s": metrics["fit_s"], "accuracy": metrics["test"]["accuracy"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--labels", type=int, default=8)
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--busy", type=int, default=1, help="spinning processes beside the busy runs")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--policies", nargs="+", default=["default", "ucse", "PASSIVE"])
    a = p.parse_args()
    data_dir = Path(os.environ.get("UCSE_DATA_DIR", "../shared/data"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = write_task(data_dir, a.labels, a.rows, root)
        os.environ.setdefault("UCSE_CACHE_DIR", str(root / "cache"))
        train(task, root / "warm-up", "PASSIVE", 0, a.timeout)  # fills the cache: the backbone pass once
        runs = {}
        for policy in a.policies:
            for busy in (0, a.busy):
                runs[policy, busy] = train(task, root / f"{policy}-{busy}", policy, busy, a.timeout)
                r = runs[policy, busy]
                shown = (
                    "timed out"
                    if r["wall_s"] is None
                    else (
                        f"wall {r['wall_s']:.1f} s, fit {r['fit_s']:.1f} s, test accuracy {r['accuracy']:.4f}"
                    )
                )
                print(f"OMP_WAIT_POLICY={policy:<8} busy processes {busy}: {shown}", flush=True)
    print(f"cpus {os.cpu_count()}, {a.labels} labels x {a.rows} rows")
    for policy in a.policies:
        alone, beside = runs[policy, 0]["wall_s"], runs[policy, a.busy]["wall_s"]
        ratio = (
            f"{beside / alone:.2f}" if alone and beside else f"> {a.timeout / alone:.1f}" if alone else "n/a"
        )
        print(f"{policy}: wall beside {a.busy} busy / alone = {ratio}")
    base = runs[a.policies[0], 0]["wall_s"]
    for policy in a.policies[1:]:
        alone = runs[policy, 0]["wall_s"]
        if base and alone:
            print(f"alone: {policy} / {a.policies[0]} = {alone / base:.2f}")


if __name__ == "__main__":
    main()
