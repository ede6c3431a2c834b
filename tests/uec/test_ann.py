"""FAISS first stage + exact probit re-rank against exact streamed UEC top-k (skipped without faiss-cpu)."""

from __future__ import annotations

import pytest
import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.similarity import topk

faiss = pytest.importorskip("faiss")

from ucse.uec.ann import AnnProbitIndex  # noqa: E402


def _clustered(n, centers, gen, var=1e-3):
    c = centers[torch.randint(len(centers), (n,), generator=gen)]
    mean = torch.nn.functional.normalize(c + 0.3 * torch.randn(n, centers.shape[1], generator=gen), dim=1)
    return GaussianEmbeddings(mean, var * (0.5 + torch.rand(n, centers.shape[1], generator=gen)))


def test_flat_index_with_all_candidates_is_exact_and_ivf_recall_is_high():
    gen = torch.Generator().manual_seed(0)
    centers = torch.randn(20, 16, generator=gen)
    corpus, query = _clustered(3000, centers, gen), _clustered(50, centers, gen)
    exact_s, exact_i = topk(query, corpus, k=10, beta=1.0)
    flat = AnnProbitIndex(corpus, nlist=0)
    s, i = flat.search(query, k=10, candidates=3000)
    assert torch.equal(i, exact_i)
    torch.testing.assert_close(s, exact_s, rtol=1e-5, atol=1e-6)
    ivf = AnnProbitIndex(corpus, nlist=40, nprobe=8)
    assert ivf.nlist == 40
    _, approx = ivf.search(query, k=10, candidates=100)
    recall = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(approx, exact_i)) / exact_i.numel()
    assert recall > 0.95
    with pytest.raises(ValueError, match="k <= candidates"):
        ivf.search(query, k=10, candidates=5)
