"""``optim.compile_step``: the training step's forward and losses through torch.compile give the eager terms
and gradients; a compiler failure trains eagerly with one warning; a whole run trains compiled."""

from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch._dynamo.exc
from toy_tasks import LEARNS

from ucse.config import HeadConfig, HeadType, LossConfig, OptimConfig, Pooling
from ucse.heads import build_head
from ucse.training import train
from ucse.training.module import UcseModule


def _module(compile_step: bool) -> UcseModule:
    torch.manual_seed(0)
    cfg = HeadConfig(type=HeadType.textcnn, num_filters=4, embed_dim=4, kernel_sizes=[2, 3])
    head = build_head(cfg, 8, 3, Pooling.mean)
    return UcseModule(head, 3, LossConfig(), OptimConfig(compile_step=compile_step))


def _batch(t: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(6, t, dtype=torch.long)
    mask[1, t // 2 :] = 0  # a right-padded row
    mask[2, :2] = 0  # a left-padded row
    return torch.randn(6, t, 8, generator=g), mask, torch.tensor([0, 1, 2, 0, 1, 2])


def test_the_compiled_terms_and_gradients_are_the_eager_ones():
    compiled = _module(True)
    eager = copy.deepcopy(compiled)
    eager.optim_cfg = OptimConfig(compile_step=False)
    # eval mode: no dropout and logits on mu, so both draw no random numbers (their generators differ)
    compiled.eval(), eager.eval()
    for t, seed in ((5, 0), (9, 1)):  # dynamic shapes: one graph serves both lengths
        got, want = compiled._step_terms(*_batch(t, seed)), eager._step_terms(*_batch(t, seed))
        for a, b in zip(got, want):
            # the same float32 arithmetic, fused differently: a few ulps of values of order 1
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        got[0].backward(), want[0].backward()
        for (name, p), q in zip(compiled.head.named_parameters(), eager.head.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)
        compiled.zero_grad(), eager.zero_grad()
    assert compiled._compiled not in (None, False)  # compiled, and no fallback happened


class _NoCompiler(torch._dynamo.exc.TorchDynamoException):
    pass


def test_a_compiler_failure_trains_eagerly_with_one_warning(monkeypatch, caplog):
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        raise _NoCompiler("no C++ compiler found")

    module = _module(True)
    module.eval()
    module._compiled = failing
    batch = _batch(6, 0)
    with caplog.at_level(logging.WARNING, logger="ucse.training.module"):
        got, again = module._step_terms(*batch), module._step_terms(*batch)
    want = module._terms(*batch)
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
    torch.testing.assert_close(again[0], want[0], rtol=0, atol=0)
    assert calls == [1] and module._compiled is False  # not retried
    assert "torch.compile of the training step failed (no C++ compiler found)" in caplog.text


def test_a_run_trains_with_the_compiled_step(tiny_run_cfg, monkeypatch):
    seen = []
    real = UcseModule._step_terms

    def watching(self, hidden, mask, y):
        out = real(self, hidden, mask, y)
        seen.append(self._compiled)
        return out

    monkeypatch.setattr(UcseModule, "_step_terms", watching)
    cfg = tiny_run_cfg(*LEARNS, "optim.compile_step=true", "optim.epochs=1")
    result = train(cfg)
    assert seen and all(c not in (None, False) for c in seen)  # every step ran compiled
    assert result.metrics["test"]["accuracy"] > 1 / 3  # it learnt (3 balanced classes)


@pytest.mark.parametrize(
    ("kind", "fuse"), [("lcl", True), ("lcl", False), ("supcon", True), ("simcse", True), ("none", True)]
)
def test_the_training_terms_read_nothing_back_to_the_host(kind, fuse):
    """On CUDA (no host mask checks) the step's forward and losses are one graph: no `bool(t)`, `.item()` or
    boolean index that would stall every step until the device catches up (`fullgraph=True` refuses them).
    ``fuse``: the TextCNN's one-convolution path (CUDA's default) or its per-width convolutions."""
    module = _module(False)
    module.head.host_checks = False  # what a CUDA tensor gets by default
    module.head.fuse_convs = fuse
    module.loss_cfg = LossConfig(contrastive=kind)
    module.train()  # sampling and dropout traced too
    loss = torch.compile(module._terms, fullgraph=True, backend="eager")(*_batch(5, 0))[0]
    assert torch.isfinite(loss)
