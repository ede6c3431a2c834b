"""The out-of-scope flag of a trained run: which rows set its threshold, and what predict rows carry."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist
from toy_tasks import own_rows, train_rows

from ucse.config import ConfigError, build_config, from_yaml
from ucse.config.uncertainty import OodScore
from ucse.data import load_classification
from ucse.data.tasks import SPLITS
from ucse.inference.classifier import UcseClassifier
from ucse.training.auto_run import read_heldout
from ucse.uncertainty.ood_examples import youden_threshold


def _train(tmp: Path, tiny_bert_dir: Path, *extra: str):
    # data.refit=false: a single head calibrated on its validation split, the route these tests check (a
    # small validation split otherwise cross-fits head=logreg: tests/training/test_auto.py)
    return train_rows(tmp, tiny_bert_dir, own_rows(300, seed=11), "data.refit=false", *extra)


def test_a_single_head_sets_the_threshold_on_validation_and_rows_carry_the_flag(tmp_path, tiny_bert_dir):
    # (head=auto's refit and cross-validation routes: tests/training/test_auto.py.)
    _, profile = _train(tmp_path, tiny_bert_dir, "head=logreg", "uncertainty.ood.score=mahalanobis_entropy")
    info = profile.ood.info
    saved = json.loads((tmp_path / "run" / "head" / "calibration.json").read_text())["ood"]
    assert saved["score"] == "mahalanobis_entropy" and saved["info"] == info
    assert info["heldout"] == "validation" and info["n_train"] > info["n_heldout"]

    clf = UcseClassifier.from_pretrained(tmp_path / "run", device="cpu")
    texts = [r["text"] for r in own_rows(40, seed=12)] + ["zzz qqq xxyy", "0 0 0 0 0 0 0 0 0 0 0 0"]
    rows = clf.predict_with_uncertainty(texts)
    flags = np.array([r["ood"] for r in rows])
    scores = np.array([r["ood_score"] for r in rows])
    np.testing.assert_array_equal(flags, scores > profile.ood.threshold)
    assert flags.dtype == bool
    # The threshold, by hand: the ceil((n + 1) tpr)-th smallest score of the validation texts, scored here
    # through predict; the training rows' scores (the statistics' own rows) would set another one.
    cfg = from_yaml(tmp_path / "run" / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    held = {
        s: np.array([r["ood_score"] for r in clf.predict_with_uncertainty(data.texts(s))]) for s in SPLITS
    }
    n, tpr = len(held["validation"]), profile.ood.tpr
    assert n == info["n_heldout"]
    by_hand = np.sort(held["validation"])[math.ceil((n + 1) * tpr) - 1]
    on_train = np.sort(held["train"])[math.ceil((len(held["train"]) + 1) * tpr) - 1]
    # The fit scored the run's float16-cached states, predict scores float32 ones: each state rounded by up to
    # 2^-11 relative moves the score by about as much; a few times that, against a 35 % gap to the other rule.
    assert profile.ood.threshold == pytest.approx(by_hand, rel=4 * 2**-11)
    assert abs(on_train - by_hand) > 0.1 * abs(by_hand)


def test_the_default_flag_reads_the_heads_mu_beside_the_pooled_vector(tmp_path, tiny_bert_dir, monkeypatch):
    from ucse.uncertainty import train_split

    monkeypatch.setattr(train_split, "FILL_BLOCK", 7)  # the bank filled 7 rows at a time
    _, profile = _train(tmp_path, tiny_bert_dir, "uncertainty.ood.tpr=0.9")  # head=auto, refit: the defaults
    det = profile.ood
    assert det.score is OodScore.joint_knn and det.k == 1 and det.info["heldout"] == "selection models"
    clf = UcseClassifier.from_pretrained(tmp_path / "run", device="cpu")
    # The bank: the rows the shipped head trained on, as unit [mu / |mu|, pooled / (2 |pooled|)] rows, a
    # random subset as large as the held-out rows' fold banks (cross-validated: 4 of 5 folds, 240 -> 192).
    cfg = from_yaml(tmp_path / "run" / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    rows = data.texts("train") + data.texts("validation")
    n = len(rows)
    assert n == det.info["n_train"] == 240
    held_banks = read_heldout(tmp_path / "run" / "heldout.safetensors", 3)[3]
    assert held_banks.tolist() == [192] * n  # 5 folds of 48: every row's bank is the other 192
    keep = np.sort(np.random.default_rng(cfg.uncertainty.seed).choice(n, 192, replace=False))
    bank = _joint(clf.encode_gaussian([rows[i] for i in keep]))
    assert det.stats.bank.shape == bank.shape == (192, bank.shape[1]) and det.info["bank_rows"] == 192
    # The bank was read from the fp16 hidden-state cache, these rows from a fresh fp32 pass, and it is kept in
    # fp16: each rounding to 11 significant bits moves a unit-row component (|x| <= 1) by at most 4.9e-4.
    assert det.stats.bank.dtype == torch.float16
    np.testing.assert_allclose(det.stats.bank.double().numpy(), bank, atol=2e-3)
    # predict's ood_score is the distance to the nearest bank row, by brute force
    texts = [r["text"] for r in own_rows(30, seed=12)] + ["zzz qqq xxyy", "0 0 0 0 0 0 0 0"]
    want = cdist(_joint(clf.encode_gaussian(texts)), det.stats.bank.double().numpy()).min(1)
    got = np.array([r["ood_score"] for r in clf.predict_with_uncertainty(texts)])
    # the same bank on both sides; sqrt(2 - 2 cos) of float32 cosines is good to ~4.5e-4 near 0
    np.testing.assert_allclose(got, want, atol=1e-3)


def _joint(out) -> np.ndarray:
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    return unit(
        np.concatenate([unit(out.mean.astype(np.float64)), 0.5 * unit(out.pooled.astype(np.float64))], 1)
    )


def test_a_run_without_the_flag_says_null(tmp_path, tiny_bert_dir):
    _, profile = _train(tmp_path, tiny_bert_dir, "head=logreg", "uncertainty.ood.enabled=false")
    assert profile.ood is None
    rows = UcseClassifier.from_pretrained(tmp_path / "run", device="cpu").predict_with_uncertainty(["a b c"])
    assert rows[0]["ood"] is None and rows[0]["ood_score"] is None


@pytest.mark.parametrize("block", [7, 16384])
def test_streamed_training_statistics_equal_those_of_the_whole_split(
    tmp_path, tiny_bert_dir, monkeypatch, block
):
    # The profile's class Gaussians (on mu) and the flag's (on the pooled vectors) are fitted block by block
    # over the training split (blocks of 7 rows; or one block, run once and reused for the second pass);
    # they must equal a fit on all the split's outputs.
    from ucse.core.encoder import UcseEncoder
    from ucse.data import load_classification
    from ucse.uncertainty import train_split
    from ucse.uncertainty.density import fit_class_gaussians

    monkeypatch.setattr(train_split, "TRAIN_BLOCK", block)
    _, profile = _train(
        tmp_path,
        tiny_bert_dir,
        "head=textcnn",
        "recipe=paper",
        "optim.epochs=1",
        "uncertainty.ood.score=mahalanobis_entropy",  # a flag on class Gaussians: the streamed statistics
    )
    cfg = from_yaml(tmp_path / "run" / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    enc = UcseEncoder.from_dir(tmp_path / "run" / "head")
    train = train_split.encode_splits(cfg, enc, data, ("train",))["train"]
    y, c = data.labels("train"), len(data.label_names)
    for streamed, whole in (
        (profile.gaussians, fit_class_gaussians(train.mean, y, c)),
        (profile.ood.stats.gaussians, fit_class_gaussians(train.pooled, y, c)),
    ):
        # The head ran over other batches (blocks of 7, then length-sorted): its float32 outputs differ by a
        # few ulps (2^-23 relative), the means by as much, and the precision by that times its condition.
        scale = np.abs(whole.means.numpy()).max()
        np.testing.assert_allclose(streamed.means.numpy(), whole.means.numpy(), rtol=0, atol=1e-6 * scale)
        p = whole.precision.numpy()
        tol = 1e-6 * np.linalg.cond(p) * np.abs(p).max()
        np.testing.assert_allclose(streamed.precision.numpy(), p, rtol=0, atol=tol)
    assert profile.info["n_train"] == len(y) and profile.ood.info["n_train"] == len(y)


@pytest.mark.parametrize("weighted", [False, True])
def test_youden_threshold_is_the_brute_force_best_cut(weighted):
    rng = np.random.default_rng(0)
    for ties in (False, True):
        ins, ex = rng.normal(size=60), rng.normal(1.2, 1.0, size=25)
        # A target mix weights the in-scope rows (3 labels, weights 0.2 / 1 / 4); equal weights otherwise.
        w = np.array([0.2, 1.0, 4.0])[rng.integers(0, 3, size=60)] if weighted else np.ones(60)
        if ties:
            ins, ex = np.round(ins, 1), np.round(ex, 1)  # shared values: the cut counts both sides at once
        t, rec = youden_threshold(
            torch.as_tensor(ins), torch.as_tensor(ex), torch.as_tensor(w) if weighted else None
        )
        cuts = np.unique(np.concatenate([ins, ex]))
        kept = np.array([w[ins <= c].sum() / w.sum() for c in cuts])
        j = kept + np.array([np.mean(ex > c) for c in cuts]) - 1
        assert rec["youden_j"] == pytest.approx(j.max(), abs=1e-12)
        best = np.flatnonzero(np.isclose(j, j.max(), rtol=0, atol=1e-12)).max()
        assert t == cuts[best]  # ties: the largest cut keeps the most in scope
        assert rec["inscope_kept"] == pytest.approx(w[ins <= t].sum() / w.sum())
        assert rec["examples_flagged"] == pytest.approx(np.mean(ex > t))


def test_out_of_scope_examples_set_the_threshold(tmp_path, tiny_bert_dir):
    oos = ["zzz qqq xxyy", "0 0 0 0 0 0", "lorem ipsum dolor", "qwerty uiop", "%% && ##", "x y z w v u"] * 3
    (tmp_path / "oos.txt").write_text("\n".join(oos) + "\n")
    _, tuned = _train(tmp_path, tiny_bert_dir, "head=logreg", f"data.ood_path={tmp_path / 'oos.txt'}")
    info = tuned.ood.info
    assert info["threshold_from"] == "examples" and info["n_examples"] == len(oos)
    saved = json.loads((tmp_path / "run" / "head" / "calibration.json").read_text())["ood"]
    assert saved["info"]["examples_flagged"] == info["examples_flagged"]
    assert saved["threshold"] == pytest.approx(tuned.ood.threshold)
    # The examples' scores through the saved model: their flagged share is the recorded one (a score within
    # float round-off of the cut may fall either side: one example's worth of tolerance).
    clf = UcseClassifier.from_pretrained(tmp_path / "run", device="cpu")
    rows = clf.predict_with_uncertainty(oos)
    share = np.mean([r["ood"] for r in rows])
    assert abs(share - info["examples_flagged"]) <= 1 / len(oos) + 1e-12
    # threshold=tpr keeps the in-scope guarantee and only reports what the examples show.
    _, kept = _train(
        tmp_path / "b",
        tiny_bert_dir,
        "head=logreg",
        f"data.ood_path={tmp_path / 'oos.txt'}",
        "uncertainty.ood.threshold=tpr",
    )
    assert "threshold_from" not in kept.ood.info and 0 <= kept.ood.info["examples_flagged"] <= 1
    # The summary says how the threshold was set (not the keep rate the examples replaced).
    from ucse.summary import describe_flag

    assert f"threshold set by {len(oos)} out-of-scope examples" in describe_flag(tuned.ood)
    assert "flags" in describe_flag(kept.ood) and "keeps 95.00 % of in-scope texts" in describe_flag(kept.ood)


def test_a_missing_examples_file_fails_before_training(tmp_path):
    with pytest.raises(ConfigError, match="data.ood_path=.*no such file"):
        build_config([f"data.ood_path={tmp_path / 'nope.txt'}"])
    with pytest.raises(ConfigError, match="threshold=examples needs out-of-scope examples"):
        build_config(["uncertainty.ood.threshold=examples"])


def test_under_a_target_prior_the_threshold_is_weighted_to_the_target_mix(tmp_path, tiny_bert_dir, capsys):
    # The validation texts' scores, recomputed through the saved model, weighted by target share over their
    # share of those texts: the saved threshold is their largest per-label weighted quantile (a score moves by
    # <= 2e-3 between the fp16 cache and a fresh fp32 pass, and a weighted quantile moves by no more).
    from ucse.cli.main import main
    from ucse.summary import describe_flag
    from ucse.uncertainty.class_prior import shift_weights
    from ucse.uncertainty.keep_threshold import keep_threshold, target_keep_threshold

    shares = "uncertainty.calibration.target_shares.music=0.8"
    _, profile = _train(
        tmp_path,
        tiny_bert_dir,
        "head=logreg",
        "uncertainty.ood.score=knn",
        "uncertainty.ood.tpr=0.8",  # 24 validation texts: 0.95 of a mix this far from theirs needs ~46
        "uncertainty.calibration.prior=target",
        shares,
    )
    det = profile.ood
    assert det.info["mix"] == "target" and "of in-scope texts mixed like the target" in describe_flag(det)
    cfg = from_yaml(tmp_path / "run" / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    clf = UcseClassifier.from_pretrained(tmp_path / "run", device="cpu")
    s = np.array([r["ood_score"] for r in clf.predict_with_uncertainty(data.texts("validation"))])
    y = data.labels("validation")
    target = np.asarray(profile.info["class_prior"]["target_shares"])
    weighted = target_keep_threshold(
        torch.as_tensor(s), torch.as_tensor(y), shift_weights(target, y), det.tpr
    )
    assert det.threshold == pytest.approx(weighted, abs=2e-3)
    plain = keep_threshold(s, det.tpr)
    assert (
        math.isfinite(weighted) and abs(weighted - plain) > 4e-3
    )  # the mix moves the cut by more than the scores' tolerance
    # Back to the training mix with `ucse calibrate`: the plain quantile, and the summary drops the mix.
    assert (
        main(
            [
                "calibrate",
                f"run={tmp_path / 'run'}",
                "uncertainty.calibration.prior=train",
                "uncertainty.calibration.target_shares=null",
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out  # before -> after
    assert (
        "texts mixed like the target: threshold" in shown
        and "-> knn, keeps 80.00 % of in-scope texts:" in shown
    )
    saved = json.loads((tmp_path / "run" / "head" / "calibration.json").read_text())["ood"]
    assert "mix" not in saved["info"] and saved["threshold"] == pytest.approx(plain, abs=2e-3)
    # The balanced prior weights the held-out texts to every label alike (a uniform target).
    run = ["calibrate", f"run={tmp_path / 'run'}", "uncertainty.calibration.prior=balanced"]
    assert main(run) == 0
    assert "texts mixed evenly across the labels" in capsys.readouterr().out
    saved = json.loads((tmp_path / "run" / "head" / "calibration.json").read_text())["ood"]
    even = target_keep_threshold(
        torch.as_tensor(s), torch.as_tensor(y), shift_weights(np.full(3, 1 / 3), y), 0.8
    )
    assert saved["info"]["mix"] == "balanced" and saved["threshold"] == pytest.approx(even, abs=2e-3)


def test_examples_under_a_target_prior_weigh_the_in_scope_share_to_the_target_mix(tmp_path, tiny_bert_dir):
    # Youden's J with the held-out in-scope rows weighted to the target: the recorded in-scope share is the
    # weighted share of the validation texts at or under the saved threshold (their scores recomputed by
    # predict; a score within 2e-3 of the cut may fall either side, so the bound is the weight in that band).
    from ucse.uncertainty.class_prior import shift_weights

    oos = ["zzz qqq xxyy", "0 0 0 0 0 0", "lorem ipsum dolor", "qwerty uiop", "%% && ##", "x y z w v u"] * 3
    (tmp_path / "oos.txt").write_text("\n".join(oos) + "\n")
    _, profile = _train(
        tmp_path,
        tiny_bert_dir,
        "head=logreg",
        "uncertainty.ood.score=knn",
        f"data.ood_path={tmp_path / 'oos.txt'}",
        "uncertainty.calibration.prior=target",
        "uncertainty.calibration.target_shares.music=0.8",
    )
    det = profile.ood
    assert det.info["threshold_from"] == "examples" and det.info["mix"] == "target"
    cfg = from_yaml(tmp_path / "run" / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    clf = UcseClassifier.from_pretrained(tmp_path / "run", device="cpu")
    s = np.array([r["ood_score"] for r in clf.predict_with_uncertainty(data.texts("validation"))])
    y = data.labels("validation")
    w = shift_weights(np.asarray(profile.info["class_prior"]["target_shares"]), y)[y]  # (N,)
    kept = w[s <= det.threshold].sum() / w.sum()
    band = w[np.abs(s - det.threshold) <= 2e-3].sum() / w.sum()
    assert abs(det.info["inscope_kept"] - kept) <= band + 1e-12
    assert abs(kept - np.mean(s <= det.threshold)) > band  # the weights moved the share
