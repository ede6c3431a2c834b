"""The head's share of inference on a GPU, eager against replayed as CUDA graphs (ucse.heads.graphed).

On Qwen3-Embedding-0.6B's shape (random weights) over 2048 Banking77 test texts, batch 64 and 512, for the
served ``blend`` head and the paper's TextCNN: CUDA events around the backbone forward and the head forward
on the same batches (``bench/scale_gpu.py``'s ``head_overhead``, median of 3 passes), each head eager and
through ``GraphedHead`` (its graphs captured in the first, warm-up pass; the capture time printed). Then the
served path end to end: ``UcseEncoder.run_texts`` on the same texts with ``graph_head`` off and on,
alternating, best of 3, and the largest difference of their outputs.

Usage (on a CUDA machine)::

    UCSE_DATA_DIR=<data root> python bench/head_graphs.py tokenizer=<folder> [out=<file.json>]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from scale_gpu import head_overhead, random_model

from ucse.backbone.encoder import FrozenBackbone
from ucse.config import build_config
from ucse.core.encoder import UcseEncoder
from ucse.data import load_classification
from ucse.heads import build_head
from ucse.heads.graphed import GraphedHead


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    _, overrides = random_model(args)
    out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    cfg = build_config([*overrides, "head=blend"])
    backbone = FrozenBackbone(cfg.backbone, "cuda", instruction=cfg.task.instruction)
    texts = load_classification(cfg.task, cfg.data, cfg.seed).texts("test")[:2048]
    for kind in ("blend", "textcnn"):
        cfg = build_config([*overrides, f"head={kind}"])
        head = build_head(cfg.head, 1024, 77, cfg.backbone.pooling).cuda().eval()
        graphed = GraphedHead(head)
        for name, fn in (("eager", head), ("graphed", graphed)):
            for bs in (64, 512):
                t0 = time.perf_counter()
                o = out[f"{kind}_{name}_b{bs}"] = head_overhead(backbone, fn, texts, bs, repeats=3)
                o["wall_s"] = time.perf_counter() - t0
                print(
                    f"head share, {kind} {name}, batch {bs}: backbone {o['backbone_ms']:.1f} ms, "
                    f"head {o['head_ms']:.1f} ms: +{o['overhead_percent']:.2f} % "
                    f"(4 passes {o['wall_s']:.1f} s; graphs held {len(graphed.graphs)})",
                    flush=True,
                )
        assert not graphed.failed, "graph capture failed: see the warning above"

    # The served path: texts -> backbone -> head -> host, graphs off and on.
    head = build_head(build_config([*overrides, "head=blend"]).head, 1024, 77, cfg.backbone.pooling)
    enc = UcseEncoder(head.cuda().eval(), {}, backbone)
    times: dict[str, list[float]] = {"eager": [], "graphed": []}
    res = {}
    for i in range(4):  # one warm-up round, then 3 timed of each
        for name, flag in (("eager", False), ("graphed", True)):
            enc.graph_head = flag
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            res[name] = enc.run_texts(texts)
            if i:
                times[name].append(time.perf_counter() - t0)
    a, b = min(times["eager"]), min(times["graphed"])
    e, g = res["eager"], res["graphed"]
    diff = max(float(abs(getattr(e, k) - getattr(g, k)).max()) for k in ("mean", "logits"))
    out["run_texts"] = {"eager_s": times["eager"], "graphed_s": times["graphed"], "max_abs_diff": diff}
    print(
        f"run_texts, 2048 texts, blend: eager {a:.3f} s, graphed {b:.3f} s ({a / b:.3f}x); "
        f"outputs differ by at most {diff:.2e}",
        flush=True,
    )
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
