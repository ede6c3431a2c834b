from pathlib import Path

import torch

from ucse.backbone.precision import cpu_has_native_bf16, effective_precision
from ucse.config import Precision


def test_explicit_choices_are_kept():
    for device in ("cpu", torch.device("cpu")):
        assert effective_precision("fp32", device) is Precision.fp32
        assert effective_precision(Precision.bf16, device) is Precision.bf16


def test_auto_on_cpu_follows_native_bf16(monkeypatch):
    import ucse.backbone.precision as prec

    monkeypatch.setattr(prec, "cpu_has_native_bf16", lambda: False)
    assert effective_precision("auto", "cpu") is Precision.fp32
    monkeypatch.setattr(prec, "cpu_has_native_bf16", lambda: True)
    assert effective_precision("auto", "cpu") is Precision.bf16


def test_native_bf16_matches_the_cpu_flags():
    # Independent reference: the CPU feature flags the kernel reports.
    flags = Path("/proc/cpuinfo").read_text()
    native = "avx512_bf16" in flags or "amx_bf16" in flags
    assert cpu_has_native_bf16() is native


def test_backbone_cache_key_uses_the_effective_precision(tiny_bert_dir, tmp_path):
    from tiny_models import make_tiny_bert_cfg

    from ucse.backbone import FrozenBackbone, HiddenStateCache

    cfg = make_tiny_bert_cfg(tiny_bert_dir)
    cfg.precision = Precision.auto
    fb = FrozenBackbone(cfg)
    parts = HiddenStateCache(tmp_path).key_parts(fb, ["a text"], "Toy", "train")
    assert parts["precision"] == effective_precision("auto", "cpu").value != "auto"


def test_an_avx512_cpu_without_bf16_instructions_is_not_native(monkeypatch):
    # oneDNN's _is_mkldnn_bf16_supported is true on any AVX-512 CPU (Skylake to Ice Lake), where bf16 is
    # emulated and slower than fp32: auto picked bf16 there. Such a CPU, as torch reports it:
    import ucse.backbone.precision as prec

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    prec.cpu_has_native_bf16.cache_clear()
    try:
        assert not prec.cpu_has_native_bf16() and effective_precision("auto", "cpu") is Precision.fp32
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)  # a Sapphire Rapids
        prec.cpu_has_native_bf16.cache_clear()
        assert prec.cpu_has_native_bf16() and effective_precision("auto", "cpu") is Precision.bf16
    finally:
        prec.cpu_has_native_bf16.cache_clear()


def test_auto_on_a_gpu_that_only_emulates_bf16_is_fp32(monkeypatch):
    # torch.cuda.is_bf16_supported() counts emulation: true on a T4 / V100 (capability 7.x)
    def emulated_only(including_emulation: bool = True) -> bool:
        return including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", emulated_only)
    assert effective_precision("auto", "cuda") is Precision.fp32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # an A100
    assert effective_precision("auto", "cuda") is Precision.bf16
