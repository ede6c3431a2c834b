"""``uncertainty.decision``: an operating point for one label, checked against a brute-force search over every
threshold, a hand loop over the answers, and a save / load round trip of a fitted profile."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.special import softmax

from ucse.config import HeadConfig, Pooling
from ucse.config.uncertainty import DecisionConfig, UncertaintyConfig, check_decision, decision_label
from ucse.core.encoder import EncodedBatch
from ucse.heads import build_head, save_head
from ucse.uncertainty.decision import DecisionRule, fit_decision
from ucse.uncertainty.fit import fit_profile
from ucse.uncertainty.profile import load_uncertainty_profile

NAMES = ["ok", "abusive", "spam"]


def _rows(seed: int = 0, n: int = 600):
    """A rare label 1 (~8 %) whose probability overlaps the others': every operating point is a trade."""
    rng = np.random.default_rng(seed)
    y = rng.choice(3, n, p=[0.8, 0.08, 0.12])
    logits = rng.normal(0, 1.0, (n, 3)) + 2.0 * np.eye(3)[y]  # (n, 3)
    return torch.as_tensor(softmax(logits, axis=1)), y, logits.astype(np.float32)


def _by_brute_force(p, hit):
    """Each distinct score as a threshold: (threshold, precision or None, recall), answering p >= t."""
    out = []
    for t in np.unique(p):
        answered = p >= t
        tp = int((answered & hit).sum())
        out.append((t, tp / answered.sum() if answered.any() else None, tp / hit.sum()))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_threshold_is_the_brute_force_operating_point(seed):
    probs, y, _ = _rows(seed)
    p, hit = probs[:, 1].numpy(), y == 1
    points = _by_brute_force(p, hit)
    for target in (0.5, 0.7, 0.8):
        rule = fit_decision(probs, y, DecisionConfig(label="abusive", precision=target), NAMES)
        met = [t for t, prec, _ in points if prec is not None and prec >= target]
        assert rule.achievable and rule.threshold == pytest.approx(
            min(met)
        )  # the most recall at that precision
        assert rule.val_precision >= target
    for target in (0.5, 0.8, 0.95):
        rule = fit_decision(probs, y, DecisionConfig(label="abusive", recall=target), NAMES)
        met = [t for t, _, rec in points if rec >= target]
        assert rule.achievable and rule.threshold == pytest.approx(
            max(met)
        )  # the most precision at that recall
        assert rule.val_recall >= target
        tp = int(((p >= rule.threshold) & hit).sum())
        assert rule.val_recall == pytest.approx(tp / hit.sum()) and rule.val_rows == hit.sum()


def test_an_unreachable_precision_keeps_the_highest_and_says_so():
    # by hand: the surest text is a false alarm, so precision peaks at 2 of 3 (answering p >= 0.7)
    p1 = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.1])
    probs = torch.as_tensor(np.stack([1 - p1, p1, np.zeros(6)], axis=1))
    y = np.array([0, 1, 1, 0, 1, 0])
    rule = fit_decision(probs, y, DecisionConfig(label="abusive", precision=0.9), NAMES)
    assert not rule.achievable and rule.threshold == pytest.approx(0.7)
    assert rule.val_precision == pytest.approx(2 / 3) and rule.val_recall == pytest.approx(2 / 3)
    met = fit_decision(probs, y, DecisionConfig(label="abusive", precision=0.6), NAMES)
    assert met.achievable and met.threshold == pytest.approx(0.2)  # 3 of 5: the lowest that keeps 0.6


def test_the_rule_answers_the_label_at_the_threshold_and_the_best_other_label_below_it():
    probs, _, _ = _rows(4, n=200)
    rule = DecisionRule(1, 0.2, "threshold", 0.2, None, 0.0, 0, True)
    got = rule.predict(probs).numpy()
    for row, answer in zip(probs.numpy(), got, strict=True):
        want = 1 if row[1] >= 0.2 else max((0, 2), key=lambda j: row[j])
        assert answer == want
    assert (got == 1).sum() > (probs.argmax(1).numpy() == 1).sum()  # a low threshold answers it more often


@pytest.mark.parametrize(
    ("cfg", "said"),
    [
        (DecisionConfig(precision=0.9), "uncertainty.decision.precision needs uncertainty.decision.label="),
        (DecisionConfig(label="abusive"), "needs exactly one of uncertainty.decision.precision"),
        (DecisionConfig(label="abusive", precision=0.9, recall=0.8), "(given: precision=0.9 and recall=0.8)"),
        (DecisionConfig(label="abusive", recall=1.0), "uncertainty.decision.recall=1.0 is invalid"),
        (DecisionConfig(label="abusive", threshold=0), "uncertainty.decision.threshold=0 is invalid"),
    ],
)
def test_settings_that_name_no_operating_point_fail_naming_the_key(cfg, said):
    with pytest.raises(ValueError) as err:
        check_decision(cfg)
    assert said in str(err.value)


def test_a_label_the_run_lacks_is_named_with_the_nearest():
    with pytest.raises(ValueError, match=r"decision.label=abusve is not one of .* Did you mean 'abusive'\?"):
        decision_label(DecisionConfig(label="abusve", precision=0.9), NAMES, 3)
    assert decision_label(DecisionConfig(label=2, recall=0.5), None, 3) == 2  # integer labels: the id


def _fitted(tmp_path, **decision):
    probs, y, logits = _rows(5)
    val = EncodedBatch(np.zeros((len(y), 2), np.float32), None, logits)
    cfg = UncertaintyConfig()
    cfg.decision = DecisionConfig(**decision)
    cfg.abstain.coverage = 1.0  # answer every text: the saved error is the rule's answers' own
    cfg.ood.enabled = False
    profile = fit_profile(val, y, cfg, label_names=NAMES)
    head = build_head(HeadConfig(num_filters=4, embed_dim=2), 8, 3, Pooling.mean)
    folder = save_head(head, tmp_path / "h", {"label_names": NAMES})
    profile.save(folder)
    return profile, folder, logits, y


def test_a_fitted_rule_is_saved_applied_and_certified_on_its_own_answers(tmp_path):
    profile, folder, logits, y = _fitted(tmp_path, label="abusive", recall=0.8)
    back = load_uncertainty_profile(folder)
    assert back.decision == profile.decision and back.decision.label == 1
    out = back.apply(np.zeros((len(y), 2), np.float32), None, logits, sets=True)
    probs = out.probs
    want = np.where(probs[:, 1] >= back.decision.threshold, 1, np.where(probs[:, 0] >= probs[:, 2], 0, 2))
    np.testing.assert_array_equal(out.prediction, want)
    np.testing.assert_allclose(out.confidence, probs[np.arange(len(y)), want])  # the answer's probability
    assert out.sets[np.arange(len(y)), want].all()  # every set holds its answer
    assert (want != probs.argmax(1)).any()  # not the most probable labels
    # the abstention rule's held-out error is that of the rule's answers, not of the most probable labels
    assert profile.abstain.val_error == pytest.approx((want != y).mean())
    assert profile.abstain.val_error != pytest.approx((probs.argmax(1) != y).mean())


@pytest.mark.parametrize(
    ("field", "value"),
    [("label", 3), ("threshold", "nan"), ("threshold", 1.5), ("rule", "f1"), ("achievable", 1)],
)
def test_a_damaged_saved_rule_is_refused_naming_the_field(tmp_path, field, value):
    _, folder, _, _ = _fitted(tmp_path, label="abusive", precision=0.6)
    from safetensors.torch import load_file

    from ucse.uncertainty.saved_profile import check_saved_profile

    path = folder / "calibration.json"  # as read back (the manifest's hash is checked before this)
    saved, arrays = json.loads(path.read_text()), load_file(folder / "calibration.safetensors")
    check_saved_profile(saved, arrays, 3, 2, path)  # as saved: accepted
    saved["decision"][field] = value
    with pytest.raises(ValueError, match=rf"field 'decision\.{field}' is"):
        check_saved_profile(saved, arrays, 3, 2, path)
