"""The profile's guarantees by simulation, through ``fit_profile`` and ``apply`` (seeded).

- conformal coverage with vector scaling: the quantile from cross-fitted probabilities covers >= 1 - alpha,
  the quantile from the calibrator's own fitting rows does not;
- abstention with ``score=auto``: the score is chosen on the rows SGR certifies on, so SGR runs at
  delta / K; under a null (no threshold truly meets the target) certification stays below delta.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from ucse.config.uncertainty import CalibrationMethod, ScoreName, UncertaintyConfig
from ucse.core.encoder import EncodedBatch
from ucse.uncertainty import fit as fit_module
from ucse.uncertainty.fit import fit_profile

C = 50


def _draw(rng, n, scale):
    """Logits of a C-class model whose classes are over- or under-confident by a per-class factor."""
    y = rng.integers(0, C, n)
    logits = rng.normal(0, 1, (n, C))
    logits[np.arange(n), y] += 2.5
    return EncodedBatch(np.zeros((n, 2), np.float32), None, (logits * scale).astype(np.float32)), y


def _coverage(cfg, trials=6, n=400, nt=2000):
    out = []
    for t in range(trials):
        rng = np.random.default_rng(t)
        scale = rng.uniform(0.5, 2.0, C)
        (val, yv), (test, yt) = _draw(rng, n, scale), _draw(rng, nt, scale)
        res = fit_profile(val, yv, cfg).apply(test.mean, None, test.logits, sets=True)
        out.append(res.sets[np.arange(nt), yt].mean())
    return np.asarray(out)


def test_vector_scaling_sets_cover_when_the_quantile_is_cross_fitted(monkeypatch):
    cfg = UncertaintyConfig()
    cfg.calibration.method = CalibrationMethod.vector
    cfg.conformal.include_top = False  # the textbook sets: coverage exactly what the quantile gives
    cfg.abstain.target_error = None
    crossed = _coverage(cfg)
    # Per draw: the quantile's own sd ~ sqrt(0.09 / 400) = 0.015 plus test noise 0.007; 6 draws.
    sd = math.hypot(0.015, 0.007) / math.sqrt(len(crossed))
    assert crossed.mean() >= 0.9 - 3 * sd
    # The same fit with the quantile taken on the calibrator's own fitting rows (the bug this guards).
    monkeypatch.setattr(fit_module, "out_of_fold_probs", lambda logits, *a, **k: _in_sample(logits, *a))
    assert _coverage(cfg).mean() < 0.9 - 3 * sd


def _in_sample(logits, labels, method, **_):
    from ucse.uncertainty.calibration import fit_calibrator

    return fit_calibrator(logits, labels, method).probs(logits)


def test_the_automatic_score_choice_is_paid_for_in_delta():
    # Correctness independent of every score, true error = target at every threshold: certifying any
    # threshold is a failure, which the guarantee allows with probability <= delta.
    target, delta, trials, n = 0.1, 0.1, 250, 300
    cfg = UncertaintyConfig()
    cfg.calibration.method = CalibrationMethod.none
    cfg.abstain.target_error, cfg.abstain.delta = target, delta
    failures = 0
    for t in range(trials):
        rng = np.random.default_rng(1000 + t)
        logits = rng.normal(0, 1, (n, 3)).astype(np.float32)
        pred = logits.argmax(1)
        y = np.where(rng.uniform(size=n) < 1 - target, pred, (pred + 1) % 3)
        profile = fit_profile(EncodedBatch(np.zeros((n, 2), np.float32), None, logits), y, cfg)
        failures += profile.abstain.achievable
        k = len(profile.info["validation_aurc"])  # the candidates: msp and entropy here
        assert k == 2 and profile.info["abstain_delta_per_candidate"] == pytest.approx(delta / k)
        assert profile.abstain.delta == delta  # the guarantee reported is the user's
    assert failures / trials <= delta + 3 * math.sqrt(delta * (1 - delta) / trials)


def test_the_automatic_score_chooses_among_the_predictive_scores_even_where_a_distance_ranks_errors_best():
    # Validation rows built so that the density of mu ranks the head's errors best: every wrong row lies far
    # from the class means, the softmax is equally sure of every row. auto still chooses among the
    # predictive scores (a distance ranks out-of-scope texts, section 3's test AURCs), named it is used.
    rng = np.random.default_rng(0)
    n, d = 200, 4
    y = rng.integers(0, 3, n)
    wrong = rng.uniform(size=n) < 0.2
    means = np.eye(3, d) * 5
    mu = means[y] + rng.normal(0, 0.3, (n, d)) + wrong[:, None] * 6.0  # (N, D): the wrong rows far out
    logits = np.full((n, 3), -1.0)
    pred = np.where(wrong, (y + 1) % 3, y)
    logits[np.arange(n), pred] = 1.0 + rng.normal(0, 1e-3, n)  # (N, 3): confidence unrelated to the errors
    val = EncodedBatch(mu.astype(np.float32), None, logits.astype(np.float32))
    ty = rng.integers(0, 3, 300)
    train = EncodedBatch((means[ty] + rng.normal(0, 0.3, (300, d))).astype(np.float32), None, None)
    cfg = UncertaintyConfig()
    cfg.calibration.method = CalibrationMethod.none
    auto = fit_profile(val, y, cfg, train=train, train_labels=ty)
    aurcs = auto.info["validation_aurc"]
    assert min(aurcs, key=aurcs.get) in ("density", "mahalanobis") and aurcs["density"] < aurcs["msp"] / 2
    assert auto.score.value in ("msp", "entropy") and auto.info["score_candidates"] == ["msp", "entropy"]
    assert auto.info["abstain_delta_per_candidate"] == pytest.approx(cfg.abstain.delta / 2)
    cfg.score = ScoreName.density
    named = fit_profile(val, y, cfg, train=train, train_labels=ty)
    assert named.score == ScoreName.density and named.info["abstain_delta_per_candidate"] == cfg.abstain.delta


@pytest.mark.parametrize(("offer", "says"), [(0.21, "target_error=0.21"), (None, "abstain.coverage=0.9")])
def test_the_serving_warning_names_the_command_that_sets_a_certifiable_rule(caplog, tmp_path, offer, says):
    from ucse.uncertainty.abstain_rule import warn_if_uncertifiable
    from ucse.uncertainty.calibration import Calibrator
    from ucse.uncertainty.profile import UncertaintyProfile
    from ucse.uncertainty.selective import AbstainThreshold

    rule = AbstainThreshold(math.inf, "target_error", 0.05, 0.05, None, 1.0, 0.0625, False)
    info = {} if offer is None else {"offered_target_error": offer}
    profile = UncertaintyProfile(Calibrator.identity(3), abstain=rule, info=info)
    run = tmp_path / "run"
    (run / "head").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")  # what makes it a run: its config and its results
    (run / "metrics.json").write_text("{}")
    with caplog.at_level(logging.WARNING):
        warn_if_uncertifiable(profile, run / "head")
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "no text abstains" in msg and f"ucse calibrate run={run} uncertainty." in msg and says in msg
    # a head outside a run (an export): no command on a folder that is no run, only retraining changes it
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        warn_if_uncertifiable(profile, tmp_path / "exported" / "head")
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "ucse calibrate" not in msg and "retraining with `uncertainty." in msg and says in msg
