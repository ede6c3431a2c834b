"""What the per-step non-finite-loss check costs on a GPU (``bench/scale_gpu.py only=finite``).

Uses ``bench/scale_gpu.py``'s randomly initialised Qwen3-Embedding-0.6B-shaped backbone. On a CUDA machine::

    UCSE_DATA_DIR=<data root> python bench/scale_gpu.py only=finite tokenizer=<folder> [out=<file.json>]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_gpu import overhead_variants, random_model  # noqa: E402
from train_cost import measure, report  # noqa: E402

from ucse.config import build_config  # noqa: E402
from ucse.training import train  # noqa: E402


def finite_check_cost(args: dict) -> None:
    """What the per-step non-finite-loss check costs on a GPU, and cuDNN autotuning's effect on the head.

    The check (``UcseModule._check_finite``) reads one scalar back to the host per optimisation step. The same
    warm-cache run is fitted with the check and with it replaced by a no-op, alternating, ``repeats`` times
    each; the training-cost ratio of the current code is measured first (``bench/train_cost.py``).
    """
    from ucse.training.module import UcseModule

    work, overrides = random_model(args)
    cache_root = str(work / "cache")
    out: dict = {"device": torch.cuda.get_device_name()}
    r = measure(overrides, cache_root=cache_root)
    report(r, target=1.3)
    out["train_cost"] = r
    checked = UcseModule._check_finite  # noqa: SLF001
    fits: dict[str, list[float]] = {"check": [], "no_check": []}
    for i in range(2 * int(args.get("repeats", 3))):
        mode = "check" if i % 2 == 0 else "no_check"
        UcseModule._check_finite = checked if mode == "check" else (lambda self, *a: None)  # noqa: SLF001
        cfg = build_config([*overrides, "progress_bar=false"])
        cfg.cache.dir, cfg.output_dir = cache_root, str(work / f"fit-{i}")
        fits[mode].append(train(cfg).metrics["fit_s"])
        print(f"fit {i} ({mode}): {fits[mode][-1]:.2f} s", flush=True)
    UcseModule._check_finite = checked  # noqa: SLF001
    out["fit_s"] = fits
    med = {k: sorted(v)[len(v) // 2] for k, v in fits.items()}
    print(
        f"median fit: check {med['check']:.2f} s, no check {med['no_check']:.2f} s, "
        f"check costs {100 * (med['check'] / med['no_check'] - 1):+.2f} %",
        flush=True,
    )
    variants = {
        f"cudnn_benchmark_{flag}": lambda head, flag=flag: setattr(torch.backends.cudnn, "benchmark", flag)
        for flag in (False, True)
    }
    overhead_variants(overrides, variants, out)
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(out, indent=1, default=str))
