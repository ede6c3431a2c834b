import math

import numpy as np
import pytest

from ucse.uncertainty import conformal

RNG = np.random.default_rng(0)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _label_scores_loop(p, u, lam, k_reg):
    out = np.zeros_like(p)
    for i, row in enumerate(p):
        order = np.argsort(-row, kind="stable")
        for rank, c in enumerate(order, start=1):
            above = row[order[: rank - 1]].sum()
            out[i, c] = above + u[i] * row[c] + lam * max(0, rank - k_reg)
    return out


@pytest.mark.parametrize(("lam", "k_reg"), [(0.0, 0), (0.2, 1)])
def test_label_scores_match_the_definition(lam, k_reg):
    p = _softmax(RNG.normal(size=(20, 5)) * 2)
    u = RNG.uniform(size=20)
    np.testing.assert_allclose(conformal.label_scores(p, u, lam, k_reg), _label_scores_loop(p, u, lam, k_reg))
    np.testing.assert_allclose(conformal.label_scores(p), _label_scores_loop(p, np.ones(20), 0, 0))


def test_quantile_by_hand():
    s = np.arange(1, 10) / 10  # 0.1..0.9, n = 9
    assert conformal.conformal_quantile(s, 0.2) == pytest.approx(0.8)  # ceil(10 * 0.8) = 8th
    assert conformal.conformal_quantile(s, 0.05) == math.inf  # ceil(10 * 0.95) = 10 > 9


def _task(n, rng, c=10):
    """A calibrated synthetic classifier: labels are drawn from its own probabilities."""
    p = _softmax(rng.normal(size=(n, c)) * 2.5)
    y = (p.cumsum(1) < rng.uniform(size=(n, 1))).sum(1).clip(max=c - 1)
    return p, y


@pytest.mark.parametrize(("lam", "k_reg", "randomized"), [(0.0, 0, True), (0.01, 1, True), (0.0, 0, False)])
def test_split_conformal_coverage_over_repeated_splits(lam, k_reg, randomized):
    alpha, n_cal, n_test, trials = 0.1, 500, 2000, 100
    covs, sizes = [], []
    for t in range(trials):
        rng = np.random.default_rng(t)
        (pc, yc), (pt, yt) = _task(n_cal, rng), _task(n_test, rng)
        uc = conformal.uniforms(n_cal, t) if randomized else None
        ut = conformal.uniforms(n_test, 10_000 + t) if randomized else None
        q = conformal.calibrate(pc, yc, alpha, uc, lam, k_reg)
        sets = conformal.prediction_sets(pt, q, ut, lam, k_reg).numpy()
        covs.append(sets[np.arange(n_test), yt].mean())
        sizes.append(sets.sum(1).mean())
    # Marginal guarantee: E[coverage] >= 1 - alpha; the mean over 100 splits has std ~ 0.0014.
    assert np.mean(covs) >= 1 - alpha - 0.005
    if randomized:  # exact up to 1/(n+1)
        assert np.mean(covs) <= 1 - alpha + 1 / (n_cal + 1) + 0.005
    assert 1 <= np.mean(sizes) < 10


def test_include_top_never_leaves_a_set_empty_and_only_adds_the_top_label():
    """Randomised APS leaves confident rows' sets empty; ``include_top`` adds exactly their top label."""
    alpha, n = 0.1, 3000
    rng = np.random.default_rng(7)
    (pc, yc), (pt, yt) = _task(500, rng), _task(n, rng)
    q = conformal.calibrate(pc, yc, alpha, conformal.uniforms(500, 1))
    u = conformal.uniforms(n, 2)
    plain = conformal.prediction_sets(pt, q, u).numpy()
    topped = conformal.prediction_sets(pt, q, u, include_top=True).numpy()
    assert (plain.sum(1) == 0).any()  # the textbook randomised sets do come out empty here
    assert (topped.sum(1) >= 1).all()
    added = topped & ~plain
    assert not (plain & ~topped).any()  # a superset of the textbook sets
    assert (added.sum(1) <= 1).all() and (added.argmax(1)[added.any(1)] == pt.argmax(1)[added.any(1)]).all()
    cov = lambda s: s[np.arange(n), yt].mean()  # noqa: E731
    assert cov(topped) >= cov(plain)


def _weighted_quantile_by_definition(s, y, w, label, alpha):
    """inf{t : F(t) >= 1 - alpha}, F the CDF of sum_i w(y_i) delta(s_i) + w(label) delta(+inf), normalised."""
    total = w[y].sum() + w[label]
    for t in sorted(s):
        if w[y][s <= t].sum() / total >= 1 - alpha - 1e-12:
            return t
    return math.inf


def test_weighted_quantiles_match_the_definition_and_equal_weights_the_plain_quantile():
    rng = np.random.default_rng(7)
    for n, alpha in ((5, 0.1), (40, 0.2), (300, 0.05)):
        s = np.round(rng.random(n), 2)  # ties included
        y = rng.integers(0, 4, n)
        w = rng.uniform(0.1, 5.0, 4)
        got = conformal.weighted_quantiles(s, y, w, alpha)
        assert got == [_weighted_quantile_by_definition(s, y, w, c, alpha) for c in range(4)]
        plain = conformal.weighted_quantiles(s, y, np.ones(4), alpha)
        assert plain == [conformal.conformal_quantile(s, alpha)] * 4
    assert conformal.weighted_quantiles(np.zeros(0), np.zeros(0, int), np.ones(3), 0.1) == [math.inf] * 3


def test_the_rank_is_exact_where_the_float_product_lands_just_above_an_integer():
    # (149 + 1) * (1 - 0.18) is 123.00000000000001 in floating point: ceil gave rank 124, one too cautious
    assert conformal.conformal_quantile(np.arange(149.0), 0.18) == 122.0  # the 123rd smallest
    for n in range(1, 400):
        for alpha in (0.05, 0.1, 0.18, 0.3, 0.33):
            k = math.ceil(round((n + 1) * (1 - alpha), 9))  # the exact rank, by decimal rounding
            want = float(k - 1) if k <= n else math.inf
            assert conformal.conformal_quantile(np.arange(float(n)), alpha) == want, (n, alpha)


@pytest.mark.parametrize("weight", [1.0, 0.1, 7.0])
def test_equal_weights_give_the_plain_rank_whatever_their_scale(weight):
    # (149 + 1) * 0.82 is 123.00000000000001 in float: order_rank guards it, the weighted search did not, and
    # took rank 124 for weights of 1 or 7 (not 0.1): one rank conservative, depending on the weights' scale.
    s = np.arange(1.0, 150.0)
    y = np.zeros(149, int)
    plain = conformal.conformal_quantile(s, 0.18)
    assert conformal.weighted_quantiles(s, y, np.array([weight]), 0.18) == [plain]
    assert conformal.conformal_quantile(s, 0.18) == 123.0  # the 123rd smallest of 1..149
