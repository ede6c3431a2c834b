import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from ucse.uncertainty.ood import fpr_at_tpr, ood_auroc

RNG = np.random.default_rng(0)


def test_auroc_against_sklearn_including_ties_and_huge_scores():
    s_in, s_out = RNG.normal(size=300), RNG.normal(1.0, size=200)
    ref = roc_auc_score(np.r_[np.zeros(300), np.ones(200)], np.r_[s_in, s_out])
    assert ood_auroc(s_in, s_out) == pytest.approx(ref)
    # Scores in the thousands (a log density) must not saturate into ties.
    assert ood_auroc(1000 + s_in * 50, 1000 + s_out * 50) == pytest.approx(ref)
    ties_in, ties_out = np.array([0, 1, 1, 2.0]), np.array([1, 2, 2.0])
    ref_ties = roc_auc_score([0, 0, 0, 0, 1, 1, 1], np.r_[ties_in, ties_out])
    assert ood_auroc(ties_in, ties_out) == pytest.approx(ref_ties)


def _fpr_brute(s_in, s_out, tpr):
    # Smallest threshold t (accept as in-distribution when score <= t) keeping >= tpr of s_in.
    for t in np.sort(s_in):
        if (s_in <= t).mean() >= tpr:
            return (s_out <= t).mean()
    return 1.0


def test_fpr_at_95_tpr_against_brute_force():
    s_in, s_out = RNG.normal(size=400), RNG.normal(2.0, size=300)
    assert fpr_at_tpr(s_in, s_out) == pytest.approx(_fpr_brute(s_in, s_out, 0.95))
    assert fpr_at_tpr(s_in, s_in + 100) == 0.0  # perfectly separated
