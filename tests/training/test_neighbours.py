"""The joint [mu, pooled] space of the ``joint_knn`` out-of-scope score, by hand and by brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from ucse.training import neighbours
from ucse.training.neighbours import MAX_K, POOLED_WEIGHT, joint_features, neighbour_distances


def test_joint_features_by_hand():
    mean, pooled = np.array([[3.0, 4.0]]), np.array([[0.0, 2.0, 0.0]])
    # unit mu (0.6, 0.8), pooled at weight w: (0, w, 0); the row then scaled to unit norm by sqrt(1 + w^2)
    w = POOLED_WEIGHT
    want = np.array([[0.6, 0.8, 0.0, w, 0.0]]) / np.sqrt(1 + w * w)
    got = joint_features(mean, torch.from_numpy(pooled))
    assert got.dtype == torch.float32 and got.shape == (1, 5)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    # the scale of either part does not matter, only its direction
    np.testing.assert_allclose(joint_features(7 * mean, 0.1 * pooled).numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("k", [1, 3, MAX_K])
@pytest.mark.parametrize("block", [7, 4096])
def test_neighbour_distances_are_the_brute_force_ones(monkeypatch, k, block):
    # Bank blocks of 7 rows (the k nearest merged across three blocks) or one block.
    monkeypatch.setattr(neighbours, "BANK_BLOCK", block)
    if block == 7:  # and the float64 rescoring one query row at a time (kc * F > 100 values)
        monkeypatch.setattr(neighbours, "RESCORE_VALUES", 100)
    rng = np.random.default_rng(0)
    q = joint_features(rng.normal(size=(37, 4)), rng.normal(size=(37, 6)))
    bank = joint_features(rng.normal(size=(20, 4)), rng.normal(size=(20, 6)))
    got = neighbour_distances(q, bank, k, chunk=8)  # query chunks of 8 rows: joined in order
    want = np.sort(cdist(q.double().numpy(), bank.double().numpy()), axis=1)[:, : min(k, 20)]
    assert got.shape == want.shape  # k beyond the bank's 20 rows: all 20
    # float64 arithmetic on the same float32 rows: sqrt(2 - 2 cos) near 0 amplifies ~1e-16 to ~1e-8
    np.testing.assert_allclose(got.numpy(), want, atol=1e-6)


@pytest.mark.parametrize("k", [1, 3])
def test_rows_float32_cannot_tell_apart_are_ranked_by_their_float64_cosines(k):
    # Six bank rows within ~3e-4 of the query's direction: their cosines differ by ~1e-8, below float32's
    # resolution near 1 (6e-8), so the float32 search ties them; the float64 rescoring must still return the
    # exact distances of the k nearest (a float32 distance here would be 0 or ~3.5e-4, off by ~100 %).
    rng = np.random.default_rng(1)
    v = rng.normal(size=16)
    v /= np.linalg.norm(v)
    near = v + 3e-4 * rng.normal(size=(6, 16)) / 4
    far = rng.normal(size=(20, 16))
    rows = np.concatenate([far[:10], near, far[10:]])
    bank = torch.from_numpy(rows / np.linalg.norm(rows, axis=1, keepdims=True)).float()
    q = torch.from_numpy(v[None]).float()
    got = neighbour_distances(q, bank, k)
    cos = np.sort(q.double().numpy() @ bank.double().numpy().T, axis=1)[:, ::-1][:, :k]
    want = np.sqrt(np.clip(2 - 2 * cos, 0, None))
    assert want.min() > 1e-5  # none is a float64 zero: the ranking is real
    # Both sides float64 over 16 products, summed in whatever order the CPU's kernels take: cosines agree to
    # ~16 * 1.1e-16, so d^2 = 2 - 2 cos (~8e-9) to ~5e-16 / 8e-9 and d to ~3e-8 relative (float32: 100 %).
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
