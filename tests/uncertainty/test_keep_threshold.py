"""The out-of-scope threshold's keep rule, for held-out rows mixed like new texts and for a target mix.

References: the definition by brute force over every candidate cut, and a Monte Carlo label shift whose keep
rate under the target mix is known in closed form (normal CDFs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from ucse.uncertainty.keep_threshold import keep_threshold, target_keep_threshold


def test_equal_weights_give_the_plain_order_statistic():
    rng = np.random.default_rng(0)
    for n in (1, 5, 19, 20, 200):
        for tpr in (0.5, 0.9, 0.95):
            s, y = rng.normal(size=n), rng.integers(0, 4, size=n)
            got = target_keep_threshold(torch.as_tensor(s), torch.as_tensor(y), np.ones(4), tpr)
            assert got == keep_threshold(s, tpr)  # +inf on both sides when (n + 1) tpr > n


def test_the_threshold_is_the_smallest_cut_holding_tpr_of_the_weight_whatever_the_new_texts_label():
    # Definition: the smallest score t with sum_i w(y_i) [s_i <= t] >= tpr (sum_i w(y_i) + w(y)) for every
    # candidate label y of the new text, i.e. for the largest w(y); +inf when no score reaches it.
    rng = np.random.default_rng(1)
    for _ in range(200):
        n, c = int(rng.integers(1, 40)), int(rng.integers(1, 5))
        s, y = np.round(rng.normal(size=n), 1), rng.integers(0, c, size=n)  # rounded: ties
        w, tpr = rng.uniform(0.1, 3.0, size=c), float(rng.uniform(0.5, 0.97))
        need = tpr * (w[y].sum() + w.max())
        ok = [t for t in np.sort(s) if w[y][s <= t].sum() >= need - 1e-12]
        want = min(ok) if ok else math.inf
        assert target_keep_threshold(torch.as_tensor(s), torch.as_tensor(y), w, tpr) == pytest.approx(want)


def test_under_a_label_shift_the_weighted_threshold_keeps_tpr_of_target_texts():
    # Three labels whose in-scope scores are N(0, 1), N(1, 1), N(2, 1); the held-out rows drawn evenly, the
    # new texts 10 / 20 / 70 %. Keep rate under the target mix at threshold t: sum_c q_c Phi(t - mu_c).
    mu, q, tpr = np.array([0.0, 1.0, 2.0]), np.array([0.1, 0.2, 0.7]), 0.9
    rng = np.random.default_rng(2)
    weighted, plain = [], []
    for _ in range(400):
        y = rng.integers(0, 3, size=300)
        s = rng.normal(mu[y], 1.0)
        w = q / (np.bincount(y, minlength=3) / len(y))  # target share over held-out share
        t = target_keep_threshold(torch.as_tensor(s), torch.as_tensor(y), w, tpr)
        weighted.append(float(q @ norm.cdf(t - mu)))
        plain.append(float(q @ norm.cdf(keep_threshold(s, tpr) - mu)))
    weighted, plain = np.array(weighted), np.array(plain)
    sd = weighted.std() / math.sqrt(len(weighted))  # one draw's sd ~ 0.024: the mean's ~ 0.0012
    # Valid (>= tpr on average), and not by keeping everything: the largest label weight's test mass makes
    # it slightly conservative (~ +0.002 here).
    assert tpr - 3 * sd <= weighted.mean() <= tpr + 0.02
    # The threshold set for the held-out mix keeps ~ 0.82 of texts mixed like the target.
    assert plain.mean() < tpr - 0.05
