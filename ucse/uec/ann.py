"""Large corpora: a FAISS first stage over the unit means, then an exact probit re-rank of its candidates.

Exact UEC top-k (:func:`ucse.uec.similarity.topk`) streams the whole corpus per query batch. For corpora
of millions of documents an approximate first stage over the means (FAISS inverted lists, inner product
on unit means = cosine) returns each query's ``candidates`` best documents, and the probit score
(Eq. 6) is computed exactly on those only. Since s_hat <= mu_s whenever mu_s >= 0, a document outside
the cosine top-m can only enter the probit top-k if the first stage misses it or the variances are large;
``bench/uec_scoring.py`` measures recall@10 against exact UEC.

FAISS (the ``faiss-cpu`` package, optional extra ``ann``) is imported only when an index is built.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.similarity import check_gaussian, probit_score


def _faiss():  # noqa: ANN202
    try:
        import faiss
    except ImportError:
        raise ImportError(
            "the ANN first stage needs FAISS: pip install faiss-cpu (or the ucse[ann] extra)"
        ) from None
    return faiss


class AnnProbitIndex:
    """FAISS IVF-flat (or exact flat) index over corpus means plus the corpus variances for re-ranking.

    Args:
        corpus: (Nc, D) corpus Gaussians with unit-norm means (normalise first).
        nlist: inverted lists; default ~4 sqrt(Nc) (0 = exact flat index, no training).
        nprobe: lists visited per query.
        train_size: means sampled (seeded) to train the coarse quantiser.
        seed: sampling seed.
    """

    def __init__(
        self,
        corpus: GaussianEmbeddings,
        nlist: int | None = None,
        nprobe: int = 32,
        train_size: int = 65536,
        seed: int = 0,
    ) -> None:
        check_gaussian(corpus, "corpus")
        faiss = _faiss()
        self.corpus = corpus
        means = np.ascontiguousarray(corpus.mean.numpy(), dtype=np.float32)
        dim, n = corpus.dim, corpus.n
        self.nlist = int(4 * math.sqrt(n)) if nlist is None else int(nlist)
        if self.nlist <= 1 or n < 39 * self.nlist:  # FAISS wants >= 39 training points per list
            self.nlist = 0
            self.index = faiss.IndexFlatIP(dim)
        else:
            quantiser = faiss.IndexFlatIP(dim)
            self.index = faiss.IndexIVFFlat(quantiser, dim, self.nlist, faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(seed)
            sample = means[rng.choice(n, size=min(n, max(train_size, 39 * self.nlist)), replace=False)]
            self.index.train(sample)
            self.index.nprobe = int(nprobe)
        self.index.add(means)

    def search(
        self, query: GaussianEmbeddings, k: int = 10, candidates: int = 100, beta: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Probit top-k among each query's ``candidates`` first-stage documents.

        Args:
            query: (Nq, D) query Gaussians with unit-norm means.
            k: results per query.
            candidates: first-stage documents re-ranked per query (>= k).
            beta: variance scale of Eq. 6.

        Returns:
            scores (Nq, k) descending and corpus indices (Nq, k) int64 (-1 where the first stage found
            fewer than k documents).
        """
        check_gaussian(query, "query")
        if query.dim != self.corpus.dim:
            raise ValueError(f"query dim {query.dim} != corpus dim {self.corpus.dim}")
        if not 1 <= k <= candidates:
            raise ValueError(f"need 1 <= k <= candidates, got k={k}, candidates={candidates}")
        out_s, out_i = [], []
        for start in range(0, query.n, 256):  # bounded (256, m, D) gathers
            rows = slice(start, start + 256)
            sub = GaussianEmbeddings(query.mean[rows], query.var[rows])
            s, i = self._rerank(sub, k, candidates, beta)
            out_s.append(s)
            out_i.append(i)
        return torch.cat(out_s), torch.cat(out_i)

    def _rerank(
        self, query: GaussianEmbeddings, k: int, candidates: int, beta: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _, idx = self.index.search(np.ascontiguousarray(query.mean.numpy(), dtype=np.float32), candidates)
        idx = torch.from_numpy(idx).long()  # (Nq, m), -1 = none
        safe = idx.clamp_min(0)
        mc, vc = self.corpus.mean[safe], self.corpus.var[safe]  # (Nq, m, D)
        mq, vq = query.mean[:, None, :], query.var[:, None, :]
        mu_s = (mq * mc).sum(-1)  # (Nq, m)
        var_s = (mq**2 * vc + vq * (mc**2 + vc)).sum(-1)  # (Nq, m): Eq. 5 per candidate
        scores = probit_score(mu_s, var_s, beta).masked_fill(idx < 0, -math.inf)
        top, pos = scores.topk(k, dim=1)
        return top, idx.gather(1, pos)
