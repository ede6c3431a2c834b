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


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("k", [1, 3, MAX_K])
@pytest.mark.parametrize("block", [7, 16384])
def test_neighbour_distances_are_the_brute_force_ones(monkeypatch, k, block, half):
    # Bank blocks of 7 rows (the k nearest merged across three blocks) or one block.
    monkeypatch.setattr(neighbours, "BANK_BLOCK", block)
    if block == 7:  # and the float64 rescoring one query row at a time (kc * F > 100 values)
        monkeypatch.setattr(neighbours, "RESCORE_VALUES", 100)
    rng = np.random.default_rng(0)
    q = joint_features(rng.normal(size=(37, 4)), rng.normal(size=(37, 6)))
    bank = joint_features(rng.normal(size=(20, 4)), rng.normal(size=(20, 6)))
    got = neighbour_distances(q, bank, k, chunk=8, half=half)  # query chunks of 8 rows: joined in order
    want = np.sort(cdist(q.double().numpy(), bank.double().numpy()), axis=1)[:, : min(k, 20)]
    assert got.shape == want.shape  # k beyond the bank's 20 rows: all 20
    # float64 arithmetic on the same float32 rows: sqrt(2 - 2 cos) near 0 amplifies ~1e-16 to ~1e-8
    np.testing.assert_allclose(got.numpy(), want, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on a lent GPU)")
def test_host_query_against_a_gpu_bank_is_the_brute_force_search():
    # A classifier on CUDA keeps its float16 bank there while its joint features come from the host: the
    # search and the float64 rescoring must run where the bank is (a host query once failed there).
    rng = np.random.default_rng(3)
    q = joint_features(rng.normal(size=(300, 16)), rng.normal(size=(300, 24)))
    bank = joint_features(rng.normal(size=(900, 16)), rng.normal(size=(900, 24))).half()
    got = neighbour_distances(q, bank.cuda(), 5)
    # the distance the search defines, sqrt(2 - 2 q.b) for unit rows, brute force in float64 on the same
    # float16 rows (|q - b| itself differs by ~1e-4 there: a float16 row's norm is 1 only to ~5e-4)
    cos = q.double().numpy() @ bank.double().numpy().T
    want = np.sort(np.sqrt(np.clip(2 - 2 * cos, 0, None)), axis=1)[:, :5]
    assert got.device.type == "cpu"
    np.testing.assert_allclose(got.numpy(), want, atol=1e-9)


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_rows_float32_cannot_tell_apart_are_ranked_by_their_float64_cosines(k, half):
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
    got = neighbour_distances(q, bank, k, half=half)
    cos = np.sort(q.double().numpy() @ bank.double().numpy().T, axis=1)[:, ::-1][:, :k]
    want = np.sqrt(np.clip(2 - 2 * cos, 0, None))
    assert want.min() > 1e-5  # none is a float64 zero: the ranking is real
    # Both sides float64 over 16 products, summed in whatever order the CPU's kernels take: cosines agree to
    # ~16 * 1.1e-16, so d^2 = 2 - 2 cos (~8e-9) to ~5e-16 / 8e-9 and d to ~3e-8 relative (float32: 100 %).
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("margin", [2, 64])
@pytest.mark.parametrize("k", [1, 4])
def test_the_bf16_search_returns_the_exact_neighbours_where_bf16_ranks_them_wrong(monkeypatch, k, margin):
    # Queries each with a cluster of 60 bank rows whose cosines to it spread over ~0.02, a few bf16 steps:
    # bf16 ranks them wrongly for many queries (checked below), so only the certificate (rescore every
    # candidate within 2 x HALF_ERROR of the k-th) and the float32 search of uncertified rows keep the result
    # exact. With a margin of 2 every row is uncertified (60 rows within 2 x HALF_ERROR); with 64 every row is
    # certified (the 65th candidate lies in another cluster). A float16 bank, as the classifier keeps it.
    calls = []
    real = neighbours._top_merge
    monkeypatch.setattr(neighbours, "HALF_MARGIN", margin)
    monkeypatch.setattr(neighbours, "_top_merge", lambda *a: calls.append(a[4]) or real(*a))
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(12, 64))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rows = np.repeat(centres, 60, axis=0) + 0.02 * rng.normal(size=(720, 64))
    bank = torch.from_numpy(rows / np.linalg.norm(rows, axis=1, keepdims=True)).half()
    q = torch.from_numpy(centres + 0.01 * rng.normal(size=(12, 64))).float()
    q = q / q.norm(dim=1, keepdim=True)
    got = neighbour_distances(q, bank, k, half=True)
    exact = q.double() @ bank.double().T  # (12, 720)
    want = torch.sqrt((2 - 2 * exact.topk(k, dim=1).values).clamp_min(0))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-9)
    bf16_first = (q.bfloat16() @ bank.bfloat16().T).float().argmax(dim=1)
    assert (bf16_first != exact.argmax(dim=1)).any()  # bf16 alone would have answered wrongly
    assert (torch.float32 in calls) == (margin == 2)  # the float32 search ran only for uncertified rows


def test_bf16_cosines_stay_within_the_stated_error():
    # HALF_ERROR is derived by hand (docstring); here against float64 on 768-wide unit rows, float16 bank rows
    # as the classifier keeps them, including pairs near cos 1 where the bf16 result's rounding is largest.
    rng = np.random.default_rng(5)
    q = rng.normal(size=(300, 768))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    near = q + 0.05 * rng.normal(size=q.shape) / np.sqrt(768)
    rows = np.concatenate([rng.normal(size=(700, 768)), near, -near[:50]])
    bank = torch.from_numpy(rows / np.linalg.norm(rows, axis=1, keepdims=True)).half()
    qt = torch.from_numpy(q).float()
    approx = (qt.bfloat16() @ bank.bfloat16().T).double()
    exact = qt.double() @ bank.double().T
    assert exact.max() > 0.99 and exact.min() < -0.99  # both ends of the range are exercised
    assert (approx - exact).abs().max() < neighbours.HALF_ERROR
