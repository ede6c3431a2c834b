import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.spatial.distance import mahalanobis as scipy_mahalanobis

from ucse.uncertainty import density, scores

RNG = np.random.default_rng(0)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_msp_and_entropy_against_numpy_and_scipy():
    probs = _softmax(RNG.normal(size=(50, 6)) * 3)
    np.testing.assert_allclose(scores.msp(probs), 1 - probs.max(1))
    np.testing.assert_allclose(scores.entropy(probs), stats.entropy(probs, axis=1))
    one_hot = np.eye(4)[[0, 3]]
    np.testing.assert_allclose(scores.entropy(one_hot), [0.0, 0.0])  # 0 log 0 = 0, not NaN
    np.testing.assert_allclose(scores.entropy(np.full((1, 4), 0.25)), [np.log(4)])


def test_sigma_is_mean_standard_deviation():
    var = np.array([[0.25, 1.0], [4.0, 0.0]])
    np.testing.assert_allclose(scores.sigma(var), [0.75, 1.0])
    with pytest.raises(ValueError):
        scores.sigma(np.array([[-1.0, 1.0]]))


def test_logit_variance_matches_monte_carlo():
    w = RNG.normal(size=(3, 5))
    var = RNG.uniform(0.1, 2.0, size=(1, 5))
    z = RNG.normal(size=(200_000, 5)) * np.sqrt(var)
    np.testing.assert_allclose(scores.logit_variance(var, w, scale=0.5)[0], (0.5 * z @ w.T).var(0), rtol=0.02)


def _binary_predictive(m: float, s2: float) -> float:
    """E[sigmoid(x)], x ~ N(m, s2), by quadrature: the exact two-class predictive probability."""
    f = lambda x: stats.norm.pdf(x, m, np.sqrt(s2)) / (1 + np.exp(-x))  # noqa: E731
    return integrate.quad(f, m - 12 * np.sqrt(s2), m + 12 * np.sqrt(s2))[0]


def test_sampled_and_probit_predictive_against_quadrature():
    # Two classes: logit difference x = l1 - l0 ~ N(m, s2) with s2 = sum_d (w1 - w0)_d^2 var_d.
    w = np.array([[0.0, 0.0], [1.0, -2.0]])
    var = np.array([[0.5, 0.3], [2.0, 1.0]])
    logits = np.array([[0.0, 1.0], [0.0, -0.5]])
    exact = [_binary_predictive(m, s2) for m, s2 in zip(logits[:, 1], var @ (w[1] - w[0]) ** 2, strict=True)]
    mc = scores.sampled_probs(logits, var, w, samples=200_000, seed=0).mean(0)[:, 1]
    np.testing.assert_allclose(mc, exact, atol=3e-3)
    # The probit approximation is an approximation: within 0.02 of the exact value for these variances.
    np.testing.assert_allclose(scores.probit_probs(logits, var, w)[:, 1], exact, atol=0.02)
    # Zero variance: every sample equals the plain softmax; mutual information is 0.
    sampled = scores.sampled_probs(logits, np.zeros_like(var), w, samples=4, seed=1)
    np.testing.assert_allclose(sampled[0], _softmax(logits), atol=1e-12)
    np.testing.assert_allclose(scores.mutual_information(sampled), 0.0, atol=1e-12)


def test_sampled_probs_do_not_depend_on_the_batch_and_apply_calibration():
    w, var, logits = RNG.normal(size=(4, 3)), RNG.uniform(size=(6, 3)), RNG.normal(size=(6, 4))
    full = scores.sampled_probs(logits, var, w, samples=5, seed=3, scale=0.5, bias=[0.1, 0, 0, -0.1])
    part = scores.sampled_probs(
        logits[2:4], var[2:4], w, samples=5, seed=3, scale=0.5, bias=[0.1, 0, 0, -0.1]
    )
    np.testing.assert_allclose(full[:, 2:4], part)
    eps = torch.randn((5, 1, 3), generator=torch.Generator().manual_seed(3), dtype=torch.float64).numpy()
    ref = _softmax(0.5 * (logits + (eps * np.sqrt(var)) @ w.T) + np.array([0.1, 0, 0, -0.1]))
    np.testing.assert_allclose(full, ref, atol=1e-12)


def test_mutual_information_by_hand():
    p = np.array([[[0.9, 0.1]], [[0.1, 0.9]]])  # two samples that disagree
    h = lambda q: -(q * np.log(q)).sum(-1)  # noqa: E731
    expected = h(p.mean(0)) - h(p).mean(0)
    np.testing.assert_allclose(scores.mutual_information(p), expected)
    assert expected[0] > 0.3


def test_density_scores_against_scipy():
    means = np.array([[0.0, 0.0, 0.0], [4.0, 0.0, 1.0]])
    y = RNG.integers(0, 2, size=400)
    x = means[y] + RNG.normal(size=(400, 3)) @ np.diag([1.0, 0.5, 2.0])
    g = density.fit_class_gaussians(x, y, num_classes=3)  # class 2 has no rows
    test = RNG.normal(size=(7, 3)) * 3
    prec = g.precision.numpy()
    ref = [min(scipy_mahalanobis(t, g.means[c].numpy(), prec) ** 2 for c in (0, 1)) for t in test]
    np.testing.assert_allclose(density.mahalanobis(test, g), ref, rtol=1e-9)
    cov = np.linalg.inv(prec)
    prior = np.bincount(y, minlength=2) / len(y)
    dens = sum(prior[c] * stats.multivariate_normal(g.means[c].numpy(), cov).pdf(test) for c in (0, 1))
    np.testing.assert_allclose(density.neg_log_density(test, g), -np.log(dens), rtol=1e-9)
    np.testing.assert_allclose(g.means[:2], [x[y == c].mean(0) for c in (0, 1)])
    # Far from every class = larger score.
    assert density.mahalanobis([[40.0, 0, 0]], g)[0] > density.mahalanobis([[0.1, 0, 0]], g)[0]
