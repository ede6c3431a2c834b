"""How time, disk and memory grow with the data: ``ucse train`` (MiniLM-L6) on 10k, 30k and 100k texts.

Each size runs in a fresh child process through the product's pipeline (``ucse.pipeline.run_training``:
cache build, one epoch of the paper's TextCNN, the uncertainty profile), on Banking77's training texts
(shuffled once) repeated with a numbered suffix (``"<text> (copy 3)"``) so every text is distinct and is
encoded, with their real labels; validation is 1,000 further training texts (never repeated) and test the
first 1,000 of the official test split, at every size (in the cache too).
The child samples its own ``/proc/self/status`` every 20 ms and reports:

- ``VmHWM``: the kernel's peak resident set, which counts the pages of the memory-mapped cache the run has
  touched (clean, file-backed, and reclaimable: the kernel drops them under pressure);
- the peak of ``RssAnon``: the memory the run itself holds (heap, tensors, arrays), which is what has to stay
  flat for a corpus to fit;
- wall time of each phase, and the cache's size on disk.

Usage: UCSE_DATA_DIR=../shared/data python bench/scale.py [overrides] [--sizes 10000 30000 100000]
(overrides go to every run, after the bench's own: ``cache.enabled=false`` measures the recompute path,
``optim.epochs=3`` the paper's epochs.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import numpy as np

DATA = Path(os.environ.get("UCSE_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
TASK = "Banking77Classification"


def status_kib(field: str) -> int:
    """One ``kB`` field of ``/proc/self/status`` (0 where the kernel does not report it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class PeakSampler(threading.Thread):
    """Samples RssAnon / RssFile every ``every`` seconds and keeps their peaks (KiB).

    At each new RssAnon peak it also notes where the main thread was (its innermost ucse frames), so the
    report says which step holds the most memory.
    """

    def __init__(self, every: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.every, self.peak_anon, self.peak_file, self.stop = every, 0, 0, threading.Event()
        self.main, self.peak_at = threading.main_thread().ident, ""

    def _where(self) -> str:
        frame = sys._current_frames().get(self.main)  # noqa: SLF001 - the documented way to read a thread's stack
        stack = traceback.extract_stack(frame) if frame is not None else []
        ours = [f for f in stack if "/ucse/" in f.filename]
        return " < ".join(f"{f.filename.split('/ucse/')[-1]}:{f.name}" for f in reversed(ours[-3:]))

    def run(self) -> None:
        """Sample until ``stop`` is set."""
        while not self.stop.is_set():
            anon = status_kib("RssAnon")
            if anon > self.peak_anon:
                self.peak_anon, self.peak_at = anon, self._where()
            self.peak_file = max(self.peak_file, status_kib("RssFile"))
            self.stop.wait(self.every)


VALIDATION = 1000
"""Training texts held out as the validation split (early stopping, calibration), never repeated."""


def _shuffled_train() -> list[dict]:
    """Banking77's training rows, shuffled once (seeded): every label among the first few."""
    rows = [json.loads(line) for line in (DATA / TASK / "train.jsonl").open()]
    return [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]


def validation_rows() -> list[dict]:
    """The first :data:`VALIDATION` of the shuffled training texts: official test rows choose nothing."""
    return _shuffled_train()[:VALIDATION]


def texts_of(n: int) -> tuple[list[str], list[int]]:
    """``n`` distinct texts with real labels: Banking77's training texts, repeated with a numbered suffix."""
    rows = _shuffled_train()[VALIDATION:]  # the first ones are the validation split (validation_rows)
    out, labels = [], []
    for i in range(n):
        r = rows[i % len(rows)]
        copy = i // len(rows)
        out.append(r["text"] if copy == 0 else f"{r['text']} (copy {copy})")
        labels.append(int(r["label"]))
    return out, labels


def child(n: int, overrides: list[str]) -> dict:
    """One run on ``n`` training texts with the config ``overrides``, in this process; returns the figures."""
    sampler = PeakSampler()
    sampler.start()
    t0 = time.perf_counter()
    from datasets import Dataset, DatasetDict

    from ucse.config import build_config
    from ucse.pipeline import run_training

    train_t, train_y = texts_of(n)
    test = [json.loads(line) for line in (DATA / TASK / "test.jsonl").open()]
    val, tst = validation_rows(), test[:1000]
    dd = DatasetDict(
        {
            "train": Dataset.from_dict({"text": train_t, "label": train_y}),
            "validation": Dataset.from_dict(
                {"text": [r["text"] for r in val], "label": [r["label"] for r in val]}
            ),
            "test": Dataset.from_dict({"text": [r["text"] for r in tst], "label": [r["label"] for r in tst]}),
        }
    )
    work = Path(tempfile.mkdtemp(prefix="ucse-scale-"))
    cfg = build_config(
        [
            f"task.name=scale-{n}",
            "backbone=minilm-l6",
            "head=textcnn",
            "recipe=paper",
            "optim.epochs=1",
            f"cache.dir={work / 'cache'}",
            f"output_dir={work / 'run'}",
            "progress_bar=false",
            *overrides,
        ]
    )
    setup_s = time.perf_counter() - t0
    result, _ = run_training(cfg, dd)
    total_s = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    m = result.metrics
    shutil.rmtree(work)  # this run's own temporary folder (the 100k cache is over a GiB)
    return {
        "texts": n,
        "total_s": total_s,
        "setup_s": setup_s,
        "states_s": m["timing"]["states_s"],
        "fit_s": m["fit_s"],
        "overrides": overrides,
        "after_fit_s": total_s - setup_s - m["timing"]["total_s"],
        "cache_mib": m["data"]["cache_bytes"] / 2**20,
        "vm_hwm_mib": status_kib("VmHWM") / 1024,
        "peak_anon_mib": sampler.peak_anon / 1024,
        "peak_anon_at": sampler.peak_at,
        "peak_file_mib": sampler.peak_file / 1024,
        "test_accuracy": m["test"]["accuracy"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[10_000, 30_000, 100_000])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument(
        "overrides",
        nargs="*",
        help="config overrides, e.g. cache.enabled=false (recompute) or optim.epochs=3",
    )
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.overrides)), flush=True)
        return
    rows = []
    for n in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(n), *args.overrides],
            capture_output=True,
            text=True,
            check=False,
        )
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"size {n} failed:\n{out.stderr[-3000:]}")
        rows.append(json.loads(line[len("RESULT ") :]))
        print(json.dumps(rows[-1]), flush=True)
    print(
        "\n| texts | wall s | cache build s | fit s (1 epoch) | after the fit s | cache MiB | VmHWM MiB | "
        "peak RssAnon MiB | test acc |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['texts']:,} | {r['total_s']:.1f} | {r['states_s']:.1f} | {r['fit_s']:.1f} | "
            f"{r['after_fit_s']:.1f} | {r['cache_mib']:.0f} | {r['vm_hwm_mib']:.0f} | "
            f"{r['peak_anon_mib']:.0f} | {r['test_accuracy']:.4f} |"
        )
    a, b = rows[0], rows[-1]
    k = b["texts"] / a["texts"]
    print(
        f"\n{b['texts']:,} vs {a['texts']:,} texts (x{k:.0f}): wall x{b['total_s'] / a['total_s']:.2f}, "
        f"cache x{b['cache_mib'] / a['cache_mib']:.2f}, VmHWM x{b['vm_hwm_mib'] / a['vm_hwm_mib']:.2f}, "
        f"peak RssAnon x{b['peak_anon_mib'] / a['peak_anon_mib']:.2f}"
    )


if __name__ == "__main__":
    main()
