"""Deterministic ensemble baselines of the paper's Tables 1-3 and rank fusion for retrieval.

* uniform / weighted ensembles average the K members' L2-normalised embeddings (App. B.4.4);
  weighted-ensemble weights are picked on a simplex grid by a user-supplied validation score.
* embedding-level task arithmetic (App. B.4.4): e = e_A + alpha (e_B - e_C), alpha picked on a grid.
* Borda count and reciprocal-rank fusion (RRF, k = 60) of per-member retrieval rankings.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F  # noqa: N812

ScoreFn = Callable[[torch.Tensor], float]

PAPER_ALPHAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)  # App. B.4.4 task-arithmetic grid


def _stack_normalized(members: Sequence[torch.Tensor]) -> torch.Tensor:
    """(K, N, D) L2-normalised stack of K member embeddings (N, D); errors name the bad member."""
    if len(members) == 0:
        raise ValueError("need at least one member embedding matrix, got none")
    shapes = [tuple(m.shape) for m in members]
    if any(len(s) != 2 for s in shapes) or len(set(shapes)) > 1:
        raise ValueError(f"member embeddings must all be (N, D) with the same shape, got {shapes}")
    return F.normalize(torch.stack([m.float() for m in members]), dim=-1)


def uniform_ensemble(members: Sequence[torch.Tensor]) -> torch.Tensor:
    """(N, D) mean of the K members' L2-normalised embeddings."""
    return _stack_normalized(members).mean(0)


def weighted_ensemble(
    members: Sequence[torch.Tensor], weights: Sequence[float] | torch.Tensor
) -> torch.Tensor:
    """(N, D) sum_k w_k * normalise(e_k) with fixed weights w (K,) on the simplex."""
    stack = _stack_normalized(members)
    w = torch.as_tensor(weights, dtype=torch.float32).flatten()
    if w.numel() != stack.shape[0]:
        raise ValueError(f"got {w.numel()} weights for {stack.shape[0]} members")
    if bool((w < 0).any()) or abs(float(w.sum()) - 1.0) > 1e-5:
        raise ValueError(f"weights must be >= 0 and sum to 1, got {w.tolist()}")
    return torch.einsum("k,knd->nd", w, stack)


def simplex_grid(n_members: int, step: float = 0.1, min_weight: float = 0.1) -> torch.Tensor:
    """(G, K) all weight vectors on the simplex with entries in {min_weight, min_weight + step, ...}.

    The defaults reproduce the paper's grid [0.1, 0.1, 0.8], [0.1, 0.2, 0.7], ..., [0.8, 0.1, 0.1].
    """
    units = round(1.0 / step)
    lo = round(min_weight / step)
    if abs(units * step - 1.0) > 1e-9 or abs(lo * step - min_weight) > 1e-9:
        raise ValueError(f"step={step} must divide 1 and min_weight={min_weight}")
    if n_members < 1 or lo * n_members > units:
        raise ValueError(f"no simplex point with {n_members} members all >= {min_weight}")
    rows = [c for c in itertools.product(range(lo, units + 1), repeat=n_members) if sum(c) == units]
    return torch.tensor(rows, dtype=torch.float64) / units


def select_weights(
    members: Sequence[torch.Tensor], score_fn: ScoreFn, grid: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick weighted-ensemble weights maximising ``score_fn(fused (N, D)) -> float`` on validation data.

    Returns:
        best weights (K,) and the score of every grid row (G,).
    """
    grid = simplex_grid(len(members)) if grid is None else torch.as_tensor(grid, dtype=torch.float64)
    scores = torch.tensor([float(score_fn(weighted_ensemble(members, w))) for w in grid])
    return grid[int(scores.argmax())].float(), scores


def task_arithmetic(
    base: torch.Tensor, plus: torch.Tensor, minus: torch.Tensor, alpha: float
) -> torch.Tensor:
    """(N, D) embedding-level task arithmetic e_A + alpha (e_B - e_C) on L2-normalised members A, B, C."""
    a, b, c = _stack_normalized([base, plus, minus])
    return a + alpha * (b - c)


def select_alpha(
    base: torch.Tensor,
    plus: torch.Tensor,
    minus: torch.Tensor,
    score_fn: ScoreFn,
    alphas: Sequence[float] = PAPER_ALPHAS,
) -> tuple[float, torch.Tensor]:
    """Pick alpha of :func:`task_arithmetic` maximising ``score_fn``; returns (alpha, scores per alpha)."""
    scores = torch.tensor([float(score_fn(task_arithmetic(base, plus, minus, a))) for a in alphas])
    return float(alphas[int(scores.argmax())]), scores


def _ranks(scores: Sequence[torch.Tensor]) -> torch.Tensor:
    """(K, Nq, Nc) 0-based rank of each candidate in each member's descending order (ties: lower index)."""
    shapes = {tuple(s.shape) for s in scores}
    if len(scores) == 0 or len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"need K >= 1 score matrices of one shape (Nq, Nc), got shapes {sorted(shapes)}")
    stack = torch.stack([s.float() for s in scores])  # (K, Nq, Nc)
    order = stack.argsort(dim=-1, descending=True, stable=True)
    return order.argsort(dim=-1)


def borda_count(scores: Sequence[torch.Tensor], depth: int | None = None) -> torch.Tensor:
    """(Nq, Nc) Borda points summed over members: a candidate at 0-based rank r gets (L - r) points.

    Args:
        scores: K per-member score matrices (Nq, Nc), higher = better.
        depth: only each member's top-``depth`` candidates score (L = depth); default all (L = Nc).
    """
    ranks = _ranks(scores)
    n_list = ranks.shape[-1] if depth is None else depth
    return (n_list - ranks).clamp_min(0).sum(0).float()


def reciprocal_rank_fusion(
    scores: Sequence[torch.Tensor], k: int = 60, depth: int | None = None
) -> torch.Tensor:
    """(Nq, Nc) RRF score sum_members 1 / (k + rank), rank 1-based (Cormack et al., 2009).

    Args:
        scores: K per-member score matrices (Nq, Nc).
        k: the RRF constant (60 in the original paper).
        depth: only each member's top-``depth`` candidates contribute.
    """
    ranks = _ranks(scores) + 1  # 1-based
    contrib = 1.0 / (k + ranks.double())
    if depth is not None:
        contrib = torch.where(ranks <= depth, contrib, torch.zeros_like(contrib))
    return contrib.sum(0).float()
