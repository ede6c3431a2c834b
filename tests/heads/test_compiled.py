"""``CompiledHead``: torch.compile gives the eager outputs; a compiler failure falls back to eager once."""

from __future__ import annotations

import logging

import pytest
import torch
import torch._dynamo.exc

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import Head, build_head
from ucse.heads.compiled import CompiledHead


def _head() -> Head:
    torch.manual_seed(0)
    cfg = HeadConfig(type=HeadType.blend, num_filters=4, embed_dim=4, kernel_sizes=[2, 3])
    return build_head(cfg, 8, 3, Pooling.mean).eval()


def _batch(t: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(4, t, dtype=torch.long)
    mask[1, t // 2 :] = 0  # a right-padded row
    mask[2, :2] = 0  # a left-padded row
    return torch.randn(4, t, 8, generator=g), mask


def test_compiled_outputs_are_the_eager_outputs_across_lengths(monkeypatch):
    monkeypatch.setattr(Head, "host_checks", False)  # the CUDA path: one graph, no host read
    head = _head()
    compiled = CompiledHead(head)
    with torch.inference_mode():
        for t, seed in ((6, 0), (9, 1), (13, 2)):  # dynamic shapes: one graph serves every length
            hidden, mask = _batch(t, seed)
            got, want = compiled(hidden, mask), head(hidden, mask)
            # the same float32 arithmetic, fused differently: a few ulps of values of order 1
            torch.testing.assert_close(got.logits, want.logits, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got.var, want.var, rtol=1e-5, atol=1e-5)
    assert compiled.compiled is not None  # no fallback happened


class _NoCompiler(torch._dynamo.exc.TorchDynamoException):
    pass


def test_a_compiler_failure_falls_back_to_eager_once(monkeypatch, caplog):
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        raise _NoCompiler("no C++ compiler found")

    head = _head()
    compiled = CompiledHead(head)
    monkeypatch.setattr(compiled, "compiled", failing)
    hidden, mask = _batch(6, 0)
    with caplog.at_level(logging.WARNING, logger="ucse.heads.compiled"):
        got = compiled(hidden, mask)
        again = compiled(hidden, mask)
    torch.testing.assert_close(got.logits, head(hidden, mask).logits)
    torch.testing.assert_close(again.logits, got.logits)
    assert calls == [1]  # not retried
    assert "torch.compile of the head failed (no C++ compiler found)" in caplog.text


def test_a_heads_own_error_is_not_swallowed():
    compiled = CompiledHead(_head())  # the CPU default: mask checks read back, so an empty row raises
    hidden, mask = _batch(6, 0)
    mask[3] = 0
    with pytest.raises(ValueError, match="no real token"):
        compiled(hidden, mask)
