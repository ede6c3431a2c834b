"""The training step's objective as the module assembles it: Eq. 6 on the tensors the paper names.

The losses are tested one by one in tests/losses; here the module's wiring is: which head output each term
reads (the sampled z, not mu), which weight each term gets, the KL of the variance branch, SimCSE's second
dropout view. The references are loops over floats (tests/loss_references.py) and torch.distributions,
evaluated on the head's outputs drawn from the same random stream as the module's step.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from loss_references import lcl_reference, simcse_reference, supcon_reference
from torch.distributions import Normal, kl_divergence

from ucse.config import ContrastiveType, HeadConfig, HeadType, LossConfig, OptimConfig, Pooling
from ucse.heads import build_head
from ucse.training.module import UcseModule

REFERENCES = {
    ContrastiveType.lcl: lambda out, out2, y, tau: lcl_reference(out.z.double(), y, tau),
    ContrastiveType.supcon: lambda out, out2, y, tau: supcon_reference(out.z.double(), y, tau),
    ContrastiveType.simcse: lambda out, out2, y, tau: simcse_reference(out.z.double(), out2.z.double(), tau),
    ContrastiveType.none: lambda out, out2, y, tau: 0.0,
}


def _module(contrastive: ContrastiveType, lcl_weight: float = 0.3, kl_weight: float = 0.05) -> UcseModule:
    torch.manual_seed(0)
    cfg = HeadConfig(type=HeadType.textcnn, num_filters=6, embed_dim=5, kernel_sizes=[2, 3], dropout=0.3)
    head = build_head(cfg, 8, 3, Pooling.mean)
    # weights unlike the defaults and unlike each other, so a swapped or dropped weight changes the total
    loss = LossConfig(contrastive=contrastive, lcl_weight=lcl_weight, kl_weight=kl_weight, temperature=0.7)
    return UcseModule(head, 3, loss, OptimConfig())


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(8, 6, dtype=torch.long)
    mask[1, 4:] = 0  # right padding
    mask[2, :3] = 0  # left padding
    return torch.randn(8, 6, 8, generator=g), mask, torch.tensor([0, 1, 2, 0, 1, 2, 0, 0])


@pytest.mark.parametrize("contrastive", list(ContrastiveType))
def test_the_step_loss_is_eq6_on_the_sampled_z(contrastive):
    module = _module(contrastive)
    module.train()  # dropout on, z sampled: the step the optimiser sees
    hidden, mask, y = _batch()
    torch.manual_seed(7)
    loss, ce, con, kl, logits, var = module._terms(hidden, mask, y)
    torch.manual_seed(7)  # the same draws again, through the head alone
    out = module.head(hidden, mask)
    out2 = module.head(hidden, mask) if contrastive == ContrastiveType.simcse else None

    cfg = module.loss_cfg
    ce_ref = F.cross_entropy(out.logits.double(), y).item()
    con_ref = REFERENCES[contrastive](out, out2, y, cfg.temperature)
    sigma = out.var.double().sqrt()
    prior = Normal(torch.zeros_like(sigma), torch.ones_like(sigma))
    kl_ref = kl_divergence(Normal(out.mean.double(), sigma), prior).sum(1).mean().item()
    lcl_w = 0.0 if contrastive == ContrastiveType.none else cfg.lcl_weight
    want = (1 - lcl_w) * ce_ref + lcl_w * con_ref + cfg.kl_weight * kl_ref
    # float32 sums of a few dozen terms of order 1-10: rtol 1e-5 is ~100 ulps
    assert ce.item() == pytest.approx(ce_ref, rel=1e-5)
    assert con.item() == pytest.approx(con_ref, rel=1e-5, abs=1e-6)
    assert kl.item() == pytest.approx(kl_ref, rel=1e-5)
    assert loss.item() == pytest.approx(want, rel=1e-5)
    torch.testing.assert_close(logits, out.logits)
    torch.testing.assert_close(var, out.var)

    # The premises that make the comparison bite: z is a draw away from mu, so a term read on mu differs...
    assert not torch.allclose(out.z, out.mean)
    if contrastive == ContrastiveType.lcl:
        assert abs(lcl_reference(out.mean.double(), y, cfg.temperature) - con_ref) > 1e-3
    # ...SimCSE's second view is another dropout draw, so the pair is not one view twice
    if contrastive == ContrastiveType.simcse:
        assert not torch.allclose(out.z, out2.z)
        assert abs(simcse_reference(out.z.double(), out.z.double(), cfg.temperature) - con_ref) > 1e-3
    # ...and every term counts: each weight moves the total by its term's size
    assert min(ce_ref, kl_ref) > 1e-2 and (contrastive == ContrastiveType.none or con_ref > 1e-2)


def test_without_the_variance_branch_the_kl_term_is_zero_and_ce_keeps_its_weight():
    torch.manual_seed(0)
    cfg = HeadConfig(type=HeadType.textcnn, num_filters=6, embed_dim=5, kernel_sizes=[2], gaussian=False)
    module = UcseModule(build_head(cfg, 8, 3, Pooling.mean), 3, LossConfig(lcl_weight=0.3), OptimConfig())
    module.eval()
    hidden, mask, y = _batch()
    loss, ce, con, kl, logits, var = module._terms(hidden, mask, y)
    out = module.head(hidden, mask)
    assert var is None and kl.item() == 0.0
    ref = 0.7 * F.cross_entropy(out.logits.double(), y).item() + 0.3 * lcl_reference(out.z.double(), y, 2.0)
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    assert math.isfinite(loss.item())


def test_a_lent_evaluation_copy_counts_in_no_metric():
    """A distributed run's evaluation copy (label LENT) leaves every validation and test figure as it was."""
    from sklearn.metrics import log_loss

    from ucse.training.datamodule import LENT

    module = _module(ContrastiveType.lcl).eval()
    hidden, mask, y = _batch()
    lent = (hidden[:1], mask[:1], torch.tensor([LENT]))  # row 0 again, as the sampler lends it
    with torch.no_grad():
        for batch in ((hidden, mask, y), lent):
            module.validation_step(batch, 0)
            module.test_step(batch, 0)
        logits = module.head(hidden, mask).logits
    scores = module.val_metrics.compute()
    assert float(scores["val/acc"]) == pytest.approx((logits.argmax(1) == y).float().mean().item())
    probs = torch.softmax(logits.double(), 1).numpy()
    assert float(module.val_nll()) == pytest.approx(log_loss(y.numpy(), probs, labels=[0, 1, 2]), rel=1e-5)
    # a row whose outputs are NaN makes the epoch's NLL NaN (torchmetrics' MeanMetric dropped such rows)
    broken = hidden[:2].clone()
    broken[1] = float("nan")
    with torch.no_grad():
        module.validation_step((broken, mask[:2], y[:2]), 1)
    assert math.isnan(float(module.val_nll()))
    counts = module.test_confusion.compute()
    assert int(counts.sum()) == len(y) and int(counts[0].sum()) == int((y == 0).sum())
