"""The run summary's out-of-scope phrase: a flag that cannot flag says so, and what tpr would set one."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from ucse.config.uncertainty import OodScore
from ucse.summary import describe_flag
from ucse.uncertainty.ood_detector import keep_threshold


@pytest.mark.parametrize("n", [1, 2, 5, 8, 9, 13, 18, 19, 40])
@pytest.mark.parametrize("tpr", [0.8, 0.9, 0.95, 0.99])
def test_an_infinite_threshold_is_named_with_the_tpr_that_sets_a_finite_one(n, tpr):
    scores = np.arange(n, dtype=np.float64)
    t = keep_threshold(scores, tpr)  # the detector's own rule
    flag = SimpleNamespace(score=OodScore.joint_knn, tpr=tpr, threshold=t, info={"n_heldout": n})
    text = describe_flag(flag)
    if math.isfinite(t):
        assert text == f"joint_knn, keeps {100 * tpr:.2f} % of in-scope texts"
        return
    need = int(re.search(r"needs (\d+)\+ held-out texts", text).group(1))
    assert n < need  # brute force: the smallest n with a finite threshold is the one named
    assert math.isfinite(keep_threshold(np.arange(need, dtype=np.float64), tpr))
    assert math.isinf(keep_threshold(np.arange(need - 1, dtype=np.float64), tpr))
    offered = float(re.search(r"uncertainty\.ood\.tpr=([0-9.]+) sets one", text).group(1))
    assert 0 < offered < tpr and math.isfinite(keep_threshold(scores, offered))
    assert math.isinf(keep_threshold(scores, offered + 0.01)) or offered + 0.01 >= tpr
