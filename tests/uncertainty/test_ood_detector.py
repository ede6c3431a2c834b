"""The out-of-scope flag: its keep-rate guarantee (Monte-Carlo), cross-fitting, summed scores, saved form."""

import json
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from ucse.config.uncertainty import OodConfig, OodScore
from ucse.uncertainty.keep_threshold import keep_threshold
from ucse.uncertainty.ood import ood_auroc
from ucse.uncertainty.ood_detector import (
    fit_ood,
    fit_stats,
    from_saved,
    rethreshold,
    to_saved,
    weight_to_target,
)
from ucse.uncertainty.saved_profile import check_saved_ood
from ucse.uncertainty.scores import entropy

C, D = 4, 8

SCORES = [s for s in OodScore if s is not OodScore.auto]
"""The scores a detector is fitted with (``auto`` resolves to one of them first)."""


def draw(rng, centres, n):
    y = rng.integers(0, C, n)
    return centres[y] + rng.normal(size=(n, D)), y


def outputs(x, w):
    """(probs, logits) of a fixed linear classifier."""
    logits = torch.as_tensor(x @ w.T)
    return torch.softmax(logits, 1), logits


def test_keep_threshold_keeps_at_least_tpr_and_no_more_than_needed():
    # For continuous scores the r-th of n order statistics keeps a new score with probability r / (n + 1)
    # exactly (its CDF value is Beta(r, n + 1 - r)); r = ceil((n + 1) tpr) is the smallest r with that >= tpr.
    rng = np.random.default_rng(0)
    n, tpr, trials = 40, 0.9, 4000
    kept = [keep_threshold(rng.uniform(size=n), tpr) for _ in range(trials)]  # uniform: F(t) = t
    r = math.ceil((n + 1) * tpr)
    sd = math.sqrt(r * (n + 1 - r) / ((n + 1) ** 2 * (n + 2)) / trials)
    assert abs(np.mean(kept) - r / (n + 1)) < 4 * sd
    assert np.mean(kept) > tpr - 4 * sd and (r - 1) / (n + 1) < tpr  # one rank lower would miss tpr
    assert keep_threshold(rng.uniform(size=5), 0.9) == math.inf  # ceil(6 * 0.9) = 6 > 5: keep everything


@pytest.mark.parametrize("score", SCORES)
def test_every_score_keeps_tpr_of_new_in_scope_texts_and_flags_far_ones(score):
    keep, auroc = [], []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        centres, w = rng.normal(0, 3, (C, D)), rng.normal(size=(C, D))
        (x, y), (xv, _), (xt, _) = draw(rng, centres, 300), draw(rng, centres, 200), draw(rng, centres, 1000)
        det = fit_ood(OodConfig(score=score, tpr=0.9), x, y, C, *outputs(xv, w), features=xv)
        s_in = det.scores(xt, *outputs(xt, w))
        keep.append(float((s_in <= det.threshold).double().mean()))
        far = rng.normal(0, 1, (200, D)) + 12.0
        auroc.append(ood_auroc(s_in, det.scores(far, *outputs(far, w))))
    # Mean keep over 8 validation draws: Beta sd per draw ~ sqrt(0.9 * 0.1 / 200) = 0.021, test noise 0.009.
    assert abs(np.mean(keep) - 0.9) < 3 * math.hypot(0.021, 0.009) / math.sqrt(8)
    # Texts far from every class mean. Not relative_mahalanobis: it subtracts the background distance, so a
    # text far out along the directions the classes spread in can score low (one of these 8 draws: 0.33).
    if score in (OodScore.mahalanobis, OodScore.class_mahalanobis, OodScore.knn, OodScore.joint_knn):
        assert np.mean(auroc) > 0.99


def test_cross_fitting_keeps_tpr_where_in_sample_statistics_do_not():
    # A head trained on every row: the threshold's texts are the statistics' own rows. Per-class covariances
    # fitted on those rows make their scores too small (over-fitted), so an in-sample threshold is too low.
    crossed, in_sample = [], []
    cfg = OodConfig(score=OodScore.class_mahalanobis, tpr=0.9)
    for seed in range(10):
        rng = np.random.default_rng(seed)
        centres, w = rng.normal(0, 3, (C, D)), rng.normal(size=(C, D))
        (x, y), (xt, _) = draw(rng, centres, 160), draw(rng, centres, 2000)
        rows = np.arange(100, 160)
        det = fit_ood(cfg, x, y, C, *outputs(x[rows], w), rows=rows, seed=seed)
        crossed.append(float((det.scores(xt, *outputs(xt, w)) <= det.threshold).double().mean()))
        naive = fit_ood(cfg, x, y, C, *outputs(x[rows], w), features=x[rows])  # statistics saw these rows
        in_sample.append(float((naive.scores(xt, *outputs(xt, w)) <= naive.threshold).double().mean()))
    # Cross-fitted statistics come from 4/5 of the rows: scores a bit larger than the final ones', so the
    # keep rate errs upwards; 10 draws of 60 held-out rows: sd ~ sqrt(0.09 / 60) / sqrt(10) = 0.012.
    assert 0.9 - 0.036 < np.mean(crossed) < 0.9 + 0.06
    assert np.mean(in_sample) < np.mean(crossed) - 0.05


def test_a_combined_score_sums_standardised_components_from_validation():
    rng = np.random.default_rng(3)
    centres, w = rng.normal(0, 3, (C, D)), rng.normal(size=(C, D))
    (x, y), (xv, _), (xt, _) = draw(rng, centres, 200), draw(rng, centres, 100), draw(rng, centres, 30)
    det = fit_ood(OodConfig(score=OodScore.mahalanobis_entropy), x, y, C, *outputs(xv, w), features=xv)
    maha = fit_ood(OodConfig(score=OodScore.mahalanobis), x, y, C, *outputs(xv, w), features=xv)
    mv, mt = maha.scores(xv, None, None), maha.scores(xt, None, None)
    ev, et = entropy(outputs(xv, w)[0]), entropy(outputs(xt, w)[0])
    want = (mt - mv.mean()) / mv.std() + (et - ev.mean()) / ev.std()
    torch.testing.assert_close(det.scores(xt, *outputs(xt, w)), want, rtol=1e-9, atol=1e-9)
    assert det.threshold == keep_threshold((mv - mv.mean()) / mv.std() + (ev - ev.mean()) / ev.std(), 0.95)


def test_rethreshold_moves_only_the_threshold():
    rng = np.random.default_rng(4)
    centres, w = rng.normal(0, 3, (C, D)), rng.normal(size=(C, D))
    (x, y), (xv, _) = draw(rng, centres, 200), draw(rng, centres, 100)
    det = fit_ood(OodConfig(score=OodScore.knn, k=3), x, y, C, *outputs(xv, w), features=xv)
    looser = rethreshold(det, OodConfig(score=OodScore.knn, k=3, tpr=0.99), xv, *outputs(xv, w))
    assert looser.stats is det.stats and looser.threshold >= det.threshold
    assert (
        looser.threshold
        == fit_ood(
            OodConfig(score=OodScore.knn, k=3, tpr=0.99), x, y, C, *outputs(xv, w), features=xv
        ).threshold
    )
    with pytest.raises(ValueError, match="same score and k"):
        rethreshold(det, OodConfig(score=OodScore.mahalanobis), xv, *outputs(xv, w))
    # A detector weighted to a target mix (here one its 100 rows cannot carry: one row of a label weighted
    # 60, so 0.95 of the weight needs more than all 159 of it) records the mix and the tpr that would work;
    # a refit starts without them, and a finite weighting drops a stale suggestion.
    yv = np.r_[0, np.ones(99, dtype=np.int64)]
    weight_to_target(det, yv, np.r_[60.0, np.ones(C - 1)])
    assert math.isinf(det.threshold) and det.info["mix"] == "target" and 0 < det.info["keepable_tpr"] < 0.95
    plain = rethreshold(det, OodConfig(score=OodScore.knn, k=3), xv, *outputs(xv, w))
    assert "mix" not in plain.info and "keepable_tpr" not in plain.info
    weight_to_target(det, yv, np.ones(C))
    assert math.isfinite(det.threshold) and "keepable_tpr" not in det.info


def _saved(tmp_path, score):
    rng = np.random.default_rng(5)
    centres, w = rng.normal(0, 3, (C, D)), rng.normal(size=(C, D))
    (x, y), (xv, _) = draw(rng, centres, 120), draw(rng, centres, 60)
    det = fit_ood(OodConfig(score=score), x, y, C, *outputs(xv, w), features=xv)
    cfg, arrays = to_saved(det)
    save_file({k: v.contiguous() for k, v in arrays.items()}, tmp_path / "a.safetensors")
    (tmp_path / "a.json").write_text(json.dumps(cfg))
    return det, json.loads((tmp_path / "a.json").read_text()), load_file(tmp_path / "a.safetensors"), (xv, w)


def _fail(key, value, allowed):
    raise ValueError(f"field '{key}' is {value!r}, allowed: {allowed}")


@pytest.mark.parametrize("score", SCORES)
def test_a_saved_detector_reloads_and_scores_identically(tmp_path, score):
    det, cfg, arrays, (xv, w) = _saved(tmp_path, score)
    check_saved_ood(cfg, arrays, C, D, _fail)
    back = from_saved(cfg, arrays)
    torch.testing.assert_close(back.scores(xv, *outputs(xv, w)), det.scores(xv, *outputs(xv, w)))
    assert back.threshold == det.threshold and back.score == score


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda c, a: c.update(threshold="nan"), "ood.threshold"),
        (lambda c, a: c.update(tpr=1.5), "ood.tpr"),
        (lambda c, a: c.update(score="magic"), "ood.score"),
        (lambda c, a: c.update(k=0), "ood.k"),
        (lambda c, a: c.update(extra=1), "'ood'"),
        (lambda c, a: a.pop("ood_precision"), "ood.score"),
        (lambda c, a: a.update(ood_bank=torch.zeros(3, 8)), "ood.score"),
        (lambda c, a: a["ood_means"].__setitem__((0, 0), float("nan")), "ood_means"),
        (lambda c, a: a.update(ood_precision=torch.zeros(3, 3)), "ood_precision"),
        (lambda c, a: c.update(standardize=[0.0, 1.0, 0.0, 0.0]), "ood.standardize"),
        (lambda c, a: c.update(standardize=None), "ood.standardize"),
    ],
)
def test_a_corrupted_saved_detector_is_refused_naming_the_field(tmp_path, corrupt, message):
    _, cfg, arrays, _ = _saved(tmp_path, OodScore.mahalanobis_entropy)
    corrupt(cfg, arrays)
    with pytest.raises(ValueError, match=message):
        check_saved_ood(cfg, arrays, C, D, _fail)


def test_only_the_statistics_a_score_needs_are_fitted():
    rng = np.random.default_rng(6)
    x, y = draw(rng, rng.normal(0, 3, (C, D)), 50)
    st = fit_stats(OodScore.energy, x, y, C)
    assert (st.gaussians, st.background, st.classes, st.bank) == (None, None, None, None)
    st = fit_stats(OodScore.relative_mahalanobis_entropy, x, y, C)
    assert st.gaussians is not None and st.background is not None and st.classes is None and st.bank is None


def test_auto_is_joint_knn_up_to_the_bank_cap_and_mahalanobis_entropy_above():
    cfg = OodConfig(max_bank_rows=100)
    assert cfg.score is OodScore.auto
    assert cfg.resolved_score(100) is OodScore.joint_knn  # a bank of at most the cap
    assert cfg.resolved_score(101) is OodScore.mahalanobis_entropy  # statistics of a fixed size
    assert OodConfig(score=OodScore.knn, max_bank_rows=1).resolved_score(10**6) is OodScore.knn  # as asked
