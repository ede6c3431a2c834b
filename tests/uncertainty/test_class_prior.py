"""``uncertainty.calibration.prior=balanced``: the calibrated posterior turned from the training mix to a
uniform prior (post-hoc logit adjustment), checked against the analytic Bayes posterior of a simulated task,
a hand computation, and a save / load round trip."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.special import softmax
from scipy.stats import norm
from sklearn.metrics import balanced_accuracy_score, f1_score

from ucse.config import HeadConfig, Pooling
from ucse.config.uncertainty import ClassPrior, UncertaintyConfig
from ucse.core.encoder import EncodedBatch
from ucse.heads import build_head, save_head
from ucse.summary import prior_line
from ucse.uncertainty.calibration import fit_calibrator
from ucse.uncertainty.fit import fit_profile
from ucse.uncertainty.profile import load_uncertainty_profile

MEANS = np.array([-1.5, 0.0, 1.5])  # 1-D class-conditional Gaussians N(mean, 1)
PRIOR = np.array([0.75, 0.2, 0.05])  # the training mix


def _draw(rng, n, prior, scale=2.0):
    """n rows from the mix ``prior``: a model whose logits are the training-mix log posterior x ``scale``
    (calibrated once divided by T = scale)."""
    y = rng.choice(3, n, p=prior)
    x = rng.normal(MEANS[y], 1.0)
    log_post = norm.logpdf(x[:, None], MEANS[None, :], 1.0) + np.log(PRIOR)  # (n, 3) up to a constant
    logits = (scale * log_post).astype(np.float32)
    return x, EncodedBatch(np.zeros((n, 2), np.float32), None, logits), y


def _cfg(prior: str) -> UncertaintyConfig:
    cfg = UncertaintyConfig()
    cfg.calibration.prior = ClassPrior(prior)
    cfg.abstain.target_error = None
    return cfg


def test_balanced_probabilities_are_the_uniform_prior_posterior():
    rng = np.random.default_rng(0)
    _, val, yv = _draw(rng, 4000, PRIOR)
    counts = np.round(PRIOR * 1000).astype(int)  # the training rows: 750 / 200 / 50
    profile = fit_profile(val, yv, _cfg("balanced"), counts=counts)
    x, test, yt = _draw(rng, 6000, np.full(3, 1 / 3))  # new texts come evenly from the three labels
    got = profile.apply(test.mean, None, test.logits).probs
    # Bayes under a uniform prior: the class likelihoods alone, normalised.
    want = softmax(norm.logpdf(x[:, None], MEANS[None, :], 1.0), axis=1)
    # T is fitted on 4000 rows (sd of log T ~ 2 %): the posteriors agree to a few hundredths.
    assert np.abs(got - want).max() < 0.05
    trained = fit_profile(val, yv, _cfg("train"), counts=counts).apply(test.mean, None, test.logits)
    bal = balanced_accuracy_score(yt, got.argmax(1))
    # The uniform-prior rule is the Bayes rule for balanced accuracy: above the training mix's rule by far
    # more than the Monte-Carlo noise (sd ~ 0.006 at 6000 rows), and level with the analytic Bayes rule.
    assert bal > balanced_accuracy_score(yt, trained.probs.argmax(1)) + 0.05
    assert bal == pytest.approx(balanced_accuracy_score(yt, want.argmax(1)), abs=0.01)


def test_the_shift_is_minus_the_log_training_share_after_calibration():
    rng = np.random.default_rng(1)
    _, val, yv = _draw(rng, 500, PRIOR)
    counts = np.array([30, 9, 0])  # a label without training rows counts as one
    profile = fit_profile(val, yv, _cfg("balanced"), counts=counts)
    t = fit_calibrator(val.logits, yv, "temperature").temperature
    share = np.array([30, 9, 1]) / 40
    want = softmax(val.logits.astype(np.float64) / t - np.log(share), axis=1)
    np.testing.assert_allclose(profile.calibrator.probs(val.logits).numpy(), want, atol=1e-9)
    assert profile.calibrator.temperature == pytest.approx(t)  # the temperature itself is unchanged
    # The held-out figures the summary reads are those of the two rules on these rows.
    info = profile.info["class_prior"]
    pred = want.argmax(1)
    assert info["prior"] == "balanced" and info["counts"] == [30, 9, 0]
    assert info["balanced"]["f1_macro"] == pytest.approx(f1_score(yv, pred, average="macro"))
    trained = softmax(val.logits.astype(np.float64) / t, axis=1)
    assert info["train"]["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(yv, trained.argmax(1)))
    # and the rows' calibration error under each prior (what calibrate's forecast prints beside accuracy)
    for prior, probs in (("train", trained), ("balanced", want)):  # torchmetrics bins float32 confidences:
        assert info[prior]["ece"] == pytest.approx(_ece_by_hand(probs, yv), abs=1e-6)  # ~1e-7 each, summed


def _ece_by_hand(probs, labels, bins=15):
    """L1 ECE of the top label over equal-width bins [lo, hi), written out."""
    conf, right = probs.max(1), (probs.argmax(1) == labels)
    which = np.minimum((conf * bins).astype(int), bins)
    return sum(
        abs(right[which == b].mean() - conf[which == b].mean()) * (which == b).mean() for b in set(which)
    )


def test_the_prior_is_saved_and_read_back(tmp_path):
    rng = np.random.default_rng(2)
    _, val, yv = _draw(rng, 300, PRIOR)
    head = build_head(HeadConfig(num_filters=4, embed_dim=2), 8, 3, Pooling.mean)
    folder = save_head(head, tmp_path / "h", {"label_names": ["a", "b", "c"]})
    profile = fit_profile(val, yv, _cfg("balanced"), counts=np.array([75, 20, 5]))
    profile.save(folder)
    back = load_uncertainty_profile(folder)
    assert back.calibrator.prior is ClassPrior.balanced
    torch.testing.assert_close(back.calibrator.probs(val.logits), profile.calibrator.probs(val.logits))
    saved = json.loads((folder / "calibration.json").read_text())
    assert saved["calibration"]["prior"] == "balanced"


def test_the_summary_offers_the_balanced_prior_only_where_it_helps():
    def info(prior, f1_train, f1_bal, counts=(140, 90, 5)):
        figs = lambda f1: {"accuracy": 0.9, "balanced_accuracy": 0.8, "f1_macro": f1}  # noqa: E731
        return {"prior": prior, "counts": list(counts), "train": figs(f1_train), "balanced": figs(f1_bal)}

    offer = prior_line(info("train", 0.79, 0.88), "runs/x")
    assert "5 to 140 training rows" in offer
    assert "`ucse calibrate run=runs/x uncertainty.calibration.prior=balanced`" in offer
    unservable = prior_line(info("train", 0.79, 0.88), None)  # calibrate cannot reread the run's rows
    assert "retraining with `uncertainty.calibration.prior=balanced`" in unservable
    assert prior_line(info("train", 0.88, 0.79), "runs/x") is None  # balanced would not help
    assert prior_line(info("train", 0.880, 0.885), "runs/x") is None  # by less than a point: not offered
    assert prior_line(info("train", 0.79, 0.88, (40, 30, 20)), "runs/x") is None  # not imbalanced
    assert "class prior: balanced" in prior_line(info("balanced", 0.79, 0.88), "runs/x")
    for broken in (None, [], {"prior": "train"}, {**info("train", 0.7, 0.8), "counts": ["x"]}):
        assert prior_line(broken, "runs/x") is None  # read back from disk: any field may be missing


def _target_cfg(shares) -> UncertaintyConfig:
    cfg = _cfg("target")
    cfg.calibration.target_shares = shares
    return cfg


def test_target_probabilities_are_the_target_mix_posterior():
    rng = np.random.default_rng(3)
    _, val, yv = _draw(rng, 4000, PRIOR)
    counts = np.round(PRIOR * 1000).astype(int)
    q = np.array([0.1, 0.3, 0.6])  # new texts come mostly from the label the training rows had fewest of
    profile = fit_profile(val, yv, _target_cfg({"0": 0.1, "1": 0.3, "2": 0.6}), counts=counts)
    x, test, yt = _draw(rng, 6000, q)
    got = profile.apply(test.mean, None, test.logits).probs
    want = softmax(norm.logpdf(x[:, None], MEANS[None, :], 1.0) + np.log(q), axis=1)  # Bayes under q
    assert np.abs(got - want).max() < 0.05  # T fitted on 4000 rows, as for the balanced prior
    trained = fit_profile(val, yv, _cfg("train"), counts=counts).apply(test.mean, None, test.logits)
    acc = (got.argmax(1) == yt).mean()
    # The target-mix rule is the Bayes rule for accuracy on texts mixed like q (sd ~ 0.006 at 6000 rows).
    assert acc > (trained.probs.argmax(1) == yt).mean() + 0.05
    assert acc == pytest.approx((want.argmax(1) == yt).mean(), abs=0.01)


def test_the_target_shift_and_the_weighted_held_out_figures_by_hand():
    rng = np.random.default_rng(4)
    counts = np.array([300, 80, 20])  # the training rows; the validation rows are mixed otherwise
    yv = np.repeat(np.arange(3), [200, 100, 100])
    x = rng.normal(MEANS[yv], 1.0)
    logits = (2.0 * (norm.logpdf(x[:, None], MEANS[None, :], 1.0) + np.log(PRIOR))).astype(np.float32)
    val = EncodedBatch(np.zeros((len(yv), 2), np.float32), None, logits)
    profile = fit_profile(val, yv, _target_cfg({"2": 0.5}), counts=counts)  # 0 and 1 share the other half
    q = np.array([0.5 * 300 / 380, 0.5 * 80 / 380, 0.5])
    t = fit_calibrator(logits, yv, "temperature").temperature
    want = softmax(logits.astype(np.float64) / t + np.log(q) - np.log(counts / 400), axis=1)
    np.testing.assert_allclose(profile.calibrator.probs(logits).numpy(), want, atol=1e-9)
    info = profile.info["class_prior"]
    np.testing.assert_allclose(info["target_shares"], q)
    # Each row weighted by q over its label's share of the rows: the accuracy is sum_c q_c * recall_c.
    pred = want.argmax(1)
    recall = np.array([(pred[yv == c] == c).mean() for c in range(3)])
    assert info["target"]["target"]["accuracy"] == pytest.approx(float(q @ recall))
    trained = softmax(logits.astype(np.float64) / t, axis=1).argmax(1)
    recall_t = np.array([(trained[yv == c] == c).mean() for c in range(3)])
    assert info["target"]["train"]["accuracy"] == pytest.approx(float(q @ recall_t))
    assert info["target"]["target"]["accuracy"] > info["target"]["train"]["accuracy"]
    # A uniform target is the balanced prior.
    uniform = fit_profile(val, yv, _target_cfg({"0": 1 / 3, "1": 1 / 3, "2": 1 / 3}), counts=counts)
    balanced = fit_profile(val, yv, _cfg("balanced"), counts=counts)
    torch.testing.assert_close(uniform.calibrator.probs(logits), balanced.calibrator.probs(logits))


def test_the_balanced_prior_weights_the_sets_to_every_label_alike():
    # The sets' quantiles are those of a uniform target (one per label), so their coverage holds for texts of
    # every label alike, not only for the training mix the held-out rows come in.
    rng = np.random.default_rng(5)
    _, val, yv = _draw(rng, 3000, PRIOR)
    counts = np.round(PRIOR * 1000).astype(int)
    balanced = fit_profile(val, yv, _cfg("balanced"), counts=counts)
    uniform = fit_profile(val, yv, _target_cfg({"0": 1 / 3, "1": 1 / 3, "2": 1 / 3}), counts=counts)
    assert isinstance(balanced.qhat, list) and balanced.qhat == pytest.approx(uniform.qhat)
    _, test, yt = _draw(rng, 9000, np.full(3, 1 / 3))
    sets = balanced.apply(test.mean, None, test.logits, sets=True).sets
    # Coverage >= 0.9 on the even mix, less three Monte-Carlo sd (sqrt(0.09 / 9000) = 0.003).
    assert sets[np.arange(len(yt)), yt].mean() >= 0.9 - 3 * 0.00317


def test_target_shares_are_checked_and_resolved_by_label_name():
    from ucse.config.uncertainty import CalibrationConfig, check_target_shares, target_shares

    assert target_shares({"b": 0.5}, ["a", "b", "c"], [30, 10, 10]) == pytest.approx([0.375, 0.5, 0.125])
    assert target_shares({0: 2 / 3, 1: 1 / 3}, ["0", "1"], [5, 5]) == pytest.approx([2 / 3, 1 / 3])
    assert target_shares({"a": 0.7, "b": 0.3}, ["a", "b"], [0, 9]) == pytest.approx([0.7, 0.3])
    bad = [
        ({"d": 0.5}, "'d' is not one of the run's 3 labels (a, b, c)"),
        ({"a": 0.6, "b": 0.4}, "leaving nothing for the 1 left out (e.g. 'c')"),
        ({"a": 0.2, "b": 0.2, "c": 0.2}, "the shares add up to 0.6, not 1"),
    ]
    with pytest.raises(ValueError, match=r"the run's 2 labels \(ham, spam\)\. Did you mean 'spam'"):
        target_shares({"Spam": 0.1}, ["ham", "spam"], [5, 5])
    for spec, message in bad:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            target_shares(spec, ["a", "b", "c"], [3, 3, 3])
    wrong = [
        (ClassPrior.train, {"a": 0.5}, "add uncertainty.calibration.prior=target"),
        (ClassPrior.target, None, "needs uncertainty.calibration.target_shares.<label>=<share>"),
        (ClassPrior.target, {True: 0.2}, "read as the boolean True; quote it"),
        (ClassPrior.target, {"a": 0}, "a=0 must be a share in"),
        (ClassPrior.target, {"a": "x"}, "a='x' must be a share in"),
        (ClassPrior.target, {"a": 0.7, "b": 0.7}, "add up to 1.4"),
    ]
    for prior, shares, message in wrong:
        with pytest.raises(ValueError, match=message):
            check_target_shares(CalibrationConfig(prior=prior, target_shares=shares))


def test_the_target_prior_is_saved_and_read_back_and_summarised(tmp_path):
    rng = np.random.default_rng(5)
    _, val, yv = _draw(rng, 300, PRIOR)
    head = build_head(HeadConfig(num_filters=4, embed_dim=2), 8, 3, Pooling.mean)
    folder = save_head(head, tmp_path / "h", {"label_names": ["a", "b", "c"]})
    cfg = _target_cfg({"c": 0.4, "a": 0.3, "b": 0.3})
    profile = fit_profile(val, yv, cfg, counts=np.array([75, 20, 5]), label_names=["a", "b", "c"])
    profile.save(folder)
    back = load_uncertainty_profile(folder)
    assert back.calibrator.prior is ClassPrior.target
    torch.testing.assert_close(back.calibrator.probs(val.logits), profile.calibrator.probs(val.logits))
    saved = json.loads((folder / "calibration.json").read_text())
    info = saved["info"]["class_prior"]
    assert info["prior"] == "target" and info["target_shares"] == pytest.approx([0.3, 0.3, 0.4])
    assert len(profile.qhat) == 3 and back.qhat == profile.qhat  # one quantile per label, read back
    line = prior_line(info, "runs/x")
    w = {k: f"{v['accuracy']:.3f}" for k, v in info["target"].items()}
    assert line.startswith("  class prior: target (the shares you gave)")
    assert f"accuracy {w['train']} for the training mix, {w['target']} for the target" in line
    assert prior_line({**info, "target": None}, "runs/x") is None  # read back from disk: may be damaged
    # The summary says which guarantees follow the target mix: the sets' quantiles; abstention's is the rows'.
    from ucse.summary import train_summary

    for prior, shown in (("target", True), ("train", False)):
        cfg = _target_cfg({"c": 0.4}) if prior == "target" else _cfg(prior)
        cfg.abstain.target_error = 0.05
        p = fit_profile(val, yv, cfg, counts=np.array([75, 20, 5]), label_names=["a", "b", "c"])
        text = train_summary(tmp_path / "run", {}, p)
        assert ("abstain (target error 0.05, set on the held-out rows' own mix)" in text) is shown
        assert ("conformal sets: aps, alpha 0.1, weighted to the target mix" in text) is shown


def test_python_overrides_keep_label_names_yaml_would_read_as_booleans():
    from ucse.config import build_config
    from ucse.pipeline import overrides_to_tokens

    shares = {"yes": 0.2, "no": 0.8}  # YAML 1.1 reads both as booleans when written as a mapping
    tokens = overrides_to_tokens(
        {"uncertainty.calibration.prior": "target", "uncertainty.calibration.target_shares": shares}
    )
    cal = build_config(tokens).uncertainty.calibration
    assert cal.prior is ClassPrior.target and dict(cal.target_shares) == shares


def _target_coverage(reps=40, n=600, nt=3000):
    q = np.array([0.1, 0.3, 0.6])
    cfg = _target_cfg({"0": 0.1, "1": 0.3, "2": 0.6})
    cfg.conformal.include_top = False  # the textbook randomised sets: coverage as the quantile gives
    out = []
    for r in range(reps):
        rng = np.random.default_rng(100 + r)
        _, val, yv = _draw(rng, n, PRIOR)
        _, test, yt = _draw(rng, nt, q)  # new texts come in the target mix
        cfg.seed = r  # fresh uniforms per draw
        res = fit_profile(val, yv, cfg, counts=np.bincount(yv, minlength=3)).apply(
            test.mean, None, test.logits, sets=True
        )
        out.append(res.sets[np.arange(nt), yt].mean())
    return np.asarray(out)


def test_sets_under_a_target_prior_cover_texts_drawn_from_the_target_mix(monkeypatch):
    from ucse.uncertainty import fit as fit_module

    weighted = _target_coverage()
    # One draw's coverage: the weighted quantile's sd ~ 0.02 at 600 rows (most of the weight on the rare
    # label's ~30 rows) plus test noise ~ 0.005; over 40 draws the mean's sd is ~ 0.0035.
    sd = math.hypot(0.02, 0.005) / math.sqrt(len(weighted))
    assert 0.9 - 3 * sd <= weighted.mean() <= 0.9 + 0.02  # exact up to the (n + 1) rounding
    # The same profile with one quantile from the rows mixed like training (weights ignored): its sets are
    # the wrong size for the target mix.
    monkeypatch.setattr(fit_module, "shift_weights", lambda *a: None)
    assert abs(_target_coverage().mean() - 0.9) > 0.02 + 3 * sd
