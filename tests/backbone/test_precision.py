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
