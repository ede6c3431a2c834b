"""Out-of-scope scores against independent references: scipy densities, sklearn neighbours, brute force."""

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.covariance import LedoitWolf
from sklearn.neighbors import NearestNeighbors

from ucse.uncertainty import ood_scores as S
from ucse.uncertainty.density import fit_class_gaussians


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    c, d = 4, 6
    centres = rng.normal(0, 2, (c, d))
    y = np.repeat(np.arange(c), 30)
    y[:1] = 3  # class 0 keeps 29 rows, class 3 31: unequal priors
    x = centres[y] + rng.normal(size=(len(y), d)) * rng.uniform(0.5, 2.0, d)
    q = rng.normal(0, 3, (25, d))
    return x, y, q, c


def test_energy_is_minus_logsumexp():
    logits = np.random.default_rng(1).normal(0, 5, (7, 3))
    np.testing.assert_allclose(S.energy(logits).numpy(), -logsumexp(logits, axis=1), rtol=1e-12)


def test_relative_mahalanobis_matches_a_brute_force_computation(data):
    x, y, q, c = data
    means = np.stack([x[y == k].mean(0) for k in range(c)])
    p = LedoitWolf(assume_centered=True).fit(x - means[y]).precision_
    m0 = x.mean(0)
    p0 = LedoitWolf(assume_centered=True).fit(x - m0).precision_
    want = [min((v - m) @ p @ (v - m) for m in means) - (v - m0) @ p0 @ (v - m0) for v in q]
    got = S.relative_mahalanobis(q, fit_class_gaussians(x, y, c), S.fit_background(x))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-9)


def test_class_density_is_the_scipy_mixture_of_per_class_gaussians(data):
    x, y, q, c = data
    cc = S.fit_class_covariances(x, y, c)
    log_joint = []
    for k in range(c):
        rows = x[y == k]
        cov = LedoitWolf(assume_centered=True).fit(rows - rows.mean(0)).covariance_
        log_joint.append(np.log(len(rows) / len(y)) + multivariate_normal(rows.mean(0), cov).logpdf(q))
    want = -logsumexp(np.stack(log_joint, 1), axis=1)
    # Precisions are stored in float32 (C * D^2 numbers): relative error ~1e-7 of each quadratic form.
    np.testing.assert_allclose(S.class_neg_log_density(q, cc).numpy(), want, rtol=1e-5)


def test_a_class_with_one_row_borrows_the_shared_covariance(data):
    x, y, _, c = data
    y = y.copy()
    y[y == 2] = 1
    y[0] = 2  # class 2: one row
    cc = S.fit_class_covariances(x, y, c)
    shared = LedoitWolf(assume_centered=True).fit(x - np.stack([x[y == k].mean(0) for k in range(c)])[y])
    np.testing.assert_allclose(cc.precision[2].numpy(), shared.precision_, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(S.class_neg_log_density(x, cc)).all()


@pytest.mark.parametrize("rows", ["two", "identical"])
def test_a_class_with_two_or_identical_rows_borrows_the_shared_covariance(rows):
    # Two rows: Ledoit-Wolf's shrinkage is exactly 0 (sklearn agrees), a rank-1 covariance whose log det
    # (~-2,400 at D = 64) let that class decide every score: held-out AUROC 1.0 -> 0.42. Identical rows:
    # log det -inf, every score -inf.
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    d = 64
    centres = rng.normal(0, 3, (6, d))
    y = np.concatenate([np.repeat(np.arange(5), 40), np.full(3 if rows == "identical" else 2, 5)])
    x = centres[y] + rng.normal(size=(len(y), d))
    if rows == "identical":
        x[y == 5] = x[y == 5][0]
    else:  # the premise: scikit-learn's Ledoit-Wolf does not shrink two rows' covariance at all
        assert LedoitWolf(assume_centered=True).fit(x[y == 5] - x[y == 5].mean(0)).shrinkage_ == 0
    cc = S.fit_class_covariances(x, y, 6)
    shared = fit_class_gaussians(x, y, 6)
    assert float(cc.logdet[5]) == pytest.approx(float(shared.logdet)) and np.isfinite(cc.logdet).all()
    inside = centres[rng.integers(0, 5, 200)] + rng.normal(size=(200, d))
    outside = inside + 10.0
    scores = S.class_neg_log_density(np.concatenate([inside, outside]), cc).numpy()
    assert np.isfinite(scores).all()
    assert roc_auc_score([0] * 200 + [1] * 200, scores) > 0.99


def test_an_absent_class_never_wins(data):
    x, y, q, c = data
    cc = S.fit_class_covariances(x, y, c + 1)  # class c has no rows: prior 0
    assert cc.log_prior[c] == -np.inf
    np.testing.assert_allclose(
        S.class_neg_log_density(q, cc).numpy(),
        S.class_neg_log_density(q, S.fit_class_covariances(x, y, c)).numpy(),
        rtol=1e-9,
    )


@pytest.mark.parametrize("k", [1, 5, 30])
def test_knn_distance_matches_sklearn_on_normalised_features(data, k):
    x, _, q, _ = data
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    dist, _ = NearestNeighbors(n_neighbors=k).fit(unit(x)).kneighbors(unit(q))
    got = S.knn_distance(q, S.normalise(x), k, chunk=7)  # several chunks
    # float32 unit vectors: |a - b| from 2 - 2 a.b loses ~1e-3 absolute near 0, none of these is that close.
    np.testing.assert_allclose(got.numpy(), dist[:, -1], atol=2e-3)


def test_knn_refuses_more_neighbours_than_rows(data):
    x, _, q, _ = data
    with pytest.raises(ValueError, match="k=200 needs 1 <= k <= 120"):
        S.knn_distance(q, S.normalise(x), 200)
