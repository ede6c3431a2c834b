"""``actionable_report`` judges what ``predict`` answers: the profile's decisions, balanced prior included."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, confusion_matrix, f1_score, recall_score

from ucse.cli.summary import eval_summary
from ucse.config.uncertainty import ClassPrior, UncertaintyConfig
from ucse.core.encoder import EncodedBatch
from ucse.evaluation.uncertainty_report import actionable_report, format_table
from ucse.uncertainty.fit import fit_profile


def _batch(rng, n, prior):
    """Three labels; the logits favour label 0 (a head trained on a mix where it is common)."""
    y = rng.choice(3, n, p=prior)
    logits = rng.normal(0, 1, (n, 3))
    logits[np.arange(n), y] += 2.0
    logits[:, 0] += 1.5
    return EncodedBatch(np.zeros((n, 2), np.float32), None, logits.astype(np.float32)), y


@pytest.mark.parametrize("prior", ["train", "balanced", "target"])
def test_the_report_scores_the_profiles_decisions(prior):
    rng = np.random.default_rng(0)
    val, yv = _batch(rng, 600, [0.8, 0.15, 0.05])
    cfg = UncertaintyConfig()
    cfg.calibration.prior = ClassPrior(prior)
    if prior == "target":  # new texts mixed evenly, named by label id
        cfg.calibration.target_shares = {"0": 1 / 3, "1": 1 / 3, "2": 1 / 3}
    profile = fit_profile(val, yv, cfg, counts=np.array([800, 150, 50]))
    test, yt = _batch(rng, 900, [1 / 3, 1 / 3, 1 / 3])
    report = actionable_report(profile, test, yt)
    pred = profile.calibrator.probs(test.logits).numpy().argmax(1)  # what predict answers
    d = report["decisions"]
    assert d["accuracy"] == pytest.approx((pred == yt).mean())
    assert d["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(yt, pred))
    assert d["f1_macro"] == pytest.approx(f1_score(yt, pred, average="macro"))
    # per label, of the same decisions (what predict answers), named by label id without label names
    rows = report["per_label"]
    assert [r["label"] for r in rows] == ["0", "1", "2"]
    np.testing.assert_allclose([r["recall"] for r in rows], recall_score(yt, pred, average=None))
    assert report["confusion"]["counts"] == confusion_matrix(yt, pred).tolist()
    raw = test.logits.argmax(1)
    shown = eval_summary({"metrics": {}, "split": "test", **report}, None)
    assert "recall by label on test: " in shown  # three labels: every one named
    if prior != "train":
        assert (pred != raw).mean() > 0.1  # the prior moved many decisions away from the logits' argmax
        assert d["balanced_accuracy"] > balanced_accuracy_score(yt, raw)
        assert f"predict's answers, with the {prior} class prior: balanced accuracy" in shown
        assert f"{prior} prior" in format_table(report)
    else:
        np.testing.assert_array_equal(pred, raw)  # temperature scaling keeps the argmax
        assert "balanced class prior" not in shown


def test_the_headline_scores_the_probabilities_predict_returns():
    metrics = {"accuracy": 0.9, "f1_macro": 0.8, "auroc": None, "ece": 0.2235, "nll": 0.4428}
    head = eval_summary({"task": "t", "split": "test", "n": 12, "metrics": metrics}, None).splitlines()[0]
    # with Wilson's interval of 11 right of 12 (scipy: 0.6461-0.9851)
    assert head == (
        "t test (n=12): accuracy 0.9000 (95 % interval 0.646-0.985, 12 texts)  macro-F1 0.8000  AUROC n/a  "
        "ECE 0.2235  NLL 0.4428"
    )
    calibration = {"ece_after": 0.1157, "nll_after": 0.3557}
    report = {"task": "t", "split": "test", "n": 12, "metrics": metrics, "calibration": calibration}
    head = eval_summary(report, None).splitlines()[0]
    assert head.endswith(
        "AUROC n/a  ECE 0.1157  NLL 0.3557 (calibrated, as predict gives them: eval.json's calibration; "
        "the head's softmax ECE 0.2235 / NLL 0.4428: its metrics)"
    )
    report["calibration"]["ece_floor_after"] = 0.0412  # beside the ECE: what perfect calibration would show
    head = eval_summary(report, None).splitlines()[0]
    assert "ECE 0.1157 (a perfectly calibrated model: 0.0412)  NLL 0.3557" in head


def test_error_among_answered_texts_is_undefined_when_every_text_abstains():
    rng = np.random.default_rng(1)
    val, yv = _batch(rng, 300, [1 / 3, 1 / 3, 1 / 3])
    profile = fit_profile(val, yv, UncertaintyConfig(), counts=np.array([100, 100, 100]))
    test, yt = _batch(rng, 200, [1 / 3, 1 / 3, 1 / 3])
    assert profile.abstain is not None
    profile.abstain.threshold = -1.0  # below every score: every text abstains
    s = actionable_report(profile, test, yt)["selective"]
    # it was 0.0, which a sweep's table averaged in as a perfect "selective error"
    assert s["test_coverage"] == 0.0 and s["test_error"] is None
    assert "test error n/a (every text abstains) at coverage 0.0000" in format_table(
        actionable_report(profile, test, yt)
    )
    profile.abstain.threshold = float("inf")  # none abstains: the error is the plain error
    for certified in (True, False):  # a target no threshold met on validation: eval says so
        profile.abstain.achievable = certified
        report = actionable_report(profile, test, yt)
        assert report["selective"]["certified"] is certified
        assert ("not certified on validation): test error" in format_table(report)) is not certified
        # another split is named as such, not as test
        assert "): validation error " in format_table({**report, "split": "validation"})
        # a flag without a threshold (too few held-out texts) is said to be inert, not to keep 95 %
        inert = {"score": "joint_knn", "tpr": 0.95, "flagged": 0.0, "set": False}
        assert "out-of-scope flag (joint_knn): inert, no threshold could be set" in format_table(
            {**report, "out_of_scope": inert}
        )
        active = format_table({**report, "out_of_scope": {**inert, "set": True, "flagged": 0.25}})
        assert (
            "out-of-scope flag (joint_knn, keeps 0.95 of in-scope texts): flags 0.2500 of these texts"
            in active
        )
    s = actionable_report(profile, test, yt)["selective"]
    pred = profile.calibrator.probs(test.logits).numpy().argmax(1)
    assert s["test_coverage"] == 1.0 and s["test_error"] == pytest.approx((pred != yt).mean())


def test_difficulty_bins_that_hold_every_text_are_said_with_thresholds_that_split_them(caplog):
    # a researcher's trial: sigma 0.94-0.97 on every text, so the paper's [0.8, 1.0] put all in "Semi-hard"
    from ucse.core.encoder import EncodedBatch
    from ucse.evaluation.evaluate import uncertainty_report

    rng = np.random.default_rng(0)
    n = 60
    sigma = rng.uniform(0.94, 0.97, n)  # var = sigma^2 in every dimension: each text's sigma exactly
    out = EncodedBatch(
        mean=rng.normal(size=(n, 4)), var=np.repeat(sigma[:, None] ** 2, 4, 1), logits=rng.normal(size=(n, 3))
    )
    labels = rng.integers(0, 3, n)
    with caplog.at_level("WARNING", logger="ucse.evaluation.evaluate"):
        report, _ = uncertainty_report(out, labels, [0.8, 1.0])
    assert report["difficulty_bins"]["Semi-hard"]["count"] == n
    (said,) = [r.getMessage() for r in caplog.records]
    lo, hi = np.quantile(sigma, [1 / 3, 2 / 3])
    assert f"all {n} texts fall in the Semi-hard difficulty bin" in said
    assert f"sigma_thresholds=[{lo:.3g},{hi:.3g}] splits them in thirds" in said
    caplog.clear()
    with caplog.at_level("WARNING", logger="ucse.evaluation.evaluate"):
        report, _ = uncertainty_report(out, labels, [float(lo), float(hi)])
    assert not caplog.records and all(b["count"] >= n // 4 for b in report["difficulty_bins"].values())


def test_evaluating_the_rows_a_refitted_head_trained_on_says_they_are_in_sample(
    tmp_path, tiny_bert_dir, caplog, capsys
):
    # a researcher's trial: split=validation of a default run scored AUROC 0.897 against ~0.79 on test,
    # without a word that head=auto had refitted on those rows
    import json

    from toy_tasks import own_rows, train_rows

    from ucse.cli.main import main

    train_rows(tmp_path, tiny_bert_dir, own_rows(240, seed=5))
    run = tmp_path / "run"
    assert json.loads((run / "metrics.json").read_text())["val"]["estimate"] == "cross-validated"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["selection"]["refit_test"]  # a small own file: the carved test rows trained it too
    with caplog.at_level("WARNING", logger="ucse.evaluation.evaluate"):
        assert main(["eval", f"run={run}", "split=validation", "plots=false"]) == 0
        said = [r.getMessage() for r in caplog.records if "in-sample" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith(
            "split=validation: the figures are in-sample: the shipped"
        )
        caplog.clear()
        # test: the shipped head trained on it as well (an ops trial archived its 100 % as the week's figure)
        assert main(["eval", f"run={run}", "plots=false", "overwrite=true"]) == 0
        said = [r.getMessage() for r in caplog.records if "in-sample" in r.getMessage()]
        held = f"metrics.json's test: accuracy {metrics['test']['accuracy']:.4f}"
        assert len(said) == 1 and "test included (data.refit_test)" in said[0] and held in said[0]
    report = json.loads((run / "eval.json").read_text())
    assert "data.refit_test" in report["in_sample"]
    assert ", in-sample: the shipped head trained on these rows)" in capsys.readouterr().out
    # which rows trained the shipped head, from metrics.json alone (read back from disk: may be damaged)
    from ucse.evaluation.evaluate import in_sample

    for selection, val, split, said in (
        ({}, {"estimate": "cross-validated"}, "validation", "refitted on train + validation"),
        ({}, {"estimate": "held-out, before refit"}, "validation", "split=test is held out"),
        ({}, {"estimate": "cross-validated"}, "test", None),
        ({}, {"estimate": "held out"}, "validation", None),
        ({"refit_test": 12}, {"estimate": "cross-validated"}, "test", "test included (data.refit_test)"),
        ({"refit_test": 12}, {"estimate": "held-out, before refit"}, "validation", "test included"),
        # head=logreg calibrated on a validation split: its refit took the test rows, not the validation's
        ({"refit_test": 12}, {"accuracy": 0.9}, "validation", None),
        ({"refit_test": 12}, {"accuracy": 0.9}, "test", "test included (data.refit_test)"),
        ("damaged", [], "validation", None),
    ):
        (run / "metrics.json").write_text(json.dumps(metrics | {"selection": selection, "val": val}))
        got = in_sample(run, split)
        assert got is None if said is None else said in got
    (run / "metrics.json").write_text(json.dumps(metrics))
    # with plots: a head without a variance branch says why it drew no difficulty bins
    with caplog.at_level("INFO", logger="ucse.evaluation.evaluate"):
        assert main(["eval", f"run={run}", "overwrite=true"]) == 0
    said = any(r.getMessage().startswith("no difficulty.png") for r in caplog.records)
    assert said != (run / "difficulty.png").exists()


def test_the_mteb_lines_say_whose_protocol_and_a_probe_heads_note():
    from ucse.cli.summary import eval_summary

    note = "a logistic-regression head: its embedding is the frozen pooled vector"
    report = {
        "mteb": {
            "trained_encoder_mu": {"task_name": "T", "main_score": 0.6363, "note": note},
            "raw_backbone_pooled": {"task_name": "T", "main_score": 0.6210},
        }
    }
    lines = eval_summary(report, None).splitlines()
    assert lines[0].startswith("MTEB T trained_encoder_mu: main score 0.6363 (mteb's own protocol")
    assert lines[0].endswith(f"; {note}") and not lines[1].endswith(note)


def test_a_flag_set_by_examples_is_reported_by_what_it_keeps():
    # A threshold set by data.ood_path's examples keeps what the examples made it keep (89 % in a user's
    # trial); eval said "keeps 0.95", the tpr that threshold never used.
    from ucse.config.uncertainty import OodConfig, OodScore
    from ucse.uncertainty.ood_detector import fit_ood

    rng = np.random.default_rng(2)
    val, yv = _batch(rng, 300, [1 / 3, 1 / 3, 1 / 3])
    profile = fit_profile(val, yv, UncertaintyConfig(), counts=np.array([100, 100, 100]))
    probs = profile.calibrator.probs(val.logits).numpy()
    msp = OodConfig(score=OodScore.msp)  # reads the probabilities alone (the features are not used)
    profile.ood = fit_ood(msp, val.mean, yv, 3, probs, val.logits, features=val.mean)
    test, yt = _batch(rng, 200, [1 / 3, 1 / 3, 1 / 3])
    test.pooled = test.mean  # what the flag is given (msp reads none of it)
    plain = actionable_report(profile, test, yt)["out_of_scope"]
    assert plain["tpr"] == 0.95 and "threshold_from" not in plain
    assert "keeps 0.95 of in-scope texts" in format_table(actionable_report(profile, test, yt))
    profile.ood.info.update(threshold_from="examples", inscope_kept=0.893, n_examples=20)
    report = actionable_report(profile, test, yt)
    assert report["out_of_scope"]["threshold_from"] == "examples"
    assert report["out_of_scope"]["heldout_kept"] == 0.893
    line = "out-of-scope flag (msp, threshold set by your out-of-scope examples, kept 0.89 of held-out"
    assert line in format_table(report) and "keeps 0.95" not in format_table(report)


def test_a_sample_without_some_labels_also_gets_the_macro_f1_of_the_labels_it_holds():
    # A monthly sample holding 38 of 77 labels read macro-F1 0.56 beside accuracy 0.91: each label predicted
    # but absent scores 0 (scikit-learn's default average). The line beside it: the labels the sample holds.
    from ucse.training.label_report import confusion_counts, per_label

    rng = np.random.default_rng(3)
    y = rng.choice(3, 200)  # labels 0-2 of 6
    pred = np.where(rng.random(200) < 0.8, y, rng.choice(6, 200))
    rows = per_label(confusion_counts(pred, y, 6), [f"l{i}" for i in range(6)])
    f1 = f1_score(y, pred, average="macro")
    metrics = {"accuracy": 0.8, "f1_macro": f1, "auroc": None, "ece": 0.1, "nll": 1.0}
    report = {"task": "t", "split": "march.csv", "n": 200, "metrics": metrics}
    lines = eval_summary({**report, "per_label": rows}, None)
    want = f1_score(y, pred, labels=[0, 1, 2], average="macro")
    assert f"macro-F1 over the 3 labels this split holds: {want:.4f} (3 of the run's 6 labels" in lines
    assert want > f1 + 0.2  # the premise: the absent labels pulled it down
    full = per_label(confusion_counts(y, y, 3), ["l0", "l1", "l2"])  # every label held: no such line
    assert "labels this split holds" not in eval_summary({**report, "per_label": full}, None)
    # under a prior, per_label holds predict's answers, not the head's argmax of the first line: a trial read
    # the line as the head's and the balanced prior's gain as a loss
    decisions = {"accuracy": 0.8, "balanced_accuracy": 0.7, "f1_macro": f1}
    shifted = {**report, "per_label": rows, "decisions": decisions, "calibration": {"prior": "balanced"}}
    said = [line for line in eval_summary(shifted, None).splitlines() if "labels this split holds" in line]
    assert len(said) == 1 and "(predict's answers, balanced prior)" in said[0]
    assert "count 0 in the macro-F1 above" in said[0]  # the headline: predict's answers
    order = eval_summary(shifted, None)
    assert order.index("with the balanced class prior") < order.index("labels this split holds")
    # the headline is predict's answers, the head's own argmax on the next line (two trials quoted the first)
    assert order.startswith("t march.csv (n=200): accuracy 0.8000 (95 % interval")
    assert (
        "; the head's own most probable labels (training mix; eval.json's metrics): accuracy 0.8000" in order
    )
    # an operating point for one label (uncertainty.decision) also makes predict's answers another basis
    rule = {"label": 1, "threshold": 0.3, "rule": "recall", "target": 0.8}
    decided = {**decisions, "accuracy": 0.85}
    ruled = {**report, "per_label": rows, "decisions": decided, "decision_rule": rule}
    text = eval_summary(ruled, None)
    assert text.startswith("t march.csv (n=200): accuracy 0.8500 (95 % interval")  # predict's answers first
    assert (
        "  predict's answers, with the decision rule: balanced accuracy 0.7000; the head's own most " in text
    )
    assert "(training mix; eval.json's metrics): accuracy 0.8000  macro-F1" in text
    assert "(predict's answers, decision rule)" in text
