"""Does compiling the Gaussian TextCNN's inference forward pay? Eager against ``torch.compile``, one run.

The head at batch 64 is launch-bound on a GPU (docs/RESULTS.md, section 6: ~30 small kernels, 3.5 % of a
0.6B backbone's time where its FLOPs are ~2 %). This times, on the same inputs and in one process, the head's
forward (eval, no grad, bf16 autocast on CUDA as ``ucse`` runs it) eager and compiled: inductor's default mode
and, on CUDA, ``reduce-overhead`` (CUDA graphs: one launch per forward). The head runs its device's default
path; ``paths=cuda`` forces the CUDA one (fused convolutions, no host read) anywhere, and it is compiled with
``fullgraph=True``, which fails if anything in it breaks the graph. Compilation is per input shape
(``dynamic=False``), so a serving path would pad lengths to a few buckets; the first call's time is printed.

Usage: python bench/head_compile.py [device=cuda] [hidden=1024] [batch=64] [seq=32] [repeats=50]
    [modes=default] [paths=cuda]
(``modes``: a comma list of ``torch.compile`` modes; on CUDA ``default,reduce-overhead``.)
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import call_times  # noqa: E402

from ucse.heads import GaussianTextCNN  # noqa: E402


def timed(fn, repeats: int) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` calls after 5 warm-ups (synchronised on CUDA)."""
    return 1e3 * statistics.median(call_times(fn, repeats, warmup=5))


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    device = torch.device(args.get("device", "cuda" if torch.cuda.is_available() else "cpu"))
    h, b, t = int(args.get("hidden", 1024)), int(args.get("batch", 64)), int(args.get("seq", 32))
    repeats = int(args.get("repeats", 50))
    modes = args.get("modes", "default,reduce-overhead" if device.type == "cuda" else "default").split(",")
    torch.manual_seed(0)
    head = GaussianTextCNN(h, 77).to(device).eval()
    one_graph = args.get("paths") == "cuda" or device.type == "cuda"
    if args.get("paths") == "cuda":
        head.fuse_convs, head.host_checks = True, False
    hidden = torch.randn(b, t, h, device=device)
    lengths = torch.randint(t // 4, t + 1, (b,), device=device)
    mask = (torch.arange(t, device=device) < lengths[:, None]).long()  # (B, T) right-padded
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()

    def run(model) -> torch.Tensor:
        with torch.inference_mode(), amp:
            return model(hidden, mask).logits

    eager_ms = timed(lambda: run(head), repeats)
    reference = run(head).float()
    print(f"GaussianTextCNN H={h}, batch {b} x {t} tokens on {device} ({torch.__version__})")
    print(f"  eager: {eager_ms:.3f} ms")
    for mode in modes:
        torch._dynamo.reset()  # noqa: SLF001 - each mode compiles from scratch
        compiled = torch.compile(head, mode=mode, dynamic=False, fullgraph=one_graph)
        t0 = time.perf_counter()
        out = run(compiled).float()
        compile_s = time.perf_counter() - t0
        diff = float((out - reference).abs().max())
        ms = timed(lambda compiled=compiled: run(compiled), repeats)
        print(
            f"  torch.compile mode={mode}: {ms:.3f} ms ({eager_ms / ms:.2f}x eager), "
            f"first call {compile_s:.1f} s, max |logit diff| {diff:.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
