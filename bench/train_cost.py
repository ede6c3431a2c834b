"""Training cost relative to one backbone pass (MiniLM-L6 + Gaussian TextCNN on Banking77).

Measured in one run on the same texts:
  A. one frozen-backbone forward pass over every text the run encodes (train + validation + test);
  B. the whole 3-epoch training run, hidden-state cache build included (fresh cache folder);
and the ratio B / A, next to its FLOP floor
  1 + epochs * (head forward+backward FLOPs on train tokens) / (backbone forward FLOPs on all tokens),
counted with torch's FlopCounterMode on a sample batch, and the cache's size on disk.
A run that recomputed the backbone every epoch would sit near 1 + epochs.

Usage: UCSE_DATA_DIR=../shared/data python bench/train_cost.py [key=value overrides]
"""

from __future__ import annotations

import sys
import tempfile
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from ucse.backbone.encoder import FrozenBackbone
from ucse.config import build_config
from ucse.data import load_classification
from ucse.heads import build_head
from ucse.training import resolve_device, train

SPLITS = ("train", "validation", "test")


def count_flops(fn) -> int:
    """FLOPs of one call of ``fn`` (matmuls and convolutions, as torch counts them)."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def backbone_flops_per_token(backbone: FrozenBackbone, texts: list[str], device: torch.device) -> float:
    """Forward FLOPs per real token of the backbone on one padded batch of ``texts``."""
    enc = backbone.tokenizer(
        backbone.format(texts),
        padding=True,
        truncation=True,
        max_length=backbone.max_length,
        return_tensors="pt",
    ).to(device)
    with torch.inference_mode():
        flops = count_flops(lambda: backbone.model(**enc))
    return flops / int(enc["attention_mask"].sum())


def main(argv: list[str]) -> None:
    cache_root = tempfile.mkdtemp(prefix="ucse-bench-cache-")
    cfg = build_config(["task=Banking77Classification", "backbone=minilm-l6", "head=textcnn", *argv])
    cfg.cache.dir = cache_root
    cfg.output_dir = tempfile.mkdtemp(prefix="ucse-bench-run-")
    cfg.progress_bar = False
    device = resolve_device(cfg.device)
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    texts = {s: data.texts(s) for s in SPLITS}
    backbone = FrozenBackbone(cfg.backbone, device, instruction=cfg.task.instruction)
    all_texts = [t for s in SPLITS for t in texts[s]]

    # A: one backbone pass over everything, after a short warm-up so one-off start-up costs don't count.
    for _ in backbone.iter_states(all_texts[:128]):
        pass
    t0 = time.perf_counter()
    n_tokens = {s: 0 for s in SPLITS}
    for s in SPLITS:
        for _, _, mask in backbone.iter_states(texts[s]):
            n_tokens[s] += int(mask.sum())
    backbone_s = time.perf_counter() - t0

    # FLOP floor from a real sample batch: per-token costs of backbone forward and head forward+backward.
    sample = texts["train"][:64]
    _, hidden, mask = next(iter(backbone.iter_states(sample, batch_size=64)))
    tok = int(mask.sum())
    bb_per_tok = backbone_flops_per_token(backbone, sample, device)
    head = build_head(cfg.head, backbone.hidden_size, data.num_classes, cfg.backbone.pooling).to(device)

    def head_step():
        out = head(hidden.float(), mask)
        out.logits.sum().backward()

    head_per_tok = count_flops(head_step) / tok
    floor = 1 + cfg.optim.epochs * head_per_tok * n_tokens["train"] / (bb_per_tok * sum(n_tokens.values()))

    # B: the whole run, cache build included.
    del backbone  # free the pass-A copy; the run loads its own
    t0 = time.perf_counter()
    result = train(cfg)
    run_s = time.perf_counter() - t0
    m = result.metrics
    print(f"machine: {torch.get_num_threads()} torch threads, device {device}")
    print(
        f"texts: {sum(len(v) for v in texts.values())}  tokens: {sum(n_tokens.values())} "
        f"(train {n_tokens['train']})  backbone precision {cfg.backbone.precision.value}"
    )
    print(f"A  backbone pass over all texts : {backbone_s:8.2f} s")
    print(
        f"B  3-epoch run incl. cache build: {run_s:8.2f} s  (cache build {m['timing']['states_s']:.2f} s, "
        f"fit {m['fit_s']:.2f} s)"
    )
    print(
        f"ratio B/A                        : {run_s / backbone_s:8.2f}   "
        "(target <= 2.0; recompute-every-epoch ~ 4)"
    )
    print(
        f"FLOP floor of the ratio          : {floor:8.2f}   "
        f"(head fwd+bwd {head_per_tok / 1e6:.1f} MFLOP/token, "
        f"backbone fwd {bb_per_tok / 1e6:.1f} MFLOP/token)"
    )
    print(f"cache size on disk               : {m['data']['cache_bytes'] / 2**20:8.1f} MiB")
    print(f"test accuracy                    : {m['test']['accuracy']:.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
