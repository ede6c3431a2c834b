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


@pytest.mark.parametrize("where", ["in", "out"])
def test_a_nan_score_is_refused_not_ranked(where):
    # A NaN has no rank: scipy's rankdata spread it into every rank and the AUROC came out 1.0 (or 0.0) with
    # no error, a plausible, wrong figure. +-inf ranks normally and is kept.
    rng = np.random.default_rng(0)
    s_in, s_out = rng.normal(0, 1, 40), rng.normal(1, 1, 30)
    (s_in if where == "in" else s_out)[17] = np.nan
    for metric in (ood_auroc, fpr_at_tpr):
        with pytest.raises(ValueError, match=r"1 NaN value\(s\) \(the first at index 17\)"):
            metric(s_in, s_out)
    s_in[17], s_out[17] = np.inf, -np.inf
    finite_in, finite_out = np.nan_to_num(s_in, posinf=1e6), np.nan_to_num(s_out, neginf=-1e6)
    assert ood_auroc(s_in, s_out) == pytest.approx(ood_auroc(finite_in, finite_out), abs=1e-12)
