"""The per-input weight diagnostic: hand-checkable cases and scipy's Pearson for two members."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import pearsonr

from ucse.uec.weight_signal import better_member_share, per_input_correlation


def test_two_members_reduce_to_pearson_of_the_differences():
    rng = np.random.default_rng(0)
    w1 = rng.uniform(0.2, 0.8, 50)
    q = rng.normal(size=(50, 2))
    weights = np.stack([w1, 1 - w1], 1)
    ref = pearsonr(weights[:, 0] - weights[:, 1], q[:, 0] - q[:, 1])[0]
    assert per_input_correlation(weights, q) == pytest.approx(ref, abs=1e-12)


def test_a_constant_preference_carries_no_per_input_signal():
    rng = np.random.default_rng(1)
    quality = np.stack([1 + rng.normal(size=40), rng.normal(size=40)], 1)  # member 0 better on average
    constant = np.tile([0.8, 0.2], (40, 1))  # weighted more everywhere, whatever the input
    assert math.isnan(per_input_correlation(constant, quality))  # nothing moves: undefined, not positive
    moving = constant + 0.05 * np.stack([quality[:, 0] - quality[:, 1], quality[:, 1] - quality[:, 0]], 1)
    assert per_input_correlation(moving, quality) == pytest.approx(1.0)


def test_better_member_share_by_hand():
    weights = np.array([[0.9, 0.1], [0.4, 0.6], [0.5, 0.5]])
    quality = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])  # the third input has no unique best
    out = better_member_share(weights, quality)
    assert out["inputs"] == 2
    assert out["weight_on_better"] == pytest.approx((0.9 + 0.6) / 2)
    assert out["its_mean_weight"] == pytest.approx((0.6 + 0.4) / 2)  # members' mean weights 0.6 and 0.4
