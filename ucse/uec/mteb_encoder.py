"""UEC's mteb encoder: one ensemble variant as an mteb model whose similarity really is the variant's.

mteb is imported here (and by ``ucse/evaluation/mteb_eval.py``, which builds the tasks); ``ucse.uec.evaluate``
imports this module only when an ensemble is evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta
from torch.utils.data import DataLoader


class UecMtebEncoder(AbsEncoder):
    """An mteb encoder over a UEC ensemble variant, whose similarity really is the variant's.

    ``encode`` gathers every text of mteb's DataLoader, asks each member for its Gaussians and returns
    ``scorer.pack(...)``: for Gaussian variants the unit *fused mean* (N, D), so mteb's own cosine
    metrics and ``main_score`` (``cosine_spearman`` on STS) are those of the fused mean. The variances go
    to the similarity hooks by another route: each returned row's bytes key the row's variance in a side
    table, and ``similarity`` / ``similarity_pairwise`` (mteb's ``spearman`` on STS, the retrieval
    search's scores) look them up and score with the variant's own similarity (probit for UEC).
    Classification tasks get the unit mean (features for mteb's logistic-regression probe).

    Args:
        members: K members (``encode(texts) -> GaussianEmbeddings``), e.g. ``CachedMember`` s.
        scorer: the variant's ``VariantScorer``.
        name: model name in "org/model" form for mteb's results.
    """

    def __init__(self, members: Sequence[Any], scorer: Any, name: str = "ucse/uec") -> None:
        self.members = list(members)
        self.scorer = scorer
        self.task_type: str | None = None
        self._var_rows: dict[bytes, int] = {}
        self._var: list[np.ndarray] = []
        self.mteb_model_meta = ModelMeta.create_empty(
            overwrites={"name": name, "revision": "local", "embed_dim": scorer.width}
        )

    def encode(
        self,
        inputs: DataLoader,
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """(N, width) packed embeddings of every text in ``inputs`` (input order)."""
        texts = [t for batch in inputs for t in batch["text"]]
        if not texts:
            raise ValueError("no inputs to encode")
        self.task_type = str(getattr(task_metadata, "type", ""))
        gaussians = [m.encode(texts) for m in self.members]
        packed = self.scorer.pack(gaussians)
        if self.scorer.gaussian_variant:
            var = self.scorer.gaussian(gaussians).var.numpy().astype(np.float32)
            base = sum(len(v) for v in self._var)
            self._var.append(var)
            for i, row in enumerate(packed):
                self._var_rows[row.tobytes()] = base + i
        return packed

    def variances(self, embeddings: Any) -> np.ndarray | None:
        """(N, D) variances of rows this encoder returned (found by their bytes); ``None`` if not Gaussian."""
        if not self.scorer.gaussian_variant:
            return None
        rows = embeddings.detach().cpu().numpy() if isinstance(embeddings, torch.Tensor) else embeddings
        rows = np.ascontiguousarray(np.asarray(rows, dtype=np.float32).reshape(-1, self.scorer.width))
        table = np.concatenate(self._var) if self._var else np.zeros((0, self.scorer.dim), np.float32)
        try:
            idx = [self._var_rows[r.tobytes()] for r in rows]
        except KeyError:
            raise ValueError(
                "the similarity got an embedding this encoder did not return (mteb changed the rows?); "
                "its variance is unknown"
            ) from None
        return table[idx]

    def similarity(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """(N1, N2) variant scores (probit for UEC) of the returned embeddings."""
        v1, v2 = self.variances(embeddings1), self.variances(embeddings2)
        return self.scorer.similarity(embeddings1, embeddings2, v1, v2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """(N,) variant scores of aligned rows (STS pairs)."""
        v1, v2 = self.variances(embeddings1), self.variances(embeddings2)
        return self.scorer.similarity_pairwise(embeddings1, embeddings2, v1, v2)
