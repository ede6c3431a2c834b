"""Whether UEC's per-input weights point at the member that is right *for that input* (test diagnostic).

UEC's claim is per input: pi_k(x) is larger where member k is more reliable. Its global weights can be right
(the better member gets more on average) while the per-input part carries nothing. This module measures the
per-input part on the evaluated test split, after the fact (nothing is tuned on it):

- each member's quality per input: STS, minus the absolute difference between the rank of the member's
  cosine of the pair and the rank of the gold score (both as fractions of N); retrieval, the member's
  nDCG@10 of the query;
- the **per-input correlation**: Pearson over (input, member) of the weights and the qualities, each
  double-centred (per input and per member), so a member that is better everywhere and weighted more
  everywhere adds nothing; only weights that *move* with the quality from input to input count (for K = 2
  it is the Pearson correlation of w_1 - w_2 with q_1 - q_2);
- the **weight on the better member** where the members' qualities differ (K = 2: the share of weight the
  better member gets, beside the share it gets on average, its global weight).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy.stats import rankdata

from ucse.config import TaskType
from ucse.uec.ensemble_task import ndcg_at_10_per_query


def per_input_correlation(weights: np.ndarray, quality: np.ndarray) -> float:
    """Pearson correlation of double-centred weights and qualities over all (input, member) cells.

    Args:
        weights: (N, K) UEC weights (rows sum to 1).
        quality: (N, K) member quality per input (higher = better).

    Returns:
        The correlation in [-1, 1]; nan when either side never varies across members.
    """

    def centred(x: np.ndarray) -> np.ndarray:  # remove each input's and each member's mean
        return x - x.mean(1, keepdims=True) - x.mean(0, keepdims=True) + x.mean()

    raw_w, raw_q = np.asarray(weights, float), np.asarray(quality, float)
    w, q = centred(raw_w), centred(raw_q)
    nw, nq = float(np.sqrt((w * w).sum())), float(np.sqrt((q * q).sum()))
    # Round-off leaves ~1e-16 of a constant pattern after centring: below that, nothing varies.
    if nw <= 1e-9 * float(np.abs(raw_w).sum()) or nq <= 1e-9 * float(np.abs(raw_q).sum()):
        return float("nan")
    return float((w * q).sum() / (nw * nq))


def better_member_share(weights: np.ndarray, quality: np.ndarray) -> dict:
    """Mean weight of each input's best member where the best is unique; that member's mean weight beside."""
    best = quality.argmax(1)
    unique = (quality == quality.max(1, keepdims=True)).sum(1) == 1
    rows = np.flatnonzero(unique)
    share = float(weights[rows, best[rows]].mean()) if len(rows) else float("nan")
    baseline = float(weights.mean(0)[best[rows]].mean()) if len(rows) else float("nan")
    return {"inputs": int(len(rows)), "weight_on_better": share, "its_mean_weight": baseline}


def member_quality(task: Any, gaussians: list) -> np.ndarray:
    """(N, K) quality of each member per test input.

    Args:
        task: the :class:`~ucse.uec.ensemble_task.EnsembleTask` (STS or retrieval).
        gaussians: K member Gaussians of ``task``'s test inputs in the order of :func:`weight_texts`.
    """
    if task.type is TaskType.sts:
        n = len(task.test_a)
        gold = rankdata(task.test_y) / n
        out = []
        for g in gaussians:
            unit = torch.nn.functional.normalize(g.mean.double(), dim=1)
            cos = (unit[:n] * unit[n:]).sum(1).numpy()
            out.append(-np.abs(rankdata(cos) / n - gold))
        return np.stack(out, 1)
    n_docs = len(task.docs)
    out = []
    for g in gaussians:
        unit = torch.nn.functional.normalize(g.mean.double(), dim=1)
        out.append(ndcg_at_10_per_query(unit[n_docs:] @ unit[:n_docs].T, task.test_rel))
    return np.asarray(out).T


def weight_texts(task: Any) -> list[str]:
    """The texts whose Gaussians :func:`member_quality` reads (STS: both sides; retrieval: docs + queries)."""
    return task.test_a + task.test_b if task.type is TaskType.sts else task.docs + task.test_q


def weight_signal(task: Any, ensemble: Any, own: list | None = None) -> dict | None:
    """Per-input correlation and better-member share of ``ensemble``'s UEC weights on ``task``'s test split.

    Each member's quality is that of its own embedding (``own``: the members before alignment; default the
    ensemble's members). None for classification (its per-input quality needs the heads' own predictions:
    ``bench/uec_head_predictions.py``).
    """
    if task.type not in (TaskType.sts, TaskType.retrieval):
        return None
    texts = weight_texts(task)
    gaussians = [m.encode(texts) for m in own] if own is not None else ensemble.member_gaussians(texts)
    weights = ensemble.encode(texts).weights.double().numpy()  # (M, K)
    quality = member_quality(task, gaussians)  # (N, K)
    if task.type is TaskType.sts:
        n = len(task.test_a)
        weights = (weights[:n] + weights[n:]) / 2  # a pair's weight: the mean of its two sentences'
    else:
        weights = weights[len(task.docs) :]  # a query's own weights
    return {
        "per_input_correlation": per_input_correlation(weights, quality),
        "mean_weights": weights.mean(0).tolist(),
        "mean_quality": quality.mean(0).tolist(),
        **better_member_share(weights, quality),
    }
