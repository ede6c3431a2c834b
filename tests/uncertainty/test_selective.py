import itertools
import math

import numpy as np
import pytest

from ucse.uncertainty import selective as sel

RNG = np.random.default_rng(0)


def _aurc_brute(u, correct):
    """Mean over k of the error among the k lowest scores; ties averaged over every ordering."""
    n = len(u)
    perms = [p for p in itertools.permutations(range(n)) if all(u[p[i]] <= u[p[i + 1]] for i in range(n - 1))]
    per_order = []
    for p in perms:
        err = [1 - correct[i] for i in p]
        per_order.append(np.mean([sum(err[:k]) / k for k in range(1, n + 1)]))
    return float(np.mean(per_order))


@pytest.mark.parametrize("seed", range(6))
def test_aurc_against_brute_force_with_and_without_ties(seed):
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 3, size=7).astype(float) if seed % 2 else rng.uniform(size=7)
    correct = rng.uniform(size=7) < 0.6
    assert sel.aurc(u, correct) == pytest.approx(_aurc_brute(u, correct))


def test_risk_coverage_curve_and_e_aurc_by_hand():
    u = np.array([0.1, 0.4, 0.2, 0.9])
    correct = np.array([True, False, True, False])
    cov, risk = sel.risk_coverage_curve(u, correct)
    np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0, 0, 1 / 3, 2 / 4])  # order 0.1 T, 0.2 T, 0.4 F, 0.9 F
    assert sel.e_aurc(u, correct) == pytest.approx(0.0)  # already the oracle order
    assert sel.e_aurc(-u, correct) > 0
    # A constant score is random rejection: risk = overall error at every coverage.
    assert sel.aurc(np.zeros(4), correct) == pytest.approx(0.5)


def test_clopper_pearson_bound_against_exact_binomial_tail():
    from scipy.stats import binom

    b = sel.risk_upper_bound(7, 100, 0.05)
    assert binom.cdf(7, 100, b) == pytest.approx(0.05, abs=1e-6)  # P(X <= 7 | p = B) = delta
    assert sel.risk_upper_bound(5, 5, 0.05) == 1.0


def _synthetic(n, rng):
    """u ~ U(0, 1), error with probability u^2: the true risk of 'keep u <= t' is t^2 / 3."""
    u = rng.uniform(size=n)
    return u, rng.uniform(size=n) >= u**2


def test_under_a_null_the_union_bound_is_what_keeps_failures_below_delta(monkeypatch):
    # An uninformative score and a true error of exactly the target at every threshold: any certified
    # threshold is a failure. With the confidence split over SGR's tests the failure rate stays <= delta;
    # testing each bound at the full delta (no union bound) fails about 0.17 of the time at n = 300.
    n, target, delta, trials = 300, 0.1, 0.1, 1500
    rng = np.random.default_rng(7)
    draws = [(rng.uniform(size=n), rng.uniform(size=n) >= target) for _ in range(trials)]
    split = np.mean([sel.threshold_for_error(u, ok, target, delta).achievable for u, ok in draws])
    assert split <= delta + 3 * math.sqrt(delta * (1 - delta) / trials)
    monkeypatch.setattr(sel, "per_test_delta", lambda n, d: d)  # no union bound
    unsplit = np.mean([sel.threshold_for_error(u, ok, target, delta).achievable for u, ok in draws[:500]])
    assert unsplit > delta + 3 * math.sqrt(delta * (1 - delta) / 500)  # the null has the power to see it


def test_selection_with_guaranteed_risk_holds_its_guarantee():
    target, delta, trials = 0.1, 0.1, 300
    violations, coverages = 0, []
    for t in range(trials):
        u, correct = _synthetic(2000, np.random.default_rng(100 + t))
        rule = sel.threshold_for_error(u, correct, target, delta)
        assert rule.achievable
        tt = min(rule.threshold, 1.0)
        violations += tt**2 / 3 > target  # the true selective risk of this threshold
        coverages.append(tt)
    # P(violation) <= delta, with a 3-sigma allowance for the 300 trials.
    assert violations / trials <= delta + 3 * math.sqrt(delta * (1 - delta) / trials)
    # Not vacuous: the exact risk-0.1 threshold is t = sqrt(0.3) = 0.548; SGR stays below, but not far.
    assert 0.4 < np.mean(coverages) < math.sqrt(0.3)


def test_unreachable_target_abstains_on_everything_and_easy_target_on_nothing():
    u, correct = _synthetic(200, RNG)
    none = sel.threshold_for_error(u, np.zeros(200, bool), 0.05)
    assert not none.achievable and none.threshold == -math.inf and none.val_coverage == 0
    all_ = sel.threshold_for_error(u, np.ones(200, bool), 0.05)
    assert all_.achievable and all_.threshold == math.inf and all_.val_coverage == 1


def test_coverage_threshold_guarantee_on_average():
    c, trials, n = 0.8, 400, 200
    true_cov = [
        min(sel.threshold_for_coverage(*_synthetic(n, np.random.default_rng(t)), c).threshold, 1.0)
        for t in range(trials)
    ]
    # E[P(u_test <= t)] >= c and < c + 1/(n+1) (split-conformal); sampling error of the mean ~ 0.0014.
    assert c - 0.005 <= np.mean(true_cov) <= c + 1 / (n + 1) + 0.005


@pytest.mark.parametrize("fallback, abstains", [("answer", False), ("abstain", True)])
def test_uncertifiable_target_follows_the_configured_fallback(fallback, abstains, caplog):
    from ucse.config.uncertainty import AbstainConfig, UncertaintyConfig, Uncertifiable
    from ucse.core.encoder import EncodedBatch
    from ucse.uncertainty.fit import fit_profile

    # 17 validation texts, 2 wrong: no threshold can bound the error below 5 % at delta 0.05.
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(17, 3)) * 3
    labels = logits.argmax(1)
    labels[:2] = (labels[:2] + 1) % 3
    val = EncodedBatch(rng.normal(size=(17, 4)), None, logits)
    cfg = UncertaintyConfig(abstain=AbstainConfig(if_uncertifiable=Uncertifiable(fallback)))
    profile = fit_profile(val, labels, cfg, run="runs/tickets")
    assert not profile.abstain.achievable
    out = profile.apply(val.mean, None, logits)
    assert out.abstain.all() if abstains else not out.abstain.any()
    assert profile.abstain.val_coverage == (0.0 if abstains else 1.0)
    assert ("every text will abstain" if abstains else "no text will abstain") in caplog.text
    offer = profile.info["offered_target_error"]  # what the warning offers, saved with the profile
    # 17 texts, 2 wrong, certify no target by abstaining: only an error bound with every text answered
    assert offer is None
    said = "No target that leaves any text out can be certified with these texts (they certify only an error"
    assert said in caplog.text and (offer is None or f"target_error={offer:.2f}`" in caplog.text)
    # 17 held-out texts: coverage=0.9 keeps the ceil(18 x 0.9) = 17th smallest score, every one of them, so
    # it is not offered as abstaining on ~10 %
    assert "uncertainty.abstain.coverage=0.9 answers every text like these 17" in caplog.text
    # predict's advice without an offered target: the coverage setting only where it leaves texts out
    from ucse.uncertainty.abstain_rule import uncertifiable_fix

    for n, advice in ((18, "with 18 held-out texts no abstention"), (19, "coverage=0.9` abstains on ~10 %")):
        profile.info.update(
            offered_target_error=None, n_validation=n
        )  # ceil(0.9 (n + 1)): 18 of 18, 18 of 19
        assert advice in uncertifiable_fix(profile, "runs/tickets")
    caplog.clear()
    fit_profile(val, labels, cfg, run=None)  # no run calibrate can serve: the setting for the next training
    assert offer is None or f"retraining with `uncertainty.abstain.target_error={offer:.2f}`" in caplog.text


def test_lowest_certifiable_error_is_the_brute_force_minimum_and_a_true_floor():
    from ucse.uncertainty.selective import lowest_certifiable_error, risk_upper_bound, threshold_for_error

    rng = np.random.default_rng(5)
    n, delta = 145, 0.05
    u = rng.uniform(size=n)
    correct = rng.uniform(size=n) > 0.25 * u  # errors more likely where the score is high
    d = delta / (math.ceil(math.log2(n)) + 2)  # every bound test SGR makes
    order = np.argsort(u)
    brute = min(risk_upper_bound(int((~correct[order[:k]]).sum()), k, d) for k in range(1, n + 1))
    floor = lowest_certifiable_error(u, correct, delta)
    assert floor == pytest.approx(brute, rel=1e-9)
    for target in (floor * 0.5, floor):  # no target at or below the floor can be certified
        assert not threshold_for_error(u, correct, target, delta).achievable
    assert threshold_for_error(u, correct, min(0.99, floor + 0.15), delta).achievable


def test_the_offered_target_is_the_smallest_grid_target_sgr_certifies():
    from ucse.uncertainty.selective import lowest_certifiable_error, offered_target, threshold_for_error

    rng = np.random.default_rng(8)
    offers = []
    for n in (60, 145, 400):
        u = rng.uniform(size=n)
        correct = rng.uniform(size=n) > 0.3 * u
        offer = offered_target(u, correct, 0.05)
        rules = {t / 100: threshold_for_error(u, correct, t / 100, 0.05) for t in range(1, 100)}
        leaving_out = [t for t, r in rules.items() if r.achievable and r.threshold < math.inf]
        assert offer == (leaving_out[0] if leaving_out else None)  # brute force over the whole grid
        if offer is not None:
            assert offer >= lowest_certifiable_error(u, correct, 0.05)  # never below the floor
        offers.append(offer)
    assert offers[-1] is not None  # 400 texts whose errors cluster at high scores: abstaining certifies


def test_no_target_is_offered_where_only_answering_every_text_is_certified(caplog):
    # A trial's 57 held-out texts: the warning offered 0.22, and `ucse calibrate` with it abstained on none
    # (threshold +inf). Scores that carry no signal put the lowest bound at answering every text.
    from ucse.config.uncertainty import AbstainConfig
    from ucse.uncertainty.abstain_rule import fit_abstain
    from ucse.uncertainty.selective import (
        answer_all_bound,
        lowest_certifiable_error,
        offered_target,
        per_test_delta,
        risk_upper_bound,
        threshold_for_error,
    )

    n = 57
    u = np.arange(n, dtype=float)
    correct = np.ones(n, bool)
    correct[[0, 10, 20, 30, 40]] = False  # 5 errors, none among the 16 least certain texts
    rules = [threshold_for_error(u, correct, t / 100, 0.05) for t in range(1, 100)]
    passing = [r for r in rules if r.achievable]
    assert passing and all(r.threshold == math.inf for r in passing)  # brute force: only answer-all passes
    assert offered_target(u, correct, 0.05) is None
    everything = answer_all_bound(correct, 0.05)
    assert everything == risk_upper_bound(5, n, per_test_delta(n, 0.05))  # SGR's first test
    assert everything == pytest.approx(lowest_certifiable_error(u, correct, 0.05))  # the floor is there
    rule, info = fit_abstain(u, correct, AbstainConfig(), 0.05, "runs/tickets")
    assert info["offered_target_error"] is None and rule.threshold == math.inf
    said = f"they certify only an error <= {math.ceil(everything * 100) / 100:.2f} with every text answered"
    assert "No target that leaves any text out" in caplog.text and said in caplog.text
    assert "target_error=" not in caplog.text  # no setting offered that changes nothing


def test_a_nan_uncertainty_is_refused_by_every_rank_based_figure():
    # aurc put a NaN last (the most uncertain text) and reported a plausible area; each now names it.
    u = np.array([0.1, np.nan, 0.3, 0.2])
    ok = np.array([True, False, True, True])
    for fn in (sel.aurc, sel.risk_coverage_curve, sel.lowest_certifiable_error):
        with pytest.raises(ValueError, match=r"1 NaN value\(s\) \(the first at index 1\)"):
            fn(u, ok)
    with pytest.raises(ValueError, match="NaN"):
        sel.threshold_for_error(u, ok, 0.1)


def test_the_setting_offered_from_python_is_written_as_an_estimator_override():
    # The estimator's warnings offered `uncertainty.abstain.target_error=0.55`, the command line's spelling.
    from ucse.uncertainty.abstain_rule import setting_hint

    said = setting_hint(None, "uncertainty.abstain.target_error=0.15")
    assert said == (
        "retraining with `uncertainty.abstain.target_error=0.15` "
        "(UcseClassifier: overrides={'uncertainty.abstain.target_error': 0.15})"
    )
    assert "overrides={'uncertainty.calibration.prior': 'balanced'}" in setting_hint(
        None, "uncertainty.calibration.prior=balanced"
    )
    assert setting_hint("runs/r", "uncertainty.abstain.coverage=0.9") == (
        "`ucse calibrate run=runs/r uncertainty.abstain.coverage=0.9`"
    )
