"""The Gaussian TextCNN's execution paths on this machine's CPU, one run, ratios to per-width convolutions.

``GaussianTextCNN`` runs one convolution per kernel width, one over kernels zero-padded to the widest
(``fuse_convs``) or one matrix product per width over the unfolded windows (``windows_matmul``), and either
reads the mask's checks and the needed time extension back to the host or pads to the widest extension and
marks refused rows NaN (``host_checks``). On CUDA the default: fused, no host read (docs/RESULTS.md, section
6); on the CPU the host read, with the matrix products under bf16 autocast and the convolutions in fp32.
This measures the paths on the CPU: inference (eval, no grad) and a training step (forward + backward), in
fp32 and under bf16 autocast (how training and inference run where the backbone runs bf16), at MiniLM-L6's
width (H = 384) on batches shaped like Banking77's (right-padded, 8-32 real tokens of 32).

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

PATHS = {  # (fuse_convs, windows_matmul, host_checks)
    "per-width conv, host read": (False, False, True),
    "per-width conv, sync-free": (False, False, False),
    "fused conv, sync-free (CUDA default)": (True, False, False),
    "fused conv, host read": (True, False, True),
    "window matmul, host read (CPU bf16 default)": (False, True, True),
}
BASE = "per-width conv, host read"


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
    print(f"GaussianTextCNN H={h}, batch {b} x {t} tokens, {torch.get_num_threads()} torch threads")
    for precision in ("fp32", "bf16 autocast"):
        rows = {}
        for name, (fuse, matmul, host) in PATHS.items():
            head.fuse_convs, head.windows_matmul, head.host_checks = fuse, matmul, host
            cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision != "fp32")

            def infer() -> None:
                with torch.inference_mode(), cast:
                    head.eval()(hidden, mask)

            def train_step() -> None:
                with cast:
                    loss = head.train()(hidden, mask).logits.float().square().mean()
                loss.backward()
                head.zero_grad(set_to_none=True)

            rows[name] = (timed(infer, repeats), timed(train_step, repeats))
        base = rows[BASE]
        print(f"\n{precision}")
        print(f"{'path':<44} {'inference ms':>12} {'ratio':>6} {'train step ms':>14} {'ratio':>6}")
        for name, (inf, step) in rows.items():
            print(f"{name:<44} {inf:12.2f} {inf / base[0]:6.2f} {step:14.2f} {step / base[1]:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
