"""Variance scale (max held-out pair likelihood) and Procrustes alignment against independent references."""

from __future__ import annotations

import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from ucse.export.gaussian import GaussianEmbeddings
from ucse.uec.alignment import AlignmentError, fit_procrustes
from ucse.uec.calibration import fit_variance_scale, pair_log_likelihood
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
    with pytest.raises(AlignmentError, match="needs >= 4 fitting texts"):
        fit_procrustes(wide[:3], x[:3], "few")
    with pytest.raises(AlignmentError, match="rank-deficient"):
        fit_procrustes(torch.zeros(40, 6, dtype=torch.float64), x, "dead")
