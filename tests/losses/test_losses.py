import math

import pytest
import torch
import torch.nn.functional as F
from loss_references import lcl_reference, simcse_reference, supcon_reference
from torch.distributions import Normal, kl_divergence

from ucse.losses import cross_entropy, gaussian_kl, label_wise_contrastive, simcse, supcon, total_loss


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(7, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 3])  # labels 2 and 3 have no positive
    return z, labels


@pytest.mark.parametrize("tau", [2.0, 0.1])
def test_lcl_matches_loop_reference(batch, tau):
    z, labels = batch
    got = label_wise_contrastive(z, labels, temperature=tau)
    assert got.item() == pytest.approx(lcl_reference(z, labels, tau), rel=1e-5)


def test_lcl_is_scale_invariant_and_differs_from_supcon(batch):
    z, labels = batch
    a = label_wise_contrastive(z, labels, 0.5)
    assert label_wise_contrastive(3.0 * z, labels, 0.5).item() == pytest.approx(a.item(), rel=1e-5)
    # LCL keeps j = i in the denominator and sums positives inside the log: not SupCon
    assert abs(a.item() - supcon(z, labels, 0.5).item()) > 1e-3


def test_lcl_no_positive_returns_zero_with_grad():
    z = torch.randn(3, 4, requires_grad=True)
    loss = label_wise_contrastive(z, torch.tensor([0, 1, 2]))
    assert loss.item() == 0.0
    loss.backward()
    assert z.grad is not None and torch.all(z.grad == 0)


def test_lcl_stable_at_tiny_temperature():
    z = torch.randn(6, 8)
    loss = label_wise_contrastive(z, torch.tensor([0, 0, 1, 1, 2, 2]), temperature=1e-4)
    assert torch.isfinite(loss)


def test_lcl_rejects_bad_temperature(batch):
    with pytest.raises(ValueError, match="temperature"):
        label_wise_contrastive(*batch, temperature=0.0)


@pytest.mark.parametrize("loss", [label_wise_contrastive, supcon])
def test_contrastive_losses_read_nothing_back_to_the_host(batch, loss):
    """No host read in the loss (a `bool(t)`, `.item()` or boolean index stalls a GPU step until the device
    catches up): dynamo must trace it as one graph, which `fullgraph=True` refuses to do at any of them."""
    z, labels = batch
    traced = torch.compile(loss, fullgraph=True, backend="eager")
    torch.testing.assert_close(traced(z, labels, 0.5), loss(z, labels, 0.5))


@pytest.mark.parametrize("loss", [label_wise_contrastive, supcon])
def test_contrastive_gradients_match_finite_differences_with_singleton_anchors(batch, loss):
    """Anchors without positives are dropped from the loss and from its gradient: no inf - inf in backward.

    The losses compute in float32 (loss ~1, rounding ~1e-7), so central differences at eps 1e-3 carry ~1e-4 of
    rounding and ~1e-6 of truncation error: atol 1e-3 and rtol 1e-2 sit well above both.
    """
    z, labels = batch
    z = z.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: loss(x, labels, 0.5), (z,), eps=1e-3, atol=1e-3, rtol=1e-2)


@pytest.mark.parametrize("labels", [[0], [0, 1, 2]])
def test_supcon_no_positive_returns_zero_with_finite_grad(labels):
    z = torch.randn(len(labels), 4, requires_grad=True)
    loss = supcon(z, torch.tensor(labels), 0.1)
    assert loss.item() == 0.0
    loss.backward()
    assert z.grad is not None and torch.all(z.grad == 0)


@pytest.mark.parametrize("tau", [0.07, 1.0])
def test_supcon_matches_loop_reference(batch, tau):
    z, labels = batch
    assert supcon(z, labels, tau).item() == pytest.approx(supcon_reference(z, labels, tau), rel=1e-5)


def test_simcse_matches_loop_reference():
    g = torch.Generator().manual_seed(1)
    z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    assert simcse(z1, z2).item() == pytest.approx(simcse_reference(z1, z2, 0.05), rel=1e-4)
    assert simcse(z1, z2, 0.5).item() == pytest.approx(simcse_reference(z1, z2, 0.5), rel=1e-5)
    with pytest.raises(ValueError, match="z1"):
        simcse(z1, z2[:3])


def test_gaussian_kl_matches_torch_distributions():
    g = torch.Generator().manual_seed(2)
    mu, log_var = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    ref = kl_divergence(Normal(mu, (0.5 * log_var).exp()), Normal(0.0, 1.0)).sum(1).mean()
    assert gaussian_kl(mu, log_var).item() == pytest.approx(ref.item(), rel=1e-6)
    assert gaussian_kl(torch.zeros(2, 3), torch.zeros(2, 3)).item() == 0.0


def test_gaussian_kl_matches_monte_carlo():
    g = torch.Generator().manual_seed(3)
    mu, log_var = 0.5 * torch.randn(1, 3, generator=g), 0.5 * torch.randn(1, 3, generator=g)
    sigma = (0.5 * log_var).exp()
    x = mu + sigma * torch.randn(200_000, 3, generator=g)  # samples of q
    log_q = Normal(mu, sigma).log_prob(x).sum(1)
    log_p = Normal(0.0, 1.0).log_prob(x).sum(1)
    mc = (log_q - log_p).mean().item()
    assert gaussian_kl(mu, log_var).item() == pytest.approx(mc, abs=0.02)


def test_cross_entropy_is_eq4():
    logits, labels = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
    ref = -sum(math.log(F.softmax(logits[i], 0)[labels[i]].item()) for i in range(5)) / 5
    assert cross_entropy(logits, labels).item() == pytest.approx(ref, rel=1e-5)


def test_total_loss_eq6():
    ce, con, kl = torch.tensor(2.0), torch.tensor(3.0), torch.tensor(5.0)
    assert total_loss(ce, con, kl, 0.6, 1e-3).item() == pytest.approx(0.4 * 2 + 0.6 * 3 + 1e-3 * 5)
    assert total_loss(ce, None, kl, 0.6, 0.1).item() == pytest.approx(2.0 + 0.5)
    assert total_loss(ce, con, None, 0.9, 0.1).item() == pytest.approx(0.1 * 2 + 0.9 * 3)
    with pytest.raises(ValueError, match="lcl_weight"):
        total_loss(ce, con, kl, 1.5, 0.0)


@pytest.mark.parametrize("loss", ["ce", "lcl", "supcon", "simcse", "kl"])
def test_gradients_match_finite_differences_in_float64(loss):
    # .float() lowered float64 inputs, so gradcheck failed on float32 rounding; fp16/bf16 still rise to fp32
    g = torch.Generator().manual_seed(0)
    y = torch.tensor([0, 1, 0, 2, 1])
    a = torch.randn(5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    fn = {
        "ce": lambda a, b: cross_entropy(a[:, :3], y),
        "lcl": lambda a, b: label_wise_contrastive(a, y, 0.5),
        "supcon": lambda a, b: supcon(a, y, 0.5),
        "simcse": lambda a, b: simcse(a, b, 0.5),
        "kl": lambda a, b: gaussian_kl(a, b),
    }[loss]
    assert fn(a, b).dtype == torch.float64
    assert torch.autograd.gradcheck(fn, (a, b))
    assert fn(a.detach().bfloat16(), b.detach().bfloat16()).dtype == torch.float32
