"""The paper's scale on one GPU: a randomly initialised model of Qwen3-Embedding-0.6B's exact shape.

A random backbone's accuracy is meaningless; its costs are not. One run measures, with the backbone built from
``transformers.Qwen3Config`` with Qwen3-Embedding-0.6B's published shape (595.8M parameters):

1. the backbone pass (tokens/s) over Banking77 with the paper's Qwen3 prompt and last-token set-up, with bf16
   weights (what ``ucse`` runs on CUDA) and fp32 weights under bf16 autocast, at several batch sizes;
2. the training-cost ratio of ``bench/train_cost.py``: the whole 3-epoch run including the hidden-state
   cache build, over one backbone pass (target <= 1.3 here, where the head is ~3 % of the backbone's FLOPs);
3. the head's inference overhead end to end, texts to outputs: backbone alone vs backbone + Gaussian TextCNN
   on the same batches (paper Table 5: +1.36 % latency; target <= 2 %), Banking77 test texts and long texts;
4. peak GPU memory, and the largest batch that fits at T = 512 tokens for the backbone forward and for one
   head training step (bf16 autocast, as in training).

Usage (on a CUDA machine)::

    UCSE_DATA_DIR=<data root> python bench/scale_gpu.py tokenizer=<folder> [work=<dir>] [out=<file.json>]

Qwen3's own tokenizer needs the hub; any tokenizer with an EOS token works (token ids stay inside Qwen3's
vocabulary), and token counts then differ a little from Qwen3's. The run records which one was used.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_cost import measure, report  # noqa: E402

from ucse.config import build_config  # noqa: E402
from ucse.core.encoder import UcseEncoder  # noqa: E402
from ucse.data import load_classification  # noqa: E402
from ucse.evaluation.efficiency import measure_throughput  # noqa: E402
from ucse.heads import build_head  # noqa: E402
from ucse.training import train  # noqa: E402

# Qwen3-Embedding-0.6B's config.json (model card), minus the fields that do not change the computation.
QWEN3_EMBEDDING_06B = dict(
    vocab_size=151669,
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    attention_bias=False,
    hidden_act="silu",
)


def build_random_qwen3(folder: Path, tokenizer_dir: Path) -> int:
    """Save a random Qwen3-Embedding-0.6B-shaped model (fp32 safetensors) and a tokenizer; return its size."""
    torch.manual_seed(0)
    config = Qwen3Config(**QWEN3_EMBEDDING_06B)
    with torch.device("cuda"):
        model = Qwen3Model(config)
    model.save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok.padding_side = "left"
    tok.save_pretrained(folder)
    n = sum(p.numel() for p in model.parameters())
    del model
    torch.cuda.empty_cache()
    return n


def random_model(args: dict) -> tuple[Path, list[str]]:
    """The Qwen3-shaped random model under ``work=`` (default: a temporary folder) and its overrides."""
    work = Path(args.get("work") or tempfile.mkdtemp(prefix="ucse-scale-"))
    model_dir = work / "qwen3-0.6b-random"
    build_random_qwen3(model_dir, Path(args["tokenizer"]))
    return work, ["backbone=qwen3-embedding-0.6b", f"backbone.model={model_dir}"]


def largest_batch(step, start: int, cap: int) -> tuple[int | None, dict[int, float]]:
    """Double the batch from ``start`` until ``step(b)`` runs out of memory or ``cap``; peak MiB per size."""
    ok, peaks, b = None, {}, start
    while b <= cap:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            step(b)
            torch.cuda.synchronize()
        except torch.OutOfMemoryError:
            break
        peaks[b] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        ok, b = b, b * 2
    torch.cuda.empty_cache()
    return ok, peaks


def backbone_step(model: torch.nn.Module, seq: int):
    """One frozen forward at (b, seq) (bf16 weights), fp32 states out (as FrozenBackbone does)."""

    def step(b: int) -> None:
        ids = torch.randint(0, 49152, (b, seq), device="cuda")
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.float()

    return step


def head_train_step(head: torch.nn.Module, seq: int, hidden: int):
    """One forward+backward of the head at (b, seq, H) under bf16 autocast (Lightning's bf16-mixed)."""

    def step(b: int) -> None:
        x = torch.randn(b, seq, hidden, device="cuda")
        mask = torch.ones(b, seq, dtype=torch.long, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = head(x, mask)
        out.logits.float().sum().backward()
        head.zero_grad(set_to_none=True)

    return step


def head_overhead(backbone, head, texts: list[str], batch_size: int, repeats: int = 5) -> dict:
    """GPU time of the backbone forward and of the head on its output, batch by batch, with CUDA events.

    Tokenisation and padding happen before timing (both paths share them). Events bracket the backbone
    forward and the head forward on the same batches, so the ratio head / backbone is the head's share of
    inference latency, host-side bubbles between the two included.
    """
    enc = backbone._encode(texts)  # noqa: SLF001 - the bench times the forward alone
    rows = [enc.row(i) for i in range(len(enc))]
    batches = [
        dict(backbone.tokenizer.pad(rows[i : i + batch_size], padding=True, return_tensors="pt"))
        for i in range(0, len(rows), batch_size)
    ]
    totals = []
    for _ in range(repeats + 1):  # the first pass warms up
        bb_ms = hd_ms = 0.0
        for feats in batches:
            e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            e0.record()
            hidden, mask = backbone._forward(feats)  # noqa: SLF001
            e1.record()
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
                head(hidden, mask)
            e2.record()
            torch.cuda.synchronize()
            bb_ms += e0.elapsed_time(e1)
            hd_ms += e1.elapsed_time(e2)
        totals.append((bb_ms, hd_ms))
    bb = sorted(t[0] for t in totals[1:])[repeats // 2]
    hd = sorted(t[1] for t in totals[1:])[repeats // 2]
    return {"backbone_ms": bb, "head_ms": hd, "overhead_percent": 100 * hd / bb, "texts": len(texts)}


def overhead_only(args: dict) -> None:
    """Build the Qwen3-shaped model and measure the head's share of inference latency (CUDA events)."""
    from ucse.backbone.encoder import FrozenBackbone

    _, overrides = random_model(args)
    cfg = build_config(overrides)
    backbone = FrozenBackbone(cfg.backbone, "cuda", instruction=cfg.task.instruction)
    head = build_head(cfg.head, 1024, 77, cfg.backbone.pooling).cuda().eval()
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    short = data.texts("test")[:2048]
    long_texts = [" ".join(short[i : i + 40]) for i in range(0, 2048, 16)][:128]
    out = {}
    for name, texts, bs in (
        ("banking77_test_b64", short, 64),
        ("banking77_test_b512", short, 512),
        ("long_512tok_b16", long_texts, 16),
    ):
        r = out[name] = head_overhead(backbone, head, texts, bs)
        print(
            f"head share of inference ({name}): backbone {r['backbone_ms']:.1f} ms, "
            f"head {r['head_ms']:.1f} ms for {r['texts']} texts: +{r['overhead_percent']:.2f} %",
            flush=True,
        )
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(out, indent=1))


def overhead_variants(overrides: list[str], variants: dict, out: dict, repeats: int = 5) -> None:
    """The head's share of inference (:func:`head_overhead`) at batch 64 and 512 under each variant.

    ``variants`` maps a name to a function given the head before its measurement (it sets the variant).
    """
    from ucse.backbone.encoder import FrozenBackbone

    cfg = build_config(overrides)
    backbone = FrozenBackbone(cfg.backbone, "cuda", instruction=cfg.task.instruction)
    head = build_head(cfg.head, 1024, 77, cfg.backbone.pooling).cuda().eval()
    short = load_classification(cfg.task, cfg.data, cfg.seed).texts("test")[:2048]
    for name, apply in variants.items():
        apply(head)
        for bs in (64, 512):
            o = out[f"overhead_{name}_b{bs}"] = head_overhead(backbone, head, short, bs, repeats)
            print(
                f"head share, {name}, batch {bs}: backbone {o['backbone_ms']:.1f} ms, "
                f"head {o['head_ms']:.1f} ms: +{o['overhead_percent']:.2f} %",
                flush=True,
            )


HEAD_PATHS = {  # GaussianTextCNN's execution paths: (fuse_convs, host_checks)
    "per_width_host_read": (False, True),  # before: one convolution per width, one host read per forward
    "per_width_sync_free": (False, False),
    "fused_sync_free": (True, False),  # the CUDA default
    "fused_host_read": (True, True),
}


def _set_paths(head: torch.nn.Module, paths: tuple[bool, bool]) -> None:
    head.fuse_convs, head.host_checks = paths


def head_paths(args: dict) -> None:
    """The current code's ratio, then the TextCNN's execution paths: warm-cache fits and inference share.

    1. ``bench/train_cost.py`` on the 0.6B shape (ratio, per-step breakdown) with the CUDA defaults;
    2. the same 3-epoch fit on the warm cache with the old path (per-width convolutions, a host read per
       forward) and the default (fused, no host read), alternating, ``repeats`` times each;
    3. the head's share of inference latency (CUDA events) for every path at batch 64 and 512.

    ``parts=overhead`` runs part 3 alone; ``repeats=`` sets part 2's fits per path (default 2).
    """
    from ucse.heads import GaussianTextCNN

    work, overrides = random_model(args)
    overrides += ["head=textcnn", "recipe=paper"]
    cache_root = str(work / "cache")
    out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    fits: dict[str, list[float]] = {"per_width_host_read": [], "fused_sync_free": []}
    repeats = int(args.get("repeats", 2)) if args.get("parts", "all") == "all" else 0
    r = measure(overrides, cache_root=cache_root) if repeats else {}
    if r:
        report(r, target=1.3)
        out["train_cost"] = r
    if args.get("out"):  # keep what is measured even if a later part fails
        Path(args["out"]).write_text(json.dumps(out, indent=1, default=str))
    for i in range(2 * repeats):
        name = list(fits)[i % 2]
        GaussianTextCNN.fuse_convs, GaussianTextCNN.host_checks = HEAD_PATHS[name]
        cfg = build_config([*overrides, "progress_bar=false"])
        cfg.cache.dir, cfg.output_dir = cache_root, str(work / f"fit-{i}")
        m = train(cfg).metrics
        fits[name].append(m["fit_s"])
        print(f"fit {i} ({name}): {m['fit_s']:.2f} s, test accuracy {m['test']['accuracy']:.4f}", flush=True)
    GaussianTextCNN.fuse_convs = GaussianTextCNN.host_checks = None
    out["warm_fit_s"] = fits
    variants = {
        name: (lambda head, paths=paths: _set_paths(head, paths)) for name, paths in HEAD_PATHS.items()
    }
    overhead_variants(overrides, variants, out, repeats=3)
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(out, indent=1, default=str))


def blend_overhead(args: dict) -> None:
    """The served head's share of inference (``head=blend``: TextCNN + probe), with and without a host read.

    The mask checks read back to the host per forward (the CPU's way) and not (the CUDA default), then the
    default through ``torch.compile``, batch 64 and 512; the paper's TextCNN alone (its CUDA default) beside.
    """
    from ucse.heads import Head

    _, overrides = random_model(args)
    out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    variants = {
        "blend_host_read": lambda head: setattr(Head, "host_checks", True),
        "blend_sync_free": lambda head: setattr(Head, "host_checks", None),  # None: the CUDA default
        # the same forward through torch.compile (dynamic shapes: every length-sorted batch has its own T)
        "blend_compiled": lambda head: setattr(head, "forward", torch.compile(head.forward, dynamic=True)),
    }
    overhead_variants([*overrides, "head=blend"], variants, out, repeats=3)
    overhead_variants([*overrides, "head=textcnn"], {"textcnn_default": lambda head: None}, out, repeats=3)
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(out, indent=1, default=str))


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    if args.get("only") == "blend":
        blend_overhead(args)
        return
    if args.get("only") == "overhead":
        overhead_only(args)
        return
    if args.get("only") == "head_paths":
        head_paths(args)
        return
    if args.get("only") == "finite":
        from gpu_finite_check import finite_check_cost

        finite_check_cost(args)
        return
    work = Path(args.get("work") or tempfile.mkdtemp(prefix="ucse-scale-"))
    model_dir = work / "qwen3-0.6b-random"
    tok_dir = Path(args["tokenizer"])
    results: dict = {"device": torch.cuda.get_device_name(), "tokenizer": tok_dir.name}
    results["gpu_total_mib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**20)
    t0 = time.perf_counter()
    results["params"] = build_random_qwen3(model_dir, tok_dir)
    took = time.perf_counter() - t0
    print(f"built {results['params'] / 1e6:.1f}M-parameter Qwen3 in {took:.1f} s", flush=True)
    overrides = ["backbone=qwen3-embedding-0.6b", f"backbone.model={model_dir}"]

    # 1 + 2: backbone pass and training-cost ratio (bench/train_cost.py), fp32 weights + bf16 autocast.
    cache_root = str(work / "cache")
    r = measure(overrides, cache_root=cache_root)
    report(r, target=1.3)
    results["train_cost"] = r

    # 2b: where the fit's time goes: the same run again (cache warm) under Lightning's simple profiler.
    prof_cfg = build_config([*overrides, "profiler=simple", "progress_bar=false"])
    prof_cfg.cache.dir, prof_cfg.output_dir = cache_root, str(work / "profiled-run")
    prof = train(prof_cfg)
    results["profiled_fit_s"] = prof.metrics["fit_s"]
    profile = next(Path(prof.run_dir).glob("*profile*.txt"), None)
    if profile is not None and args.get("out"):
        shutil.copy(profile, Path(args["out"]).with_name("qwen3-fit-profile.txt"))
        print(profile.read_text()[:3000], flush=True)

    # 3: head inference overhead, end to end from text, on the run's own head.
    enc = UcseEncoder.from_dir(Path(r["run_dir"]) / "head", device="cuda")
    cfg = build_config(overrides)
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    short = data.texts("test")[:1280]
    long_texts = [" ".join(short[i : i + 40]) for i in range(0, 1280, 20)][:64]  # ~500 tokens each
    for name, texts, bs in (("banking77_test_b64", short, 64), ("long_512tok_b16", long_texts, 16)):
        chunks = [texts[i : i + bs] for i in range(0, len(texts), bs)]
        timing = measure_throughput(enc.backbone.pooled, enc.run_texts, chunks, warmup=2, repeats=7)
        results[f"overhead_{name}"] = timing
        print(
            f"head inference overhead ({name}): backbone {timing['backbone_latency_ms']:.3f} ms/text, "
            f"backbone+head {timing['full_latency_ms']:.3f} ms/text, "
            f"+{100 * (timing['overhead_ratio'] - 1):.2f} % "
            f"(median +{100 * (timing['overhead_ratio_median'] - 1):.2f} %)",
            flush=True,
        )

    # 1b: bf16 weights (ucse on CUDA) vs fp32 weights under autocast, same texts, several batch sizes.
    model = enc.backbone.model
    results["attn_implementation"] = model.config._attn_implementation
    texts_all = [t for s in ("train", "validation", "test") for t in data.texts(s)]
    for label, dtype in (("bf16_weights", torch.bfloat16),):
        model.to(dtype)
        for bs in (64, 512, 1024):
            for _ in enc.backbone.iter_states(texts_all[: 4 * bs], bs):
                pass
            torch.cuda.synchronize()
            t = time.perf_counter()
            n_tok = sum(int(m.sum()) for _, _, m in enc.backbone.iter_states(texts_all, bs))
            torch.cuda.synchronize()
            dt = time.perf_counter() - t
            results[f"backbone_pass_{label}_b{bs}"] = {"s": dt, "tokens_per_s": n_tok / dt}
            print(f"backbone pass, {label}, batch {bs}: {dt:.2f} s, {n_tok / dt:.0f} tokens/s", flush=True)
    model.to(torch.bfloat16)

    # 4: largest batches at T = 512.
    step = backbone_step(model, 512)
    results["largest_backbone_batch_T512"], results["backbone_peaks_T512"] = largest_batch(step, 64, 16384)
    del enc, model
    torch.cuda.empty_cache()
    head = build_head(cfg.head, 1024, 77, cfg.backbone.pooling).cuda().train()
    step = head_train_step(head, 512, 1024)
    results["largest_head_train_batch_T512"], results["head_peaks_T512"] = largest_batch(step, 64, 16384)
    print(
        f"largest batch at T=512: backbone forward {results['largest_backbone_batch_T512']}, "
        f"head train step {results['largest_head_train_batch_T512']}",
        flush=True,
    )
    print(json.dumps({k: v for k, v in results.items() if not isinstance(v, dict)}, indent=1))
    if args.get("out"):
        Path(args["out"]).write_text(json.dumps(results, indent=1, default=str))
    if "work" not in args:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
