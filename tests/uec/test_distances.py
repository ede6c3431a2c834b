import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.spatial.distance import cosine as scipy_cosine

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.distances import Metric, kl_divergence, pairwise_similarity


def _g(n, d, seed, var_lo=0.05):
    g = torch.Generator().manual_seed(seed)
    return GaussianEmbeddings(torch.randn(n, d, generator=g), var_lo + torch.rand(n, d, generator=g))


def _loop(metric, q, c):
    """Independent per-pair numpy reference of each metric's *distance* (cosine: similarity)."""
    out = np.zeros((q.n, c.n))
    for i in range(q.n):
        for j in range(c.n):
            m1, v1 = q.mean[i].double().numpy(), q.var[i].double().numpy()
            m2, v2 = c.mean[j].double().numpy(), c.var[j].double().numpy()
            kl12 = 0.5 * np.sum(v1 / v2 + (m2 - m1) ** 2 / v2 - 1 + np.log(v2) - np.log(v1))
            kl21 = 0.5 * np.sum(v2 / v1 + (m1 - m2) ** 2 / v1 - 1 + np.log(v1) - np.log(v2))
            out[i, j] = {
                "cosine": lambda: 1 - scipy_cosine(m1, m2),
                "kl": lambda: -kl12,
                "jeffreys": lambda: -(kl12 + kl21),
                "w1": lambda: -(np.linalg.norm(m1 - m2) + abs(np.sqrt(v1).sum() - np.sqrt(v2).sum())),
                "w2": lambda: -(np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(v1) - np.sqrt(v2)) ** 2)),
                "csd": lambda: -(np.sum((m1 - m2) ** 2) + np.sum(np.abs(v1 + v2))),
                "cauchy_schwarz": lambda: (
                    -0.5 * np.sum(np.log((v1 + v2) / (2 * np.sqrt(v1 * v2))) + (m1 - m2) ** 2 / (v1 + v2))
                ),
            }[metric]()
    return torch.from_numpy(out)


@pytest.mark.parametrize("metric", ["cosine", "kl", "jeffreys", "w1", "w2", "csd", "cauchy_schwarz"])
def test_vectorised_matches_per_pair_loop(metric):
    q, c = _g(4, 6, 0), _g(5, 6, 1)
    torch.testing.assert_close(
        pairwise_similarity(q, c, metric).double(), _loop(metric, q, c), rtol=1e-5, atol=1e-5
    )
    # Similarities: a candidate identical to the query is (one of) the best.
    both = GaussianEmbeddings(torch.cat([c.mean, q.mean[:1]]), torch.cat([c.var, q.var[:1]]))
    first = GaussianEmbeddings(q.mean[:1], q.var[:1])
    assert int(pairwise_similarity(first, both, metric).argmax()) == 5


def test_kl_against_scipy_entropy_and_logpdf():
    q, c = _g(2, 3, 2), _g(2, 3, 3)
    ours = kl_divergence(q, c).double()
    for i in range(2):
        for j in range(2):
            p = stats.multivariate_normal(q.mean[i].double().numpy(), np.diag(q.var[i].double().numpy()))
            r = stats.multivariate_normal(c.mean[j].double().numpy(), np.diag(c.var[j].double().numpy()))
            # KL(p||r) = -H(p) + CE(p, r), CE(p, r) = -log r(mu_p) + 1/2 tr(Sigma_r^-1 Sigma_p).
            ce = -r.logpdf(p.mean) + 0.5 * np.sum(q.var[i].double().numpy() / c.var[j].double().numpy())
            assert float(ours[i, j]) == pytest.approx(-p.entropy() + ce, rel=1e-5)


def _quantile_sample(mu, sd, n=20000):
    u = (np.arange(n) + 0.5) / n
    return mu + sd * stats.norm.ppf(u)


def test_w1_w2_against_scipy_in_1d():
    def one(m, v):
        return GaussianEmbeddings(torch.tensor([[m]]), torch.tensor([[v]]))

    # Equal variances: Eq. 25 is exact and equals scipy's W1.
    exact = stats.wasserstein_distance(_quantile_sample(0.3, 0.5), _quantile_sample(-0.4, 0.5))
    assert -float(pairwise_similarity(one(0.3, 0.25), one(-0.4, 0.25), "w1")) == pytest.approx(
        exact, rel=1e-3
    )
    # Different variances: Eq. 25 is an approximation, an upper bound in 1-D; exact at equal means is
    # sqrt(2/pi)|sigma_1 - sigma_2|.
    for m2 in (0.0, 0.2, 1.5):
        exact = stats.wasserstein_distance(_quantile_sample(0.0, 0.4), _quantile_sample(m2, 1.1))
        approx = -float(pairwise_similarity(one(0.0, 0.16), one(m2, 1.21), "w1"))
        assert approx >= exact - 1e-4
    exact0 = stats.wasserstein_distance(_quantile_sample(0.0, 0.4), _quantile_sample(0.0, 1.1))
    assert exact0 == pytest.approx(math.sqrt(2 / math.pi) * 0.7, rel=1e-3)
    # W2^2 in 1-D is the mean squared quantile difference.
    x, y = _quantile_sample(0.3, 0.4), _quantile_sample(-0.2, 1.1)
    assert -float(pairwise_similarity(one(0.3, 0.16), one(-0.2, 1.21), "w2")) == pytest.approx(
        np.mean((x - y) ** 2), rel=1e-3
    )


def test_cauchy_schwarz_and_csd_against_integration_and_sampling():
    m1, s1, m2, s2 = 0.2, 0.7, -0.5, 1.3
    pq = integrate.quad(lambda x: stats.norm.pdf(x, m1, s1) * stats.norm.pdf(x, m2, s2), -20, 20)[0]
    pp = integrate.quad(lambda x: stats.norm.pdf(x, m1, s1) ** 2, -20, 20)[0]
    qq = integrate.quad(lambda x: stats.norm.pdf(x, m2, s2) ** 2, -20, 20)[0]
    a = GaussianEmbeddings(torch.tensor([[m1]]), torch.tensor([[s1**2]]))
    b = GaussianEmbeddings(torch.tensor([[m2]]), torch.tensor([[s2**2]]))
    dcs = -float(pairwise_similarity(a, b, "cauchy_schwarz"))
    assert dcs == pytest.approx(-math.log(pq / math.sqrt(pp * qq)), rel=1e-5)
    # CSD is E||z_q - z_c||^2 for independent samples.
    q, c = _g(2, 4, 4), _g(3, 4, 5)
    g = torch.Generator().manual_seed(6)
    n = 200_000
    zq = q.mean.double()[:, None] + q.var.double().sqrt()[:, None] * torch.randn(
        n, 2, 1, 4, generator=g, dtype=torch.float64
    )
    zc = c.mean.double() + c.var.double().sqrt() * torch.randn(n, 1, 3, 4, generator=g, dtype=torch.float64)
    sq = ((zq - zc) ** 2).sum(-1)
    assert bool(
        ((-pairwise_similarity(q, c, "csd").double() - sq.mean(0)).abs() < 5 * (sq.var(0) / n).sqrt()).all()
    )


def test_errors():
    q = _g(2, 3, 0)
    zero = GaussianEmbeddings(q.mean, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="strictly positive variances"):
        pairwise_similarity(q, zero, "kl")
    with pytest.raises(ValueError, match="metric='l3'"):
        pairwise_similarity(q, q, "l3")
    assert {m.value for m in Metric} >= {"kl", "jeffreys", "w1", "w2", "csd", "probit", "cosine"}
    # W2 / CSD / probit accept zero variances (deterministic embeddings).
    for metric in ("w2", "csd", "probit"):
        assert torch.isfinite(pairwise_similarity(q, zero, metric)).all()
