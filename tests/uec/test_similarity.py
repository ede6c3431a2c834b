import math

import pytest
import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.similarity import cosine_topk, probit_score, probit_similarity, similarity_moments, topk


def _gauss(n, d, var_scale, seed, unit=True):
    g = torch.Generator().manual_seed(seed)
    mean = torch.randn(n, d, generator=g)
    if unit:
        mean = mean / mean.norm(dim=1, keepdim=True)
    var = var_scale * torch.rand(n, d, generator=g)
    return GaussianEmbeddings(mean, var, {"member": f"g{seed}"})


def test_moments_match_monte_carlo_dot_product():
    q, c = _gauss(3, 5, 0.4, 0, unit=False), _gauss(4, 5, 0.4, 1, unit=False)
    mu_s, var_s = similarity_moments(q.mean.double(), q.var.double(), c.mean.double(), c.var.double())
    n = 200_000
    g = torch.Generator().manual_seed(2)
    zq = q.mean.double() + q.var.double().sqrt() * torch.randn(n, 3, 5, generator=g, dtype=torch.float64)
    zc = c.mean.double() + c.var.double().sqrt() * torch.randn(n, 4, 5, generator=g, dtype=torch.float64)
    s = torch.einsum("nid,njd->nij", zq, zc)  # (n, 3, 4)
    mc_mean, mc_var = s.mean(0), s.var(0)
    se_mean = (mc_var / n).sqrt()
    assert bool(((mc_mean - mu_s).abs() < 5 * se_mean).all())
    # s is not Gaussian; its sample variance has s.e. sqrt((m4 - var^2)/n) from the 4th central moment.
    m4 = ((s - mc_mean) ** 4).mean(0)
    se_var = ((m4 - mc_var**2) / n).sqrt()
    assert bool(((mc_var - var_s).abs() < 5 * se_var).all())


def test_probit_score_matches_expected_sigmoid():
    # Large variances so the correction matters: sigma_s^2 spans ~0.3-3.
    q, c = _gauss(3, 4, 1.0, 3, unit=False), _gauss(5, 4, 1.0, 4, unit=False)
    s_hat = probit_similarity(q, c).double()
    n = 200_000
    g = torch.Generator().manual_seed(5)
    zq = q.mean.double() + q.var.double().sqrt() * torch.randn(n, 3, 4, generator=g, dtype=torch.float64)
    zc = c.mean.double() + c.var.double().sqrt() * torch.randn(n, 5, 4, generator=g, dtype=torch.float64)
    expected = torch.sigmoid(torch.einsum("nid,njd->nij", zq, zc)).mean(0)
    # MacKay's probit approximation E[sigmoid(s)] ~= sigmoid(mu/sqrt(1 + pi/8 var)) is within ~0.01 for a
    # Gaussian s; q^T c is only moment-matched, so allow 0.02 (MC s.e. here < 0.001).
    assert float((torch.sigmoid(s_hat) - expected).abs().max()) < 0.02
    # ... and the correction is needed: the uncorrected sigmoid(mu_s) misses by more.
    mu_s = q.mean.double() @ c.mean.double().T
    assert float((torch.sigmoid(mu_s) - expected).abs().max()) > 0.03


def test_theorem1_first_order_expansion_of_w2():
    q, c = _gauss(6, 64, 1.0, 6), _gauss(7, 64, 1.0, 7)
    errs = []
    for eps in (1e-2, 1e-3, 1e-4):
        # Assumption 2: per-coordinate variances <= eps / d.
        qe = GaussianEmbeddings(q.mean, q.var * eps / 64)
        ce = GaussianEmbeddings(c.mean, c.var * eps / 64)
        mq, vq, mc, vc = (t.double() for t in (qe.mean, qe.var, ce.mean, ce.var))
        # Re-normalise in float64: the identity mu_q.mu_c = 1 - |dmu|^2/2 needs exact unit norms.
        mq, mc = mq / mq.norm(dim=1, keepdim=True), mc / mc.norm(dim=1, keepdim=True)
        s_hat = probit_score(*similarity_moments(mq, vq, mc, vc))  # float64: residuals are ~1e-8
        torch.testing.assert_close(probit_similarity(qe, ce).double(), s_hat, rtol=0, atol=2e-6)
        w2sq = torch.cdist(mq, mc) ** 2 + torch.cdist(vq.sqrt(), vc.sqrt()) ** 2
        resid = s_hat - (1 - w2sq / 2)
        # App. A.3.2: s_hat = mu_s (1 - pi/16 sigma_s^2) + O(eps^2), and 1 - W2^2/2 = mu_s - |dsigma|^2/2.
        _, var_s = similarity_moments(mq, vq, mc, vc)
        first_order = torch.cdist(vq.sqrt(), vc.sqrt()) ** 2 / 2 - math.pi / 16 * (mq @ mc.T) * var_s
        assert float((resid - first_order).abs().max()) < 5 * eps**2
        errs.append(float(resid.abs().max()))
    # The residual to 1 - W2^2/2 vanishes with the variance (linearly: Theorem 1's sloppy O(eps^2) needs
    # sigma_q ~ sigma_c; in general the |sigma_q - sigma_c|^2 term is first order).
    assert errs[0] < 0.05 and errs[1] < errs[0] / 5 and errs[2] < errs[1] / 5


def test_zero_variance_reduces_to_dot_and_beta_zero():
    q, c = _gauss(4, 8, 0.0, 8), _gauss(6, 8, 0.0, 9)
    torch.testing.assert_close(probit_similarity(q, c), q.mean @ c.mean.T)
    q2 = _gauss(4, 8, 0.5, 8)
    torch.testing.assert_close(probit_similarity(q2, c, beta=0.0), q2.mean @ c.mean.T)
    assert bool((probit_similarity(q2, c).abs() <= (q2.mean @ c.mean.T).abs() + 1e-7).all())
    with pytest.raises(ValueError, match="dim 8 but corpus"):
        probit_similarity(q, _gauss(2, 5, 0.1, 1))


@pytest.mark.parametrize("strategy", ["bounded", "dense"])
@pytest.mark.parametrize("var_scale", [1e-3, 0.5])
def test_topk_streams_exactly(strategy, var_scale):
    q, c = _gauss(20, 16, var_scale, 10), _gauss(1500, 16, var_scale, 11)
    scores, idx = topk(q, c, k=7, chunk=200, strategy=strategy)
    full = probit_similarity(q, c)
    ref_s, ref_i = full.topk(7, dim=1)
    torch.testing.assert_close(scores, ref_s)
    assert torch.equal(idx, ref_i)


def test_topk_zero_variance_agrees_with_cosine():
    q, c = _gauss(30, 16, 0.0, 12), _gauss(900, 16, 0.0, 13)
    s1, i1 = topk(q, c, k=10, chunk=128)
    s2, i2 = cosine_topk(q.mean, c.mean, k=10, chunk=128)
    assert torch.equal(i1, i2)
    torch.testing.assert_close(s1, s2)
    with pytest.raises(ValueError, match="strategy='fast'"):
        topk(q, c, strategy="fast")


def test_mutated_gaussians_raise_instead_of_nan():
    from ucse.uec.distances import pairwise_similarity

    q = GaussianEmbeddings(torch.ones(2, 3), torch.full((2, 3), 0.1))
    c = GaussianEmbeddings(torch.ones(4, 3), torch.full((4, 3), 0.1))
    c.mean[1, 0] = float("nan")  # mutated after its construction-time check
    for call in (
        lambda: probit_similarity(q, c),
        lambda: pairwise_similarity(q, c, "w2"),
        lambda: topk(q, c, k=2),
    ):
        with pytest.raises(ValueError, match="corpus mean has a non-finite value in row 1|candidate mean"):
            call()
    c.mean[1, 0] = 1.0
    c.var[3, 2] = -0.5
    with pytest.raises(ValueError, match="negative variance in row 3"):
        probit_similarity(q, c)
    with pytest.raises(ValueError, match="negative variance"):
        pairwise_similarity(q, c, "kl")
