"""The Gaussian TextCNN's execution paths on this machine's CPU, one run, ratios to the CPU default.

``GaussianTextCNN`` runs either one convolution per kernel width or one over kernels zero-padded to the
widest (``fuse_convs``), and either reads the mask's checks and the needed time extension back to the host or
pads to the widest extension and marks refused rows NaN (``host_checks``). On CUDA the default: fused, no
host read (docs/RESULTS.md, section 6); this measures the four paths on the CPU, where the default is
per-width with the host read: inference (eval, no grad) and a training step (forward + backward), at
MiniLM-L6's width (H = 384) on batches shaped like Banking77's (right-padded, 8-32 real tokens of 32).

Usage: python bench/head_paths.py [hidden=384] [batch=64] [seq=32] [repeats=30] [threads=<torch default>]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import call_times  # noqa: E402

from ucse.heads import GaussianTextCNN  # noqa: E402

PATHS = {  # (fuse_convs, host_checks)
    "per-width, host read (CPU default)": (False, True),
    "per-width, sync-free": (False, False),
    "fused, sync-free (CUDA default)": (True, False),
    "fused, host read": (True, True),
}


def timed(fn, repeats: int) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` calls after 3 warm-ups."""
    return 1e3 * statistics.median(call_times(fn, repeats, warmup=3))


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    h, b, t = int(args.get("hidden", 384)), int(args.get("batch", 64)), int(args.get("seq", 32))
    repeats = int(args.get("repeats", 30))
    if "threads" in args:
        torch.set_num_threads(int(args["threads"]))
    torch.manual_seed(0)
    head = GaussianTextCNN(h, 77)
    hidden = torch.randn(b, t, h)
    lengths = torch.randint(8, t + 1, (b,))
    mask = (torch.arange(t) < lengths[:, None]).long()  # (B, T) right-padded
    print(f"GaussianTextCNN H={h}, batch {b} x {t} tokens, {torch.get_num_threads()} torch threads, fp32")
    rows = {}
    for name, (fuse, host) in PATHS.items():
        head.fuse_convs, head.host_checks = fuse, host

        def infer() -> None:
            with torch.inference_mode():
                head.eval()(hidden, mask)

        def train_step() -> None:
            head.train()(hidden, mask).logits.square().mean().backward()
            head.zero_grad(set_to_none=True)

        rows[name] = (timed(infer, repeats), timed(train_step, repeats))
    base = rows["per-width, host read (CPU default)"]
    print(f"{'path':<36} {'inference ms':>12} {'ratio':>6} {'train step ms':>14} {'ratio':>6}")
    for name, (inf, step) in rows.items():
        print(f"{name:<36} {inf:12.2f} {inf / base[0]:6.2f} {step:14.2f} {step / base[1]:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
