"""Which texts to label next: margins against a brute-force sort, and diversity on clusters drawn by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ucse.uncertainty.acquisition import Strategy, margins, select_to_label


def _probs_with_margins(m: np.ndarray, c: int = 4) -> np.ndarray:
    """(N, C) rows whose two largest probabilities differ by m (the rest share what is left)."""
    rows = []
    for gap in m:
        top = 0.5 + gap / 2
        second = top - gap
        rest = (1 - top - second) / (c - 2)
        rows.append([second, rest, top] + [rest] * (c - 3))
    return np.asarray(rows)


def test_margins_are_the_gap_of_the_two_largest():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(6), size=50)
    want = [sorted(row)[-1] - sorted(row)[-2] for row in p]
    np.testing.assert_allclose(margins(p), want)
    assert margins(np.array([[0.5, 0.5]]))[0] == 0.0


def test_margin_picks_the_smallest_margins_least_sure_first():
    rng = np.random.default_rng(1)
    gap = rng.uniform(0, 0.5, size=40)
    p = _probs_with_margins(gap)
    picked = select_to_label(p, rng.normal(size=(40, 3)), 5, Strategy.margin)
    assert picked.tolist() == np.argsort(gap)[:5].tolist()


def test_diverse_margin_takes_the_least_sure_text_of_each_cluster():
    # four far-apart blobs; blob A holds the 20 smallest margins, B and C the next, D the surest texts
    rng = np.random.default_rng(2)
    centres = np.eye(4) * 50
    blob = np.repeat(np.arange(4), [20, 5, 5, 30])
    features = centres[blob] + rng.normal(size=(60, 4))
    gap = np.concatenate(
        [rng.uniform(0.01, 0.2, 20), rng.uniform(0.3, 0.34, 5), rng.uniform(0.4, 0.44, 5), np.full(30, 0.9)]
    )
    order = rng.permutation(60)  # the rows in no particular order
    features, gap, blob = features[order], gap[order], blob[order]
    p = _probs_with_margins(gap)
    picked = select_to_label(p, features, 3, Strategy.diverse_margin)
    # the 30 smallest margins are blobs A, B and C: one text each, the least sure of its blob, in margin order
    assert sorted(blob[picked].tolist()) == [0, 1, 2]
    for i in picked:
        assert gap[i] == gap[blob == blob[i]].min()
    assert np.all(np.diff(gap[picked]) > 0)
    assert sorted(blob[select_to_label(p, features, 3, Strategy.margin)].tolist()) == [0, 0, 0]


def test_small_pools_copies_random_and_bad_n():
    p = _probs_with_margins(np.array([0.3, 0.1, 0.2]))
    f = np.ones((3, 2))  # one point three times: k-means cannot make two groups
    assert select_to_label(p, f, 5).tolist() == [1, 2, 0]  # all of them, least sure first
    assert select_to_label(p, f, 2).tolist() == [1, 2]  # filled by margin where the groups ran out
    r = select_to_label(p, f, 2, Strategy.random, seed=3)
    assert len(set(r.tolist())) == 2 and r.tolist() == select_to_label(p, f, 2, Strategy.random, 3).tolist()
    with pytest.raises(ValueError, match="n=0"):
        select_to_label(p, f, 0)
