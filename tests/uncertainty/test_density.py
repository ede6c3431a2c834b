"""The streamed Ledoit-Wolf estimator and the class Gaussians built on it, against scikit-learn."""

import numpy as np
import pytest
import torch
from scipy.linalg import pinvh
from sklearn.covariance import LedoitWolf

from ucse.uncertainty import density

RNG = np.random.default_rng(0)


@pytest.mark.parametrize(("n", "d"), [(50, 8), (300, 40), (40, 60), (25, 1)])
def test_streamed_ledoit_wolf_is_scikit_learns_estimator(n, d):
    x = RNG.normal(size=(n, d)) @ RNG.normal(size=(d, d)) * 0.3  # correlated, not centred on purpose
    ref = LedoitWolf(assume_centered=True).fit(x)
    blocks = [torch.as_tensor(b) for b in np.array_split(x, 7)]  # uneven blocks: the sums must not care
    precision, logdet = density.ledoit_wolf_streamed(blocks)
    # Same arithmetic in another order: float64 rounding, scaled by the precision's condition number.
    cond = np.linalg.cond(ref.covariance_)
    np.testing.assert_allclose(
        precision.numpy(), ref.precision_, rtol=0, atol=1e-10 * cond * np.abs(ref.precision_).max()
    )
    assert logdet == pytest.approx(np.linalg.slogdet(ref.covariance_)[1], abs=1e-9 * cond)


def test_class_gaussians_read_in_blocks_equal_the_whole_matrix_fit(monkeypatch):
    c, d = 4, 12
    y = RNG.integers(0, c, 333)
    x = (RNG.normal(size=(333, d)) + 2.0 * RNG.normal(size=(c, d))[y]).astype(
        np.float32
    )  # float32, as encoded
    whole = density.fit_class_gaussians(x, y, c)
    monkeypatch.setattr(density, "CHUNK_ROWS", 50)  # 7 blocks, the last one short
    blocks = density.fit_class_gaussians(x, y, c)
    x64 = x.astype(np.float64)
    means = np.stack([x64[y == k].mean(0) for k in range(c)])
    ref = LedoitWolf(assume_centered=True).fit(x64 - means[y])
    for g in (whole, blocks):
        np.testing.assert_allclose(g.means.numpy(), means, rtol=0, atol=1e-12)
        np.testing.assert_allclose(g.precision.numpy(), pinvh(ref.covariance_), rtol=1e-9, atol=1e-9)


def test_one_training_row_per_label_reads_distances_as_euclidean_with_a_warning(caplog):
    # a researcher's trial (Banking77, 50 rows for 77 labels): every residual was zero, the covariance too,
    # and the density score came out NaN for every text, which stopped the run
    from ucse.uncertainty.density import fit_class_gaussians, mahalanobis, neg_log_density

    rng = np.random.default_rng(0)
    means = rng.normal(size=(5, 3))
    x = rng.normal(size=(7, 3))
    with caplog.at_level("WARNING", logger="ucse.uncertainty.density"):
        g = fit_class_gaussians(means, np.arange(5), 6)  # one row for each of five labels, one label without
    assert "one row per label" in caplog.text
    brute = ((x[:, None, :] - means[None]) ** 2).sum(-1).min(1)  # squared Euclidean to the nearest mean
    # the product expands |x - m|^2 as x.x - 2 x.m + m.m: float64 cancellation ~1e-15 of |x|^2 + |m|^2
    np.testing.assert_allclose(mahalanobis(x, g).numpy(), brute, rtol=1e-12, atol=1e-12)
    density = neg_log_density(x, g).numpy()
    log_mix = np.log(np.exp(-0.5 * ((x[:, None, :] - means[None]) ** 2).sum(-1)).mean(1))  # equal priors
    np.testing.assert_allclose(density, 1.5 * np.log(2 * np.pi) - log_mix, rtol=1e-10)
