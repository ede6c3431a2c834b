"""The run summary's out-of-scope phrase: a flag that cannot flag says so, and what tpr would set one."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from ucse.config.uncertainty import OodScore
from ucse.summary import describe_flag, train_summary
from ucse.uncertainty.keep_threshold import keep_threshold


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


@pytest.mark.parametrize("share", [0.7, 0.9])
def test_a_target_mix_too_far_from_the_held_out_rows_names_the_tpr_that_sets_a_threshold(share):
    # 28 held-out rows, a third of them the label the target gives `share` of new texts (weight 3 * share):
    # 0.95 of the weight, the new text's included, is out of reach; the named tpr is the largest on the grid
    # with a finite threshold (brute force over the grid).
    import torch

    from ucse.uncertainty.keep_threshold import target_keep_threshold
    from ucse.uncertainty.ood_detector import OodDetector, OodStats, weight_to_target

    y = np.arange(28) % 3
    weights = np.array([3 * share, 1.5 * (1 - share), 1.5 * (1 - share)])
    det = OodDetector(OodScore.joint_knn, 0.95, math.inf, OodStats())
    det.heldout_scores = torch.arange(28, dtype=torch.float64)
    weight_to_target(det, y, weights)
    assert math.isinf(det.threshold)
    text = describe_flag(det)
    assert (
        "flags no text: the held-out texts are too few to keep 95.00 % of in-scope texts mixed like" in text
    )
    named = float(re.search(r"uncertainty\.ood\.tpr=([0-9.]+) or more held-out texts", text).group(1))
    finite = [
        t / 100
        for t in range(1, 96)
        if math.isfinite(target_keep_threshold(det.heldout_scores, y, weights, t / 100))
    ]
    assert named == max(finite) < 0.95


def test_the_summary_says_why_a_model_with_a_lower_nll_was_not_chosen(tmp_path):
    # "logreg 76.47 % / 0.731, blend 79.41 % / 0.679 -> logreg chosen" read as a bug without the rule
    nll = {"0.0": 0.731, "0.25": 0.70, "0.5": 0.679, "0.75": 0.69, "1.0": 0.72}
    acc = {"0.0": 0.7647, "0.25": 0.78, "0.5": 0.7941, "0.75": 0.78, "1.0": 0.75}
    sel = {
        "mode": "cross-validation",
        "n_heldout": 34,
        "weight": 0.0,
        "best_weight": 0.5,
        "nll": nll,
        "accuracy": acc,
    }
    text = train_summary(tmp_path, {"selection": sel, "head": "logreg"}, None)
    assert "w=0.5 had the lowest NLL, but not by more than one standard error" in text
    assert "the probe alone, w=0, is kept" in text  # which one (a trial had to read metrics.json for it)
    # the probe's C, which a trial found only in metrics.json
    assert "; the probe's C=31.6)" in train_summary(
        tmp_path, {"selection": sel | {"probe": {"C": 31.6}}}, None
    )
    # a blend is "nearest the probe", not "simpler" than the TextCNN alone (a trial)
    text = train_summary(
        tmp_path, {"selection": sel | {"weight": 0.75, "best_weight": 1.0}, "head": "blend"}, None
    )
    assert (
        "w=1 had the lowest NLL, but not by more than one standard error: the blend nearest the probe, w=0.75"
        in text
    )
    # a chosen blend other than 0.5 and a best one are both shown with their figures
    sel.update(weight=0.25, best_weight=0.75)
    text = train_summary(tmp_path, {"selection": sel, "head": "blend"}, None)
    assert "blend w=0.25 78.00 % / 0.700" in text and "blend w=0.75 78.00 % / 0.690" in text
    sel.update(best_weight=0.25)
    assert "standard error" not in train_summary(tmp_path, {"selection": sel, "head": "blend"}, None)


def test_the_summary_names_the_labels_recalled_least(tmp_path):
    # a trial's rare label was recalled 0.17 of the time, hidden in the macro-F1 the summary printed
    from ucse.training.label_report import per_label

    names = [f"l{i}" for i in range(6)]
    m = np.diag([9, 9, 9, 1, 8, 5])
    m[3, 4], m[5, 0] = 5, 1  # l3: 1 of 6 right, 5 read as l4; l5: 5 of 6; the rest all right
    metrics = {"test": {"accuracy": 41 / 47, "f1_macro": 0.8}, "test_per_label": per_label(m, names)}
    text = train_summary(tmp_path, metrics, None)
    # and on the same line the answers least often right (by hand: 'l4' answered 13 times, 8 right; 'l0' 10
    # times, 9 right)
    assert (
        "  lowest recall by label on test: 'l3' 1 of 6 right (0.17; 5 read as 'l4'), 'l5' 5 of 6 right "
        "(0.83; 1 read as 'l0') (all labels: test_per_label in metrics.json); answers least often right on "
        "test: 'l4' 8 of 13 (0.62), 'l0' 9 of 10 (0.90)"
    ) in text.splitlines()
    # rows read back from an old or damaged metrics.json: no line, no error
    for rows in (None, [], "x", [{"label": "a"}]):
        assert "recall" not in train_summary(tmp_path, {**metrics, "test_per_label": rows}, None)

    # under the balanced prior predict answers otherwise: the line says whose decisions it counts
    profile = SimpleNamespace(
        calibrator=SimpleNamespace(
            prior=SimpleNamespace(value="balanced"), method=SimpleNamespace(value="none")
        ),
        score=SimpleNamespace(value="msp"),
        info={},
        abstain=None,
        conformal=None,
        qhat=None,
        ood=None,
        decision=None,
    )
    text = train_summary(tmp_path, metrics, profile)
    assert "; the head's own decisions: `ucse eval` gives predict's, balanced prior)" in text


@pytest.mark.parametrize(
    ("train", "validation", "offered"), [(119, 30, True), (120, 30, False), (130, 25, False)]
)
def test_few_labelled_rows_per_label_offer_ucse_suggest(tmp_path, train, validation, offered):
    # 3 labels: under 50 labelled rows each (150 in all), the next labels pay most; say how to pick them
    data = {"num_classes": 3, "sizes": {"train": train, "validation": validation, "test": 40}}
    last = train_summary(tmp_path, {"data": data}, None).splitlines()[-1]
    assert last.startswith(f"next: ucse predict run={tmp_path} ")
    hint = f"ucse suggest run={tmp_path} input=<unlabelled.txt> n=6 (to label next)"
    assert (hint in last) is offered
    assert "suggest" not in train_summary(tmp_path, {}, None)  # no sizes read back: nothing offered


def test_a_run_that_capped_its_training_rows_is_not_told_to_label_more(tmp_path):
    # a researcher's trial: Banking77 capped at 50 rows was told `ucse suggest ... n=154 (to label next)`
    data = {"num_classes": 3, "sizes": {"train": 60, "validation": 10, "test": 40}, "train_capped": True}
    assert "ucse suggest" not in train_summary(tmp_path, {"data": data}, None)
    data["train_capped"] = False
    assert "ucse suggest" in train_summary(tmp_path, {"data": data}, None)


def test_after_refit_test_the_summary_offers_eval_on_new_labelled_texts(tmp_path):
    # an ops trial: the offered `ucse eval run=<run>` scored the carved test rows the shipped head had trained
    # on (data.refit_test) and printed 100 %, where training had printed 92 % held out
    data = {"num_classes": 3, "sizes": {"train": 160, "validation": 40, "test": 50}}
    test = {"accuracy": 0.92, "f1_macro": 0.9}
    refit = train_summary(tmp_path, {"data": data, "test": test, "selection": {"refit_test": 50}}, None)
    plain = train_summary(tmp_path, {"data": data, "test": test, "selection": {}}, None)
    assert f"ucse eval run={tmp_path} input=<new labelled file>" in refit.splitlines()[-1]
    assert f"ucse eval run={tmp_path}   |" in plain.splitlines()[-1] + "   |"
    assert "input=<new labelled file>" not in plain
