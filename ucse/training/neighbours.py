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

    Computed in float32 into one preallocated array (float64 copies of a 16k-row block had added ~200 MB to
    a run's peak memory; float32 keeps the unit rows to ~1e-7).

    Args:
        mean: (N, D) the head's mu.
        pooled: (N, H) the frozen backbone's pooled vectors.
    """
    parts = [torch.as_tensor(x).to(torch.float32) for x in (mean, pooled)]
    d = parts[0].shape[1]
    out = torch.empty(parts[0].shape[0], d + parts[1].shape[1])
    for part, cols, w in ((parts[0], slice(0, d), 1.0), (parts[1], slice(d, None), POOLED_WEIGHT)):
        out[:, cols] = part / (part.norm(dim=1, keepdim=True).clamp_min(1e-12) / w)
    return out / out.norm(dim=1, keepdim=True).clamp_min(1e-12)  # norm sqrt(1 + w^2) where both are non-zero


BANK_BLOCK = 4096
"""Bank rows compared at a time: the similarity blocks stay a few tens of MB whatever the bank's size (a
whole-bank float64 copy had added 150 MB at 10,000 rows: docs/RESULTS.md section 5)."""
SEARCH_MARGIN = 8
"""Candidates the float32 search keeps per row beyond k, whose cosines are then recomputed in float64."""
RESCORE_VALUES = 1 << 22
"""Float64 candidate values rescored at a time (32 MB): ~600 query rows at k = 1 and 768 wide, ~90 at k = 50
(64 rows at a time had cost a GPU 0.2 s of launches for 30,800 texts)."""


def neighbour_distances(query: torch.Tensor, bank: torch.Tensor, k: int, chunk: int = 1024) -> torch.Tensor:
    """(N, min(k, M)) Euclidean distances from unit ``query`` rows to their nearest ``bank`` rows, ascending.

    Runs where ``bank`` lives (a classifier on CUDA keeps its bank there: 30,800 texts against 10,003 rows
    took an H100 0.07 s and its 16 CPU cores 0.68 s). Two passes: a float32 search (half the time of float64
    on a CPU), the bank taken ``BANK_BLOCK`` rows at a time, keeps each row's
    k + ``SEARCH_MARGIN`` largest cosines (the merge across blocks is exact: a row's nearest overall are
    among its nearest per block); then the candidates' cosines are recomputed in float64 and the k largest
    kept. So every distance returned is a float64 distance to a real bank row; a true neighbour can be
    missed only where more than ``SEARCH_MARGIN`` rows tie with it within float32 rounding (~1e-6 in
    cosine; ~1e-3 where a GPU's float32 matmuls use TF32), and the distance returned then differs from the
    exact one by no more than that tie.

    Args:
        query: (N, F) unit rows.
        bank: (M, F) unit rows.
        k: neighbours to keep.
        chunk: query rows per (chunk, BANK_BLOCK) similarity block.

    Returns:
        (N, min(k, M)) float64 distances in [0, 2], on the CPU.
    """
    k = min(k, bank.shape[0])
    q = query.to(bank.device, torch.float32)
    best_cos = best_idx = None  # (N, kc) the largest float32 cosines so far, descending, and their bank rows
    for start in range(0, bank.shape[0], BANK_BLOCK):
        b = bank[start : start + BANK_BLOCK].to(torch.float32)  # (Bm, F)
        kb = min(k + SEARCH_MARGIN, b.shape[0])
        tops = [(q[i : i + chunk] @ b.T).topk(kb, dim=1) for i in range(0, q.shape[0], chunk)]
        cos, idx = torch.cat([t.values for t in tops]), torch.cat([t.indices for t in tops]) + start
        if best_cos is not None:
            cos, idx = torch.cat([best_cos, cos], dim=1), torch.cat([best_idx, idx], dim=1)  # (N, <= 2 kc)
            top = cos.topk(min(k + SEARCH_MARGIN, cos.shape[1]), dim=1)
            cos, idx = top.values, idx.gather(1, top.indices)
        best_cos, best_idx = cos, idx
    assert best_idx is not None, "an empty bank"
    exact = torch.empty(best_idx.shape, dtype=torch.float64, device=bank.device)  # (N, kc)
    r = max(1, RESCORE_VALUES // (best_idx.shape[1] * bank.shape[1]))
    for i in range(0, q.shape[0], r):
        rows = bank[best_idx[i : i + r]].to(torch.float64)  # (r, kc, F)
        exact[i : i + r] = torch.einsum("rf,rkf->rk", query[i : i + r].to(rows), rows)
    best = exact.topk(k, dim=1).values  # (N, k) descending
    return torch.sqrt((2.0 - 2.0 * best).clamp_min(0.0)).cpu()  # |a - b|^2 = 2 - 2 a.b for unit rows
