"""The paper-scale training-cost ratio alone, on one GPU: Qwen3-Embedding-0.6B's shape, random weights.

``bench/scale_gpu.py`` measures this ratio among much else (several minutes); this runs only the part a short
device lease needs: ``bench/train_cost.py``'s A (one backbone pass), B (the whole 3-epoch paper-recipe run,
cache build included) and C (one step part by part), then the same fit again on the warm cache under
Lightning's simple profiler, whose table says where the fit's time outside the head's arithmetic goes.

Usage (on a CUDA machine)::

    UCSE_DATA_DIR=<data root> python bench/gpu_ratio.py tokenizer=<folder> [out=<file.json>] [overrides]

Config overrides are the arguments whose key has a dot, e.g. ``optim.compile_step=true`` (the compiled step).
``profile=false`` skips the profiled fit (one whole run less on a short lease).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from scale_gpu import random_model
from train_cost import measure, report

from ucse.config import build_config
from ucse.training import train


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    work, overrides = random_model(args)
    overrides += ["head=textcnn", "recipe=paper", *(f"{k}={v}" for k, v in args.items() if "." in k)]
    cache_root = str(work / "cache")
    out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    out["train_cost"] = r = measure(overrides, cache_root=cache_root)
    report(r, target=1.5)
    if args.get("out"):  # keep what is measured even if the profiled fit fails
        Path(args["out"]).write_text(json.dumps(out, indent=1, default=str))
    if args.get("profile", "true").lower() == "false":
        return
    cfg = build_config([*overrides, "profiler=simple", "progress_bar=false"])
    cfg.cache.dir, cfg.output_dir = cache_root, str(work / "profiled-run")
    result = train(cfg)
    out["profiled_fit_s"] = result.metrics["fit_s"]
    print(f"warm-cache fit under the simple profiler: {result.metrics['fit_s']:.2f} s", flush=True)
    profile = next(Path(result.run_dir).glob("*profile*.txt"), None)
    if profile is not None:
        text = profile.read_text()
        out["profile"] = text
        print(text[:4000], flush=True)
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
