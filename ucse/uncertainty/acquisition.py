"""Which unlabelled texts to label next: the ones the model is least sure of, spread over the pool.

With a few labelled texts per class, a user's next labels are worth most where the model hesitates between
two labels (*margin* sampling: the smallest gap between the two largest probabilities; Scheffer et al. 2001,
still among the strongest single-batch strategies in the comparisons of Zhan et al. 2022). Picked alone, the
smallest margins crowd into a few confusable pairs and near-copies of one text; *diverse margin* first keeps
the ``candidates x n`` smallest margins, clusters them into ``n`` groups by their embeddings (k-means,
scikit-learn's), and takes the smallest margin of each group: the idea of cluster-margin (Citovsky et al.
2021), with k-means in place of its hierarchical clustering. Measured against random picks of the same number
of texts, retraining the default head each time: ``bench/active.py``, docs/RESULTS.md section 9.
"""

from __future__ import annotations

import warnings
from enum import Enum

import numpy as np

CANDIDATES = 10
"""Diverse margin clusters the ``CANDIDATES x n`` smallest margins (Citovsky et al. take a multiple too)."""


class Strategy(str, Enum):
    """How :func:`select_to_label` picks the texts."""

    diverse_margin = "diverse_margin"
    margin = "margin"
    random = "random"


def margins(probs: np.ndarray) -> np.ndarray:
    """(N,) the gap between each row's two largest probabilities (``probs`` (N, C), C >= 2); 0 = a tie."""
    p = np.asarray(probs, dtype=np.float64)
    top2 = np.partition(p, p.shape[1] - 2, axis=1)[:, -2:]  # (N, 2): the second largest, then the largest
    return top2[:, 1] - top2[:, 0]


def select_to_label(
    probs: np.ndarray,
    features: np.ndarray,
    n: int,
    strategy: Strategy | str = Strategy.diverse_margin,
    seed: int = 0,
) -> np.ndarray:
    """The rows to label next, the least sure first.

    Args:
        probs: (N, C) the model's probabilities for the unlabelled texts.
        features: (N, D) their embeddings (unit-normalised here), for ``diverse_margin``'s clusters.
        n: how many to pick (all N when N <= n).
        strategy: :class:`Strategy`.
        seed: seeds ``random`` and the k-means initialisation.

    Returns:
        (min(n, N),) row indices, in increasing margin (``random``: in drawn order).
    """
    if n < 1:
        raise ValueError(f"n={n}: pick at least one text.")
    strategy = Strategy(strategy)  # a plain string too: 'margin' is Strategy.margin
    m = margins(probs)  # (N,)
    total = len(m)
    if strategy is Strategy.random:
        return np.random.default_rng(seed).permutation(total)[:n]
    by_margin = np.argsort(m, kind="stable")  # (N,) least sure first; ties in input order
    if strategy is Strategy.margin or total <= n:
        return by_margin[:n]
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    cand = by_margin[: min(total, CANDIDATES * n)]  # (M,)
    x = np.asarray(features, dtype=np.float64)[cand]  # (M, D)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    with warnings.catch_warnings():  # fewer distinct points than n (copies): handled below
        warnings.simplefilter("ignore", ConvergenceWarning)
        groups = KMeans(n_clusters=n, n_init=1, random_state=seed).fit_predict(x)  # (M,)
    # cand is in increasing margin, so each group's first row is its least sure one
    _, first = np.unique(groups, return_index=True)
    picked = cand[np.sort(first)]  # in increasing margin
    if len(picked) < n:  # k-means left groups empty (copies of one text): fill with the next margins
        rest = np.setdiff1d(cand, picked, assume_unique=True)
        picked = np.concatenate([picked, rest[np.argsort(m[rest], kind="stable")][: n - len(picked)]])
        picked = picked[np.argsort(m[picked], kind="stable")]
    return picked
