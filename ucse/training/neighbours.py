"""Nearest-neighbour distances in the joint space of a head's mu and the backbone's pooled vector.

The out-of-scope score ``joint_knn`` (``ucse.uncertainty.ood_scores``) is the distance from a text to its k-th
nearest training row in this space (Sun et al. 2022, on two views side by side). mu carries what the head
learnt to tell the labels apart (held-out classes of the same domain: docs/RESULTS.md section 4), the frozen
pooled vector what the backbone knows of the domain (another task's texts). Its in-scope threshold needs
distances of texts the head never trained on; when ``head=auto`` refits on every labelled row, those come from
the selection models here (the fold heads or the head fitted before the refit), which is why this lives in the
training layer.
"""

from __future__ import annotations

import numpy as np
import torch

POOLED_WEIGHT = 0.5
"""Scale of the unit pooled vector beside the unit mu: measured on held-out intents and another task's texts
(docs/RESULTS.md section 4); equal weights ranked held-out MassiveIntent intents 0.016 lower."""
MAX_K = 50
"""Neighbours whose held-out distances are kept (``uncertainty.ood.k`` may be changed up to this later)."""


def joint_features(mean: np.ndarray | torch.Tensor, pooled: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N, D + H) unit-norm rows of ``[mu / |mu|, POOLED_WEIGHT * pooled / |pooled|]``, float32.

    Args:
        mean: (N, D) the head's mu.
        pooled: (N, H) the frozen backbone's pooled vectors.
    """
    parts = []
    for x, w in ((mean, 1.0), (pooled, POOLED_WEIGHT)):
        t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(torch.float64)
        parts.append(w * t / t.norm(dim=1, keepdim=True).clamp_min(1e-12))
    j = torch.cat(parts, dim=1)  # (N, D + H), norm sqrt(1 + w^2) where both parts are non-zero
    return (j / j.norm(dim=1, keepdim=True).clamp_min(1e-12)).to(torch.float32)


def neighbour_distances(query: torch.Tensor, bank: torch.Tensor, k: int, chunk: int = 1024) -> torch.Tensor:
    """(N, min(k, M)) Euclidean distances from unit ``query`` rows to their nearest ``bank`` rows, ascending.

    Args:
        query: (N, F) unit rows.
        bank: (M, F) unit rows.
        k: neighbours to keep.
        chunk: query rows per (chunk, M) similarity block.
    """
    k = min(k, bank.shape[0])
    q, b = query.to(torch.float64), bank.to(torch.float64)
    out = []
    for start in range(0, q.shape[0], chunk):
        sim = (q[start : start + chunk] @ b.T).topk(k, dim=1).values  # (n, k) cosine, descending
        out.append(torch.sqrt((2.0 - 2.0 * sim).clamp_min(0.0)))  # |a - b|^2 = 2 - 2 a.b for unit rows
    return torch.cat(out).to(torch.float32)
