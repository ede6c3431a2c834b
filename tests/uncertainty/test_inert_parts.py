"""Which parts of a profile answer the same for every text (ucse/uncertainty/inert_parts.py).

The reference is the conformal quantile itself: the setting each message offers must make it finite on the
same number of held-out texts, and the next stricter one on the 0.01 grid must not.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from ucse.config.uncertainty import ConformalConfig
from ucse.uncertainty.conformal import conformal_quantile
from ucse.uncertainty.inert_parts import inert_flag, inert_sets
from ucse.uncertainty.keep_threshold import keep_threshold


def _profile(qhat, n, alpha=0.1, ood=None):
    return SimpleNamespace(
        qhat=qhat, conformal=ConformalConfig(alpha=alpha), info={"n_validation": n}, ood=ood
    )


@pytest.mark.parametrize("n, alpha", [(8, 0.1), (4, 0.1), (15, 0.05), (1, 0.3)])
def test_the_sets_message_offers_the_smallest_alpha_that_gives_a_set(n, alpha):
    scores = np.random.default_rng(n).uniform(size=n)
    assert math.isinf(conformal_quantile(scores, alpha))  # the case the message is for
    message = inert_sets(_profile(math.inf, n, alpha))
    need = next(m for m in range(1, 1000) if math.isfinite(conformal_quantile(np.zeros(m), alpha)))
    assert message.startswith(
        f"every prediction set holds every label: a set at alpha {alpha:g} needs {need}+"
    )
    offered = float(message.split("uncertainty.conformal.alpha=")[1].split(" ")[0])
    assert math.isfinite(conformal_quantile(scores, offered))
    assert math.isinf(conformal_quantile(scores, round(offered - 0.01, 2)))


def test_sets_with_a_finite_quantile_anywhere_or_no_sets_say_nothing():
    assert inert_sets(_profile(0.93, 50)) is None
    assert inert_sets(_profile([math.inf, 0.9], 50)) is None  # per label under a target mix: one is finite
    assert "every prediction set" in inert_sets(_profile([math.inf, math.inf], 5))
    assert inert_sets(SimpleNamespace(qhat=None, conformal=None, info={}, ood=None)) is None


def test_the_flag_message_offers_the_largest_keep_rate_that_gives_a_threshold():
    n = 12
    scores = np.random.default_rng(0).uniform(size=n)
    flag = SimpleNamespace(threshold=keep_threshold(scores, 0.95), tpr=0.95, info={"n_heldout": n})
    assert math.isinf(flag.threshold)
    message = inert_flag(SimpleNamespace(ood=flag))
    assert (
        "flags no text: a threshold keeping 95 % of in-scope texts needs 19+ held-out texts, 12 here"
        in message
    )
    offered = float(message.split("uncertainty.ood.tpr=")[1].split(" ")[0])
    assert math.isfinite(keep_threshold(scores, offered))
    assert math.isinf(keep_threshold(scores, round(offered + 0.01, 2)))
    flag.info["threshold_from"] = "examples"  # the user's examples set it: their own summary line says how
    assert inert_flag(SimpleNamespace(ood=flag)) is None
    assert inert_flag(SimpleNamespace(ood=SimpleNamespace(threshold=1.2, tpr=0.95, info={}))) is None
