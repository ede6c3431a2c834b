"""Variance scale (max held-out pair likelihood) and Procrustes alignment against independent references."""

from __future__ import annotations

import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.alignment import AlignmentError, fit_procrustes
from ucse.uec.calibration import (
    contrastive_log_likelihood,
    fit_contrastive_scale,
    fit_variance_scale,
    pair_log_likelihood,
)
from ucse.uec.convolution import convolve


def _pairs(noise: float, n=200, d=6, seed=0, var=0.01):
    g = torch.Generator().manual_seed(seed)
    a = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)
    b = a + noise * torch.randn(n, d, generator=g)
    v = torch.full((n, d), var)
    return GaussianEmbeddings(a, v), GaussianEmbeddings(b, v)


def test_scale_maximises_pair_likelihood_like_scipy():
    a, b = _pairs(0.3)
    s = fit_variance_scale(a, b)
    resid = (a.mean - b.mean).double().flatten().numpy()
    tot = (a.var + b.var).double().flatten().numpy()

    def nll(log_s):
        return -norm.logpdf(resid, scale=(tot * 10**log_s) ** 0.5).sum()

    ref = 10 ** minimize_scalar(nll, bounds=(-6, 6), method="bounded", options={"xatol": 1e-9}).x
    assert s == pytest.approx(ref, rel=1e-4)
    assert s == pytest.approx(0.3**2 / 0.02, rel=0.1)  # true residual variance / modelled variance
    assert pair_log_likelihood(a, b, s) > pair_log_likelihood(a, b, 2 * s)
    assert pair_log_likelihood(a, b, s) > pair_log_likelihood(a, b, s / 2)


def test_scaled_weights_move_to_the_member_that_keeps_positives_together():
    """Equal raw variances, but member 'bad' puts positives far apart: after scaling it loses weight."""
    good_a, good_b = _pairs(0.05, seed=1)
    bad_a, bad_b = _pairs(0.5, seed=2, var=0.001)  # bad AND overconfident: raw weights favour it
    raw = convolve(
        [
            GaussianEmbeddings(good_a.mean, good_a.var, {"member": "good"}),
            GaussianEmbeddings(bad_a.mean, bad_a.var, {"member": "bad"}),
        ]
    ).weights
    assert bool((raw[:, 1] > 0.5).all())
    s_good, s_bad = fit_variance_scale(good_a, good_b), fit_variance_scale(bad_a, bad_b)
    scaled = convolve(
        [
            GaussianEmbeddings(good_a.mean, good_a.var * s_good, {"member": "good"}),
            GaussianEmbeddings(bad_a.mean, bad_a.var * s_bad, {"member": "bad"}),
        ]
    ).weights
    assert bool((scaled[:, 0] > 0.5).all())  # every input now favours the reliable member


def test_procrustes_recovers_a_known_rotation_and_maps_variances():
    g = torch.Generator().manual_seed(3)
    x = torch.nn.functional.normalize(torch.randn(50, 5, generator=g, dtype=torch.float64), dim=1)
    q, _ = torch.linalg.qr(torch.randn(5, 5, generator=g, dtype=torch.float64))
    fitted = fit_procrustes(x @ q, x, "rot")  # the member is the reference rotated by q
    torch.testing.assert_close(fitted.rotation, q.T, rtol=0, atol=1e-10)
    assert fitted.fit_residual < 1e-10
    var = torch.rand(4, 5, generator=g, dtype=torch.float64) * 1e-3
    out = fitted.apply(GaussianEmbeddings((x[:4] @ q).float(), var.float()))
    torch.testing.assert_close(out.mean.double(), x[:4], rtol=0, atol=1e-6)
    full = torch.stack([torch.diagonal(q @ torch.diag(v) @ q.T) for v in var])  # diag of R^T Sigma R
    torch.testing.assert_close(out.var.double(), full, rtol=1e-4, atol=1e-9)


def test_procrustes_across_widths_and_unalignable_members():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(40, 4, generator=g, dtype=torch.float64)
    embed, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))
    wide = x @ embed[:4]  # a 6-d member holding the 4-d space isometrically
    fitted = fit_procrustes(wide, x, "wide")
    assert fitted.rotation.shape == (6, 4) and fitted.fit_residual < 1e-10
    with pytest.raises(AlignmentError, match="needs >= 4 fitting texts.*`align: blocks`"):
        fit_procrustes(wide[:3], x[:3], "few")
    with pytest.raises(AlignmentError, match="rank-deficient \\(rank 0 of 4.*`align: blocks`"):
        fit_procrustes(torch.zeros(40, 6, dtype=torch.float64), x, "dead")
    # A space one direction short of its width (real embeddings lose some to LayerNorm) still aligns: the
    # map is exact on the directions the texts use.
    flat = x.clone()
    flat[:, 3] = 0.0
    q, _ = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=torch.float64))
    short = fit_procrustes(flat @ q, flat, "short")
    assert short.rank == 3 and short.fit_residual < 1e-10
    with pytest.raises(AlignmentError, match="rank 1 of 4"):  # less than half the directions shared
        fit_procrustes(flat[:, :1] @ embed[:1], x, "collapsed")


def _retrieval_case(seed=0, n=5, m=8, d=3):
    g = torch.Generator().manual_seed(seed)
    a = GaussianEmbeddings(torch.randn(n, d, generator=g), 0.05 + torch.rand(n, d, generator=g))
    c = GaussianEmbeddings(torch.randn(m, d, generator=g), 0.05 + torch.rand(m, d, generator=g))
    c.mean[:n] = a.mean + 0.5 * torch.randn(n, d, generator=g)  # candidate i is anchor i's positive
    exclude = torch.zeros(n, m, dtype=torch.bool)
    exclude[0, 1] = exclude[1, 0] = True  # anchors 0 and 1 share a group: not each other's negatives
    return a, c, torch.arange(n), exclude


def test_contrastive_likelihood_is_a_log_softmax_of_mahalanobis_distances():
    from scipy.spatial.distance import mahalanobis
    from scipy.special import logsumexp

    a, c, pos, exclude = _retrieval_case()
    s = 0.7
    ref = []
    for i in range(a.n):
        logits = []
        for j in range(c.n):
            inv_cov = torch.diag(1 / (s * (a.var[i].double() + c.var[j].double()))).numpy()
            d = mahalanobis(a.mean[i].double().numpy(), c.mean[j].double().numpy(), inv_cov)
            logits.append(-float("inf") if exclude[i, j] else -0.5 * d**2)
        ref.append(logits[i] - logsumexp(logits))
    got = contrastive_log_likelihood(a, c, pos, exclude, s)
    assert got == pytest.approx(sum(ref) / len(ref), rel=1e-9)


def test_contrastive_scale_is_the_brute_force_maximiser():
    a, c, pos, exclude = _retrieval_case(seed=3, n=12, m=30, d=4)
    s = fit_contrastive_scale(a, c, pos, exclude)
    grid = torch.logspace(-4, 4, 4001, dtype=torch.float64)
    vals = torch.tensor([contrastive_log_likelihood(a, c, pos, exclude, float(t)) for t in grid])
    best = float(grid[vals.argmax()])
    assert s == pytest.approx(best, rel=0.01)
    assert contrastive_log_likelihood(a, c, pos, exclude, s) >= float(vals.max()) - 1e-9


def test_a_member_whose_negatives_crowd_its_positives_gets_the_larger_scale():
    # Two members put every positive pair equally far apart (same pair-likelihood scale) but one keeps its
    # negatives far away, the other packs them around the anchors. fit_variance_scale sees (a, pos) only, so
    # it gives both one scale; the contrastive fit must give the crowding member the larger one.
    g = torch.Generator().manual_seed(0)
    n, d = 40, 8
    anchors = 3.0 * torch.randn(n, d, generator=g)
    offset = 0.3 * torch.randn(n, d, generator=g)
    v = torch.full((n, d), 0.05)
    a = GaussianEmbeddings(anchors, v)
    pos = GaussianEmbeddings(anchors + offset, v)
    spread = anchors[torch.randperm(n, generator=g)] + 2.0 * torch.randn(n, d, generator=g)
    crowded = anchors + 0.35 * torch.randn(n, d, generator=g)  # a negative next to every anchor
    scales = {}
    for name, neg in (("separates", spread), ("crowds", crowded)):
        cand = GaussianEmbeddings(torch.cat([pos.mean, neg]), torch.cat([v, v]))
        scales[name] = fit_contrastive_scale(a, cand, torch.arange(n))
    assert scales["crowds"] > 3 * scales["separates"]


def test_contrastive_scale_refuses_masking_a_positive():
    a, c, pos, exclude = _retrieval_case()
    exclude[2, 2] = True
    with pytest.raises(ValueError, match="own positive"):
        fit_contrastive_scale(a, c, pos, exclude)
