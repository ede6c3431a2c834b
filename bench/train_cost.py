"""Training cost relative to one backbone pass (MiniLM-L6 + Gaussian TextCNN on Banking77).

Measured in one run on the same texts:
  A. one frozen-backbone forward pass over every text the run encodes (train + validation + test), timed
     before and after B and averaged (the machine's speed drifts between them);
  B. the whole training run (the paper's recipe, 3 epochs, unless overridden), hidden-state cache build
     included (fresh cache folder);
  C. where one training step's time goes: 30 real batches read from the run's cache, timed part by part
     (batch assembly, head forward + losses, backward, optimiser), against the fit's time per step;
and the ratio B / A, next to its FLOP floor
  1 + epochs * (head forward+backward FLOPs on train tokens) / (backbone forward FLOPs on all tokens),
counted with torch's FlopCounterMode on a sample batch, and the cache's size on disk.
A run that recomputed the backbone every epoch would sit near 1 + epochs.

Usage: UCSE_DATA_DIR=../shared/data python bench/train_cost.py [key=value overrides]
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from ucse.backbone.encoder import FrozenBackbone
from ucse.backbone.precision import effective_precision
from ucse.config import Precision, build_config
from ucse.config.heap import keep_freed_heap
from ucse.data import load_classification
from ucse.heads import build_head
from ucse.training import resolve_device, train
from ucse.training.datamodule import StatesDataModule
from ucse.training.module import UcseModule
from ucse.training.run import build_states

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


def head_flops_per_token(cfg, backbone: FrozenBackbone, num_classes: int, sample: list[str], device) -> float:
    """Forward+backward FLOPs per real token of the configured head on one real batch of ``sample``."""
    _, hidden, mask = next(iter(backbone.iter_states(sample, batch_size=len(sample))))
    head = build_head(cfg.head, backbone.hidden_size, num_classes, cfg.backbone.pooling).to(device)

    def head_step():
        out = head(hidden.float(), mask)
        out.logits.sum().backward()

    return count_flops(head_step) / int(mask.sum())


def step_breakdown(cfg, data, backbone: FrozenBackbone, device: torch.device, n: int = 30) -> dict:
    """Milliseconds per training step spent in each part, over ``n`` real batches of the cached states.

    The same head, losses and fused AdamW as the run, outside Lightning's loop (so the fit's remaining time
    per step is the loop, logging, validation and checkpoints).
    """
    states, _ = build_states(cfg, backbone, data)  # the run's cache entry: nothing is encoded again
    labels = {s: data.labels(s) for s in SPLITS}
    dm = StatesDataModule(states, labels, cfg.optim.batch_size, cfg.seed)
    head = build_head(cfg.head, backbone.hidden_size, data.num_classes, cfg.backbone.pooling).to(device)
    module = UcseModule(head, data.num_classes, cfg.loss, cfg.optim).to(device)
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.optim.lr, fused=True)
    bf16 = effective_precision(cfg.head_precision, device) is Precision.bf16
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    parts = {"batch": 0.0, "forward+losses": 0.0, "backward": 0.0, "optimizer": 0.0}
    loader = iter(dm.train_dataloader())
    for i in range(n + 5):  # 5 warm-up steps
        t0 = time.perf_counter()
        hidden, mask, y = (t.to(device) for t in next(loader))
        sync()
        t1 = time.perf_counter()
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            loss = module.training_step((hidden, mask, y), i)
        sync()
        t2 = time.perf_counter()
        loss.backward()
        sync()
        t3 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        t4 = time.perf_counter()
        if i >= 5:
            for k, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                parts[k] += dt * 1e3 / n
    return parts


def warm_up(backbone: FrozenBackbone, all_texts: list[str], device: torch.device) -> None:
    """Run the backbone untimed: 128 texts on a CPU, a whole pass on a GPU.

    On a GPU kernels are selected per new sequence length, which the first pass pays.
    """
    for _ in backbone.iter_states(all_texts if device.type == "cuda" else all_texts[:128]):
        pass


def timed_pass(backbone: FrozenBackbone, texts: dict[str, list[str]], device: torch.device):
    """Seconds of one backbone pass over every split's texts, and the real tokens per split."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    n_tokens = {s: 0 for s in SPLITS}
    for s in SPLITS:
        for _, _, mask in backbone.iter_states(texts[s]):
            n_tokens[s] += int(mask.sum())
    sync()
    return time.perf_counter() - t0, n_tokens


def measure(argv: list[str], cache_root: str | None = None) -> dict:
    """Run A (one backbone pass) and B (the whole training run) in this process; return the figures."""
    cache_root = cache_root or tempfile.mkdtemp(prefix="ucse-bench-cache-")
    cfg = build_config(
        ["task=Banking77Classification", "backbone=minilm-l6", "head=textcnn", "recipe=paper", *argv]
    )
    cfg.cache.dir = cache_root
    cfg.output_dir = tempfile.mkdtemp(prefix="ucse-bench-run-")
    cfg.progress_bar = False
    device = resolve_device(cfg.accelerator)
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    texts = {s: data.texts(s) for s in SPLITS}
    backbone = FrozenBackbone(cfg.backbone, device, instruction=cfg.task.instruction)
    backbone_precision = backbone.precision.value
    all_texts = [t for s in SPLITS for t in texts[s]]

    # A: one backbone pass over everything, after a warm-up so one-off start-up costs don't count.
    warm_up(backbone, all_texts, device)
    before_s, n_tokens = timed_pass(backbone, texts, device)

    # FLOP floor from a real sample batch: per-token costs of backbone forward and head forward+backward, on
    # 64 training texts of similar length around the median (the pass and the training both batch texts of
    # similar length; 64 unsorted texts padded to the longest counted 0.320 head/backbone instead of 0.286).
    by_len = sorted(texts["train"], key=len)
    mid = len(by_len) // 2
    sample = by_len[max(0, mid - 32) : mid + 32]
    bb_per_tok = backbone_flops_per_token(backbone, sample, device)
    head_per_tok = head_flops_per_token(cfg, backbone, data.num_classes, sample, device)

    # B: the whole run, cache build included.
    del backbone  # free the pass-A copy; the run loads its own
    if device.type == "cuda":
        torch.cuda.empty_cache()
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    result = train(cfg)
    run_s = time.perf_counter() - t0
    # pages the kernel had to map in during B: memory returned to the system and taken back between steps
    run_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
    m = result.metrics
    epochs = cfg.optim.epochs  # as the run set it (recipe=auto derives it from the data size)
    floor = 1 + epochs * head_per_tok * n_tokens["train"] / (bb_per_tok * sum(n_tokens.values()))
    steps = epochs * -(-len(texts["train"]) // cfg.optim.batch_size)

    # A again, after B: on a shared machine the speed drifts by 10-20 % within minutes (pass A alone moved
    # 9.1-12.5 s over one session), so B is divided by the mean of the passes either side of it.
    backbone = FrozenBackbone(cfg.backbone, device, instruction=cfg.task.instruction)  # also C's cache key
    warm_up(
        backbone, all_texts, device
    )  # as before the first pass: a cold model would lengthen A, so flatter B/A
    after_s, _ = timed_pass(backbone, texts, device)
    backbone_s = (before_s + after_s) / 2

    # C: one step, part by part, on the batches the run trained on (its cache entry).
    parts = step_breakdown(cfg, data, backbone, device)
    return {
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "backbone": cfg.backbone.name,
        "backbone_precision": f"{cfg.backbone.precision.value} (runs {backbone_precision})",
        "texts": sum(len(v) for v in texts.values()),
        "tokens": sum(n_tokens.values()),
        "train_tokens": n_tokens["train"],
        "backbone_pass_s": backbone_s,
        "backbone_pass_before_after_s": [before_s, after_s],
        "backbone_tokens_per_s": sum(n_tokens.values()) / backbone_s,
        "run_s": run_s,
        "run_minor_faults": run_faults,
        "cache_build_s": m["timing"]["states_s"],
        "fit_s": m["fit_s"],
        "ratio": run_s / backbone_s,
        "epochs": epochs,
        "steps": steps,
        "step_parts_ms": parts,
        "flop_floor": floor,
        "head_mflop_per_token": head_per_tok / 1e6,
        "backbone_mflop_per_token": bb_per_tok / 1e6,
        "cache_mib": m["data"]["cache_bytes"] / 2**20,
        "test_accuracy": m["test"]["accuracy"],
        "peak_gpu_mib": m["timing"].get("peak_gpu_mib"),
        "run_dir": str(result.run_dir),
    }


def report(r: dict, target: float = 2.0) -> None:
    """Print the figures of :func:`measure`."""
    print(f"machine: {r['torch_threads']} torch threads, device {r['device']}")
    print(
        f"texts: {r['texts']}  tokens: {r['tokens']} (train {r['train_tokens']})  "
        f"backbone {r['backbone']} precision {r['backbone_precision']}"
    )
    print(
        f"A  backbone pass over all texts : {r['backbone_pass_s']:8.2f} s  "
        f"({r['backbone_tokens_per_s']:.0f} tokens/s; the mean of a pass before B and one after it)"
    )
    if "backbone_pass_before_after_s" in r:
        before, after = r["backbone_pass_before_after_s"]
        print(f"   before / after B               : {before:8.2f} s / {after:.2f} s")
    print(
        f"B  {r['epochs']}-epoch run incl. cache build: {r['run_s']:8.2f} s  (cache build "
        f"{r['cache_build_s']:.2f} s, fit {r['fit_s']:.2f} s, {r['steps']} steps)"
    )
    print(f"   minor page faults during B     : {r['run_minor_faults']:8d}")
    per_step = r["fit_s"] * 1e3 / r["steps"]
    parts = r["step_parts_ms"]
    print(
        f"C  fit time per step             : {per_step:8.2f} ms, of which (outside the loop, same batches):"
    )
    for k, v in parts.items():
        print(f"     {k:<28s}: {v:8.2f} ms  ({v / per_step:6.1%})")
    rest = per_step - sum(parts.values())
    print(f"     {'loop, logs, validation, ckpt':<28s}: {rest:8.2f} ms  ({rest / per_step:6.1%})")
    print(
        f"ratio B/A                        : {r['ratio']:8.2f}   "
        f"(target <= {target}; recompute-every-epoch ~ 4)"
    )
    print(
        f"FLOP floor of the ratio          : {r['flop_floor']:8.2f}   "
        f"(head fwd+bwd {r['head_mflop_per_token']:.1f} MFLOP/token, "
        f"backbone fwd {r['backbone_mflop_per_token']:.1f} MFLOP/token)"
    )
    print(f"cache size on disk               : {r['cache_mib']:8.1f} MiB")
    if r.get("peak_gpu_mib") is not None:
        print(f"peak GPU memory of the run       : {r['peak_gpu_mib']:8.1f} MiB")
    print(f"test accuracy                    : {r['test_accuracy']:.4f}")


def main(argv: list[str]) -> None:
    keep_freed_heap()  # as `ucse train` does for its process
    report(measure(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
