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

from ucse.backbone.precision import cpu_has_native_bf16

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


BANK_BLOCK = 16384
"""Bank rows compared at a time: with 512 query rows (the default chunk) a similarity block is 8M values
(16 MB in bf16, 32 MB in float32) whatever the bank's size (a whole-bank float64 copy had added 150 MB at
10,000 rows: docs/RESULTS.md section 5); a bank of up to 16,384 rows is one block, with no merging
(Banking77's 10,003-row search 0.19 -> 0.15 s against blocks of 4,096 rows by 1,024 queries)."""
SEARCH_MARGIN = 8
"""Candidates the float32 search keeps per row beyond k, whose cosines are then recomputed in float64."""
HALF_MARGIN = 32
"""Candidates the bf16 search keeps per row beyond k (against Banking77's 10,003-row bank, 99 % of the test
texts are certified with 32, 67 % with 8)."""
HALF_ERROR = 2.0**-6
"""A bound on |bf16 cosine - cosine| for unit rows: each input rounded to 8 significant bits (2 x 2^-8 on
every product, whose sum of magnitudes is at most |q| |b| ~ 1), the sum accumulated in float32 (~F x 2^-24,
5e-5 at F = 768) and the result rounded to bf16 (at most 2^-8 for |cos| < 2): 0.0118, rounded up. Measured
largest on Banking77: 0.0037."""
RESCORE_VALUES = 1 << 22
"""Float64 values rescored at a time (32 MB)."""


def _top_merge(
    q: torch.Tensor, bank: torch.Tensor, width: int, chunk: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, width) largest cosines of ``q`` rows against ``bank`` in ``dtype``, descending, and their rows.

    The bank is taken ``BANK_BLOCK`` rows at a time and each block's top ``width`` merged into the running top
    (exact: a row's largest overall are among its largest per block).
    """
    best_cos = best_idx = None
    for start in range(0, bank.shape[0], BANK_BLOCK):
        b = bank[start : start + BANK_BLOCK].to(dtype)  # (Bm, F)
        kb = min(width, b.shape[0])
        tops = [(q[i : i + chunk] @ b.T).topk(kb, dim=1) for i in range(0, q.shape[0], chunk)]
        cos = torch.cat([t.values for t in tops]).float()  # (N, kb): bf16 values are exact in float32
        idx = torch.cat([t.indices for t in tops]) + start
        if best_cos is not None:
            cos, idx = torch.cat([best_cos, cos], dim=1), torch.cat([best_idx, idx], dim=1)  # (N, <= 2 width)
            top = cos.topk(min(width, cos.shape[1]), dim=1)
            cos, idx = top.values, idx.gather(1, top.indices)
        best_cos, best_idx = cos, idx
    assert best_cos is not None and best_idx is not None, "an empty bank"
    return best_cos, best_idx


def _rescore(query: torch.Tensor, bank: torch.Tensor, idx: torch.Tensor, need: torch.Tensor) -> torch.Tensor:
    """(N, W) float64 cosines of ``query`` rows with their candidate ``bank`` rows ``idx`` where ``need``.

    The other entries are -inf. Only the needed (row, candidate) pairs are gathered, ``RESCORE_VALUES`` values
    at a time.
    """
    exact = torch.full(idx.shape, float("-inf"), dtype=torch.float64, device=bank.device)  # (N, W)
    pairs = need.nonzero()  # (P, 2) row, candidate slot
    step = max(1, RESCORE_VALUES // bank.shape[1])
    for i in range(0, pairs.shape[0], step):
        r, c = pairs[i : i + step].unbind(1)
        rows = bank.index_select(0, idx[r, c]).to(torch.float64)  # (p, F)
        # one dot product per pair, as a batched product: 7 ms for 22k pairs at F = 768, against 40 ms for a
        # product, then a sum
        exact[r, c] = torch.einsum("pf,pf->p", query.index_select(0, r).to(rows), rows)
    return exact


def _float32_best(
    q: torch.Tensor, query: torch.Tensor, bank: torch.Tensor, k: int, chunk: int
) -> torch.Tensor:
    """(N, k) float64 cosines of the k nearest: k + ``SEARCH_MARGIN`` float32 candidates, all rescored."""
    _, idx = _top_merge(q, bank, k + SEARCH_MARGIN, chunk, torch.float32)
    return _rescore(query, bank, idx, torch.ones_like(idx, dtype=torch.bool)).topk(k, dim=1).values


def neighbour_distances(
    query: torch.Tensor, bank: torch.Tensor, k: int, chunk: int = 512, half: bool | None = None
) -> torch.Tensor:
    """(N, min(k, M)) Euclidean distances from unit ``query`` rows to their nearest ``bank`` rows, ascending.

    Runs where ``bank`` lives (a classifier on CUDA keeps its bank there: 30,800 texts against 10,003 rows
    took an H100 0.07 s and its 16 CPU cores 0.68 s). Two passes: a search that keeps candidates per row, then
    the candidates' cosines recomputed in float64 and the k largest kept, so every distance returned is a
    float64 distance to a real bank row: sqrt(2 - 2 q.b), the distance of unit rows. A float16 bank's rows are
    unit to ~5e-4 only, so for near-duplicates this differs from |q - b| by up to ~sqrt(2 x 1.25e-4) ~ 0.016
    (a row against its own float16 copy: 0.016 where |q - b| is 3e-4; a helper's review), far less at the
    distances a threshold sits at; the out-of-scope threshold is set on the same quantity.

    The search, on a CPU with native bf16 (``half=None``), is a bf16 matrix product (3.3x the float32 one's
    speed there) keeping k + ``HALF_MARGIN`` candidates. A bf16 cosine is within ``HALF_ERROR`` (e) of the
    exact one, so each true neighbour's bf16 cosine is at least the k-th largest bf16 cosine minus 2e: where a
    row's last kept candidate is below that line, every true neighbour is among its candidates (certified),
    and only the candidates above the line are rescored. Rows not certified (more than ``HALF_MARGIN`` bank
    rows within 2e of their k-th) are searched again in float32. The float32 search keeps k +
    ``SEARCH_MARGIN`` candidates; a true neighbour can then be missed only where more than ``SEARCH_MARGIN``
    rows tie with it within float32 rounding (~1e-6 in cosine; ~1e-3 where a GPU's float32 matmuls use TF32),
    and the distance returned then differs from the exact one by no more than that tie.

    Args:
        query: (N, F) unit rows.
        bank: (M, F) unit rows.
        k: neighbours to keep.
        chunk: query rows per (chunk, BANK_BLOCK) similarity block.
        half: search in bf16 first (``None``: on a CPU whose bf16 is native; elsewhere float32 only).

    Returns:
        (N, min(k, M)) float64 distances in [0, 2], on the CPU.
    """
    k = min(k, bank.shape[0])
    if half is None:
        half = bank.device.type == "cpu" and cpu_has_native_bf16()
    query = query.to(bank.device)  # a classifier's features come from the host; its bank may be on a GPU
    q = query.to(torch.float32)
    if not half:
        best = _float32_best(q, query, bank, k, chunk)
    else:
        cos, idx = _top_merge(q.to(torch.bfloat16), bank, k + HALF_MARGIN, chunk, torch.bfloat16)  # (N, W)
        line = cos[:, k - 1 : k] - 2 * HALF_ERROR  # (N, 1) no true neighbour's bf16 cosine is below it
        need = cos >= line
        certified = ~need[:, -1] | (cos.shape[1] == bank.shape[0])  # the whole bank kept: nothing missed
        need &= certified[:, None]  # the others are searched again in float32 below
        best = _rescore(query, bank, idx, need).topk(k, dim=1).values  # (N, k) descending
        redo = (~certified).nonzero().squeeze(1)
        if redo.numel():
            best[redo] = _float32_best(q[redo], query[redo], bank, k, chunk)
    return torch.sqrt((2.0 - 2.0 * best).clamp_min(0.0)).cpu()  # |a - b|^2 = 2 - 2 a.b for unit rows
