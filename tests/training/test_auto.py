"""recipe=auto and head=auto: the choice rule by hand, the step budget, end-to-end runs on the tiny BERT."""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from scipy.spatial.distance import cdist
from scipy.special import log_softmax

from ucse.config import ConfigError, HeadType
from ucse.config.run_layout import RunFolder
from ucse.config.uncertainty import OodScore
from ucse.heads import load_head
from ucse.training import auto as auto_mod
from ucse.training import auto_run as auto_run_mod
from ucse.training import fit_head as fit_head_mod
from ucse.training import preflight, train
from ucse.training.auto import WEIGHTS, fit_temperature, predict_outputs
from ucse.training.auto_run import load_heldout, read_heldout
from ucse.training.blend_choice import choose_blend
from ucse.training.fit_head import fit_head, schedule, step_budget
from ucse.training.logreg import fit_probe
from ucse.training.neighbours import MAX_K
from ucse.uncertainty.fit import fit_run_uncertainty
from ucse.uncertainty.keep_threshold import keep_threshold


def test_step_budget_by_hand():
    # 8 per class of Banking77 (616 texts) at batch 32: max(10000, min(4928, 20000)) = 10000 samples
    assert step_budget(616, 32) == math.ceil(10_000 / 32)
    # full Banking77 train (9002) at 64: min(72016, max(45010, 20000)) = 45010 samples = 5 epochs
    assert step_budget(9002, 64) == math.ceil(45_010 / 64)
    # a few dozen texts: 25 epochs at most
    assert step_budget(40, 32) == math.ceil(1000 / 32)


def test_temperature_is_the_nll_minimiser():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 300)
    logits = rng.normal(size=(300, 4)) + 3.0 * np.eye(4)[y]  # overconfident-ish
    t = fit_temperature(logits, y, prior_std=None)  # the plain NLL minimiser (auto uses the MAP default)

    def nll(tt):
        return -log_softmax(logits / tt, axis=1)[np.arange(300), y].mean()

    grid = np.exp(np.linspace(-3, 3, 2001))  # brute force, step 0.3 % in T
    assert nll(t) <= min(nll(g) for g in grid) + 1e-6


def _logits(y, c, strength, rng):
    return rng.normal(size=(len(y), c)) + strength * np.eye(c)[y]


def test_choice_prefers_the_probe_unless_the_other_model_is_clearly_better():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 5, 600)
    good, noise = _logits(y, 5, 4.0, rng), _logits(y, 5, 0.0, rng)
    assert choose_blend(noise, good, y)["weight"] == 0.0  # TextCNN useless: the probe alone
    clear = choose_blend(good, noise, y)
    assert clear["weight"] == 1.0 and clear["best_weight"] == 1.0  # the TextCNN alone
    same = choose_blend(good, good.copy(), y)
    assert same["weight"] == 0.0  # a tie goes to the simpler model
    # NLLs reported per weight are those of the tempered blend, recomputed here by hand.
    ta, tb = clear["t_gaussian"], clear["t_probe"]
    p = 0.5 * np.exp(log_softmax(good / ta, 1)) + 0.5 * np.exp(log_softmax(noise / tb, 1))
    assert clear["nll"]["0.5"] == pytest.approx(-np.log(p[np.arange(600), y]).mean(), rel=1e-9)


def test_the_choice_is_the_probe_most_weight_within_one_standard_error_of_the_best():
    # The rule the README states, by hand: per-row NLLs of each blend at the reported temperatures; the
    # best mean; then the first weight from the probe's end whose mean excess over the best is at most
    # the standard error of that paired excess. Near-equal models, where the margin decides.
    outcomes = set()
    for seed in range(4):
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 5, 600)
        probe = _logits(y, 5, 2.0, rng)
        for bonus in (0.1, 0.2, 0.4):
            gaussian = probe + 0.5 * rng.normal(size=probe.shape) + bonus * np.eye(5)[y]
            got = choose_blend(gaussian, probe, y)
            pa = np.exp(log_softmax(gaussian / got["t_gaussian"], 1))
            pb = np.exp(log_softmax(probe / got["t_probe"], 1))
            nll = {w: -np.log((w * pa + (1 - w) * pb)[np.arange(600), y]) for w in WEIGHTS}
            best = min(WEIGHTS, key=lambda w: nll[w].mean())
            chosen = next(
                w
                for w in WEIGHTS
                if (nll[w] - nll[best]).mean() <= (nll[w] - nll[best]).std(ddof=1) / np.sqrt(600)
            )
            assert (got["best_weight"], got["weight"]) == (best, chosen), (seed, bonus)
            outcomes.add("margin decided" if chosen != best else "best" if best else "probe")
    assert outcomes == {"margin decided", "best", "probe"}  # the cases exercise every branch of the rule


def test_auto_cross_validates_on_a_small_validation_split(tiny_run_cfg, monkeypatch, caplog):
    calls = []  # (rows, C asked for, C used) of every probe fit

    def spy(x, y, num_classes, folds, seed, max_iter, c_value=None, groups=None):
        clf, info = fit_probe(x, y, num_classes, folds, seed, max_iter, c_value, groups)
        calls.append((len(y), c_value, info["C"]))
        return clf, info

    monkeypatch.setattr(auto_mod, "fit_probe", spy)
    heads = []  # (TextCNN, the rows it trained on) of every fit: the k fold heads first, then any refit

    def spy_head(cfg, head_cfg, train_rows, *args):
        fit = fit_head(cfg, head_cfg, train_rows, *args)
        heads.append((fit.head, train_rows[0]))
        return fit

    monkeypatch.setattr(auto_mod, "fit_head", spy_head)
    cfg = tiny_run_cfg("recipe=auto", "head=auto")
    with caplog.at_level(logging.INFO, logger="ucse.training.auto"):
        result = train(cfg)
    m, run = result.metrics, result.run_dir
    sel = m["selection"]
    assert sel["mode"] == "cross-validation" and sel["folds"] == 5
    # said fold by fold (a trial's long emails spent 13 silent minutes here and looked hung)
    said = [r.getMessage() for r in caplog.records if "head=auto: TextCNN fold" in r.getMessage()]
    assert [s.split(" done")[0] for s in said] == [f"head=auto: TextCNN fold {i} of 5" for i in range(1, 6)]
    # The shipped probe's C* is chosen on every row. Each fold's probe chooses its own C inside the fold (the
    # selection never sees a C picked on its held-out texts) and, where that differs, is refitted at C* (the
    # logit scale the temperatures are fitted at); the refit on every row keeps C*.
    n, asked, c_star = calls[0]
    assert n == sel["n_heldout"] and asked is None and c_star == sel["probe"]["C"]
    nested = [c for c in calls[1:] if c[1] is None]
    assert len(nested) == 5 and sum(c[0] for c in nested) == 4 * n  # each row in 4 of 5 folds' train
    fixed = [c for c in calls[1:] if c[1] is not None]
    assert all(asked == used == c_star for _, asked, used in fixed)
    assert len(fixed) == sum(used != c_star for _, _, used in nested) + (sel["weight"] < 1)
    assert m["head"] == {0.0: "logreg", 1.0: "textcnn"}.get(sel["weight"], "blend")
    assert m["val"]["estimate"] == "cross-validated"
    # The estimate is the selection's nested out-of-fold accuracy at the chosen weight, not the calibration
    # rows' (their probe part is at C*, chosen on the held-out texts too)
    assert m["val"]["accuracy"] == pytest.approx(sel["accuracy"][str(sel["weight"])], abs=1e-12)
    # ... label by label too (heldout_per_label: every train + validation row, held out once)
    held = m["heldout_per_label"]
    assert [r["label"] for r in held] == ["class_0", "class_1", "class_2"]
    assert sum(r["support"] for r in held) == sum(r["predicted"] for r in held) == sel["n_heldout"]
    right = sum(round(r["recall"] * r["support"]) for r in held)
    assert right / sel["n_heldout"] == pytest.approx(m["val"]["accuracy"], abs=1e-9)
    # The saved head is the one measured: its test accuracy from the files equals metrics.json's.
    head, meta = load_head(run / "head")
    assert head.spec.config.type.value == m["head"]
    heldout, labels = load_heldout(RunFolder(run).heldout, 3)
    assert len(labels) == sel["n_heldout"] and heldout.logits.shape == (len(labels), 3)
    assert m["test"]["accuracy"] > 0.6  # the cue task is learnable by every candidate
    assert not (run / "checkpoints").exists()  # fitted in memory
    # The out-of-scope flag (joint_knn, the default): its bank is every row the shipped head saw, its
    # threshold set on each row's distances under the fold models that held it out (saved ascending).
    d = read_heldout(RunFolder(run).heldout, 3)[2]
    assert d.shape == (n, min(MAX_K, n - math.ceil(n / 5))) and (np.diff(d, axis=1) >= 0).all()
    # By brute force: each row against its fold's training rows, in the joint space of that fold's TextCNN mu
    # (or the probe's unit vectors, its mu) and the unit pooled vector at half weight.
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    rows = heads[0][1].base
    run_as_predict = predict_outputs(cfg, torch.device("cpu"))  # the run's heads, run as the run ran them
    pooled = unit(_pool_by_hand(rows, cfg.backbone.pooling))
    for head, fold_rows in heads[:5]:
        tr = fold_rows.indices
        te = np.setdiff1d(np.arange(n), tr)
        mu = run_as_predict(head, rows).mean if sel["weight"] > 0 else pooled
        joint = unit(np.concatenate([unit(mu), 0.5 * pooled], axis=1))
        want = np.sort(cdist(joint[te], joint[tr]), axis=1)[:, : d.shape[1]]
        np.testing.assert_allclose(d[te], want, atol=1e-3)  # float32 rows: ~4.5e-4 near 0 (holdout test)
    profile = fit_run_uncertainty(run)
    ood = profile.ood.info
    assert ood["heldout"] == "selection models" and ood["n_heldout"] == ood["n_train"] == sel["n_heldout"]
    assert profile.ood.threshold == keep_threshold(d[:, 0], profile.ood.tpr)  # k = 1: the nearest row
    # Beyond the bank cap the default is a score on the pooled vectors alone, with the cross-fitted threshold
    # (no head shaped those vectors).
    ucfg = dataclasses.replace(cfg.uncertainty)
    ucfg.ood = dataclasses.replace(ucfg.ood, max_bank_rows=n - 1)
    capped = fit_run_uncertainty(run, ucfg).ood
    assert capped.score is OodScore.mahalanobis_entropy and capped.info["heldout"] == "cross-fitted"
    # A neighbour beyond those saved is refused naming the largest k the run can serve.
    ucfg.ood = dataclasses.replace(cfg.uncertainty.ood, k=d.shape[1] + 1)
    with pytest.raises(ValueError, match=f"choose uncertainty.ood.k <= {d.shape[1]}"):
        fit_run_uncertainty(run, ucfg)


def test_a_validation_split_selects_alone_from_max_200_and_5_per_label_texts():
    # max(200, 5 x 3) = 200 texts for 3 labels; max(200, 5 x 41) = 205 for 41
    assert preflight.cross_validates(199, 3) and not preflight.cross_validates(200, 3)
    assert preflight.cross_validates(204, 41) and not preflight.cross_validates(205, 41)


def test_the_selection_textcnn_is_its_best_validation_nll_state_not_its_last(tiny_run_cfg, monkeypatch):
    monkeypatch.setattr(preflight, "HOLDOUT_MIN", 5)
    seen, fits = [], []  # (val NLL, head state) at every validation; (fit, its validations) per TextCNN fit
    real_end = fit_head_mod.KeepBest.on_validation_end

    def record(self, trainer, module):
        state = {k: v.detach().clone() for k, v in module.head.state_dict().items()}
        seen.append((float(trainer.callback_metrics["val/ce"]), state))
        real_end(self, trainer, module)

    def spy(*args):
        seen.clear()
        fit = fit_head(*args)
        fits.append((fit, list(seen)))
        return fit

    monkeypatch.setattr(fit_head_mod.KeepBest, "on_validation_end", record)
    monkeypatch.setattr(auto_mod, "fit_head", spy)
    # a step size that overshoots: validation NLL rises after its best epoch, so best and last differ
    train(tiny_run_cfg("recipe=auto", "head=auto", "data.val_fraction=0.3", "optim.lr=0.05"))
    fit, curve = fits[0]  # the selection model, the one fitted with validation rows
    best = min(range(len(curve)), key=lambda i: curve[i][0])  # ties: the earliest, as KeepBest keeps
    assert best < len(curve) - 1 and curve[best][0] < curve[-1][0]  # the premise: the last is not the best
    shipped = fit.head.state_dict()
    for name, value in curve[best][1].items():  # the best epoch's weights, exactly
        assert torch.equal(shipped[name], value.float()), name
    assert any(not torch.equal(shipped[k], v.float()) for k, v in curve[-1][1].items())
    assert fit.best_val_nll == curve[best][0]


@pytest.mark.parametrize("refit", [True, False])
def test_auto_selects_on_the_validation_split_when_it_is_large(tiny_run_cfg, monkeypatch, refit):
    monkeypatch.setattr(preflight, "HOLDOUT_MIN", 5)
    selection = {}  # the first TextCNN fitted (the selection model) and the states it saw

    def spy(cfg, head_cfg, train_rows, val_rows, *args):
        fit = fit_head(cfg, head_cfg, train_rows, val_rows, *args)
        if not selection:
            selection.update(head=fit.head, states={"train": train_rows[0], "validation": val_rows[0]})
        return fit

    monkeypatch.setattr(auto_mod, "fit_head", spy)
    cfg = tiny_run_cfg("recipe=auto", "head=auto", "data.val_fraction=0.3", f"data.refit={refit}")
    result = train(cfg)
    m, sizes = result.metrics, result.metrics["data"]["sizes"]
    sel = m["selection"]
    assert sel["mode"] == "holdout" and sel["n_heldout"] == sizes["validation"]
    assert sel["textcnn"]["best_step"] >= 1 and sel["textcnn"]["best_val_nll"] > 0
    ood = fit_run_uncertainty(result.run_dir).ood.info
    assert ood["n_heldout"] == sizes["validation"]  # the flag's threshold: validation rows either way ...
    if not refit:  # shipped as selected: the validation rows are unseen, the profile is fitted on them
        assert ood["heldout"] == "validation" and ood["n_train"] == sizes["train"]
        assert "refit" not in sel and not RunFolder(result.run_dir).heldout.exists()
        assert "estimate" not in m["val"]
        return
    # Refitted on train + validation: the selection models' validation outputs are what the profile uses,
    # and what the estimate and its per-label rows are of.
    held = m["heldout_per_label"]
    assert (
        m["val"]["estimate"] == "held-out, before refit"
        and sum(r["support"] for r in held) == sizes["validation"]
    )
    right = sum(round(r["recall"] * r["support"]) for r in held)
    assert right / sizes["validation"] == pytest.approx(m["val"]["accuracy"], abs=1e-9)
    assert ood["heldout"] == "selection models" and ood["n_train"] == sizes["train"] + sizes["validation"]
    # The flag's held-out distances, by brute force: validation rows to the training rows in the joint space
    # of the selection TextCNN's mu (or the probe's unit vectors, its mu) and the unit pooled vector at
    # half weight.
    states = selection["states"]
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    pooled = {s: unit(_pool_by_hand(states[s], cfg.backbone.pooling)) for s in ("train", "validation")}
    run_as_predict = predict_outputs(cfg, torch.device("cpu"))  # the run's heads, run as the run ran them
    head = selection["head"]
    mu = {s: run_as_predict(head, states[s]).mean if sel["weight"] > 0 else pooled[s] for s in pooled}
    joint = {s: unit(np.concatenate([unit(mu[s]), 0.5 * pooled[s]], axis=1)) for s in pooled}
    want = np.sort(cdist(joint["validation"], joint["train"]), axis=1)[:, :MAX_K]
    # float32 unit rows: cosines to ~1e-7, so a distance sqrt(2 - 2 cos) to ~sqrt(2e-7) = 4.5e-4 near 0
    np.testing.assert_allclose(read_heldout(RunFolder(result.run_dir).heldout, 3)[2], want, atol=1e-3)
    assert sel["refit"]["rows"] == sizes["train"] + sizes["validation"]
    heldout, labels = load_heldout(RunFolder(result.run_dir).heldout, 3)
    assert len(labels) == sizes["validation"] and m["val"]["estimate"] == "held-out, before refit"
    assert m["val"]["accuracy"] == pytest.approx(np.mean(heldout.logits.argmax(1) == labels), abs=1e-6)
    if 0 < sel["weight"]:
        assert sel["textcnn"]["refit_steps"] >= sel["textcnn"]["steps"]  # a budget for more rows
    assert m["test"]["accuracy"] > 0.6


def _pool_by_hand(states, pooling: str) -> np.ndarray:
    hidden, mask = states.batch(list(range(len(states))))  # (N, T, H), (N, T)
    h, m = hidden.double().numpy(), mask.double().numpy()[..., None]
    assert pooling in ("mean", "cls")
    return (h * m).sum(1) / m.sum(1) if pooling == "mean" else h[:, 0]


def test_paper_recipe_keeps_the_configured_schedule(tiny_run_cfg):
    cfg = tiny_run_cfg("recipe=paper", "head=auto", "optim.epochs=2")
    from ucse.training.preflight import check_run

    check_run(cfg)
    assert cfg.head.type is HeadType.textcnn  # the paper's head
    schedule(cfg, 616)
    assert cfg.optim.epochs == 2 and cfg.optim.batch_size == 16
    auto = tiny_run_cfg("recipe=auto", "head=textcnn", "optim.batch_size=64")
    schedule(auto, 616)
    assert auto.optim.batch_size == 32 and auto.optim.epochs == math.ceil(step_budget(616, 32) * 32 / 616)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (("recipe=paper", "head=blend"), "recipe=auto only"),
        (("recipe=auto", "head=auto", "devices=2"), "devices=1"),
        (("recipe=auto", "head=auto", "ckpt_path=last"), "no checkpoint"),
        (("head.logreg_folds=1",), "logreg_folds"),
    ],
)
def test_contradictions_fail_before_anything_runs(tiny_run_cfg, overrides, match):
    with pytest.raises(ConfigError, match=match):
        tiny_run_cfg(*overrides)


def test_tampered_heldout_file_is_refused(tmp_path):
    good = {"mean": torch.zeros(4, 2), "logits": torch.zeros(4, 3), "labels": torch.tensor([0, 1, 2, 0])}
    save_file(good, str(tmp_path / "ok.safetensors"))
    out, y = load_heldout(tmp_path / "ok.safetensors", 3)
    assert y.tolist() == [0, 1, 2, 0]
    assert read_heldout(tmp_path / "ok.safetensors", 3)[2] is None
    dist = torch.tensor([[0.1, 0.2], [0.0, 0.0], [1.9, 2.0], [0.5, 1.0]])
    save_file({**good, "distances": dist}, str(tmp_path / "okd.safetensors"))
    assert read_heldout(tmp_path / "okd.safetensors", 3)[2].tolist() == dist.tolist()
    assert read_heldout(tmp_path / "okd.safetensors", 3)[3] is None  # a run before bank sizes were kept
    sizes = torch.tensor([3, 3, 2, 2])
    save_file({**good, "distances": dist, "bank_rows": sizes}, str(tmp_path / "okb.safetensors"))
    assert read_heldout(tmp_path / "okb.safetensors", 3)[3].tolist() == [3, 3, 2, 2]
    for name, bad in [
        ("smallbank", {**good, "distances": dist, "bank_rows": torch.tensor([3, 3, 1, 2])}),  # < 2 kept
        ("bankrows", {**good, "distances": dist, "bank_rows": sizes[:3]}),
        ("bankfloat", {**good, "distances": dist, "bank_rows": sizes.float()}),
        ("banknodist", {**good, "bank_rows": sizes}),  # sizes of distances that are not there
        ("descending", {**good, "distances": dist.flip(1)}),
        ("beyond", {**good, "distances": dist + 0.5}),
        ("rows", {**good, "distances": dist[:3]}),
        ("float64", {**good, "distances": dist.double()}),
        ("nan", {**good, "logits": torch.full((4, 3), float("nan"))}),
        ("shape", {**good, "logits": torch.zeros(4, 2)}),
        ("label", {**good, "labels": torch.tensor([0, 1, 2, 3])}),
        ("extra", {**good, "x": torch.zeros(1)}),
    ]:
        save_file(bad, str(tmp_path / f"{name}.safetensors"))
        with pytest.raises(ValueError, match=f"{name}.safetensors"):
            load_heldout(tmp_path / f"{name}.safetensors", 3)
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(ValueError, match="not a readable"):
        load_heldout(tmp_path / "junk.safetensors", 3)
    assert load_heldout(tmp_path / "absent.safetensors", 3) is None


def test_the_cross_validated_estimate_is_the_selection_s_own(tiny_run_cfg, monkeypatch):
    """The run's accuracy estimate is the nested out-of-fold one the choice was made on.

    The calibration rows' probe part is refitted at C*, the C chosen on every row (held-out texts included).
    Made useless here (C = 1e-6: near-uniform probabilities), it must not move the estimate (read from those
    rows, this run's estimate was 0.933 against the selection's 0.908).
    """
    real = auto_mod.fit_probe_head

    def useless_at_c_star(cfg, x, y, c, h, c_value=None, groups=None):
        return real(cfg, x, y, c, h, None if c_value is None else 1e-6, groups)

    monkeypatch.setattr(auto_mod, "fit_probe_head", useless_at_c_star)
    monkeypatch.setattr(auto_run_mod, "WEIGHTS", (0.0, 0.25, 1.0))  # head=blend: w = 0.25 only
    m = train(tiny_run_cfg("recipe=auto", "head=blend")).metrics
    sel = m["selection"]
    assert sel["mode"] == "cross-validation" and sel["weight"] == 0.25
    assert m["val"]["estimate"] == "cross-validated"
    assert m["val"]["accuracy"] == pytest.approx(sel["accuracy"]["0.25"], abs=1e-12)


def test_the_cross_validated_choice_keeps_copies_of_a_text_in_one_fold(tiny_run_cfg, monkeypatch):
    # the run hands the copies of each text among train + validation (text_groups, tested in
    # tests/data/test_duplicates.py) to the folds, which keep each group whole (tests/training/test_logreg.py)
    from ucse.training import run as run_mod
    from ucse.training.logreg import cv_splits

    given, seen, made = [], [], []

    def groups(texts):  # every text in a pair: what a doubled file gives
        given.append(np.arange(len(texts)) // 2)
        return given[-1]

    def spy(y, folds, seed, groups=None):
        seen.append(groups)
        made[:] = cv_splits(y, folds, seed, groups)
        return list(made)

    probe_groups = []  # the groups each probe's C search was given (None: C fixed, or plain folds)

    def probe_spy(x, y, num_classes, folds, seed, max_iter, c_value=None, groups=None):
        probe_groups.append(None if c_value is not None else groups)
        return fit_probe(x, y, num_classes, folds, seed, max_iter, c_value, groups)

    monkeypatch.setattr(run_mod, "text_groups", groups)
    monkeypatch.setattr(auto_mod, "cv_splits", spy)
    monkeypatch.setattr(auto_mod, "fit_probe", probe_spy)
    result = train(tiny_run_cfg("recipe=auto", "head=auto"))
    assert result.metrics["selection"]["mode"] == "cross-validation"
    assert len(seen) == 1 and np.array_equal(seen[0], given[0])
    # the shipped probe's C search on every row, then each fold's on its training rows, keep copies together
    assert np.array_equal(probe_groups[0], given[0])
    searched = [g for g in probe_groups[1:] if g is not None]
    assert len(searched) == 5
    for (tr, _), fold_groups in zip(made, searched):
        assert np.array_equal(fold_groups, given[0][tr])
    # data.group_copies=false: plain folds, as the plain carve
    result = train(tiny_run_cfg("recipe=auto", "head=auto", "data.group_copies=false", "overwrite=true"))
    assert result.metrics["selection"]["mode"] == "cross-validation"
    assert len(given) == 1 and len(seen) == 2 and seen[1] is None


def test_logreg_on_a_small_validation_split_is_cross_fitted(tiny_run_cfg, monkeypatch):
    # head=logreg calibrated on a validation slice of a dozen texts certified no abstention target and set
    # no out-of-scope threshold (an estimator on 120 texts); now it ships the probe fitted on train +
    # validation and is calibrated on its out-of-fold logits over all of them, as head=auto is.
    from sklearn.linear_model import LogisticRegression

    seen = {}
    real_features, real_splits = auto_mod.probe_features, auto_mod.cv_splits

    def features(rows, pooling):
        seen["rows"] = rows
        return real_features(rows, pooling)

    def splits(y, folds, seed, groups=None):
        seen["y"], seen["folds"] = y, real_splits(y, folds, seed, groups)
        return seen["folds"]

    monkeypatch.setattr(auto_mod, "probe_features", features)
    monkeypatch.setattr(auto_mod, "cv_splits", splits)
    cfg = tiny_run_cfg("head=logreg")
    result = train(cfg)
    m, run = result.metrics, result.run_dir
    n = m["data"]["sizes"]["train"] + m["data"]["sizes"]["validation"]
    assert preflight.cross_validates(m["data"]["sizes"]["validation"], 3)  # the premise: a small slice
    sel = m["selection"]
    assert sel["calibrated_on"] == {"mode": "cross-fitted", "folds": 5, "rows": n}
    assert m["val"]["estimate"] == "cross-validated" and m["head"] == "logreg"
    # By hand: unit mean-pooled vectors of every train + validation row, scikit-learn at the chosen C.
    x = _pool_by_hand(seen["rows"], cfg.backbone.pooling)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y, c_star = seen["y"], sel["probe"]["C"]

    def probe(rows):  # converged: the run's solver stops at max |gradient| <= 1e-4 (scikit-learn's tol)
        model = LogisticRegression(C=c_star, solver="newton-cg", tol=1e-10, max_iter=1000)
        return model.fit(x[rows], y[rows])

    # That stop leaves the run's logits up to ~1e-2 from the optimum here (7.5e-3 seen); the shipped probe
    # differs from each fold's on its held-out rows by far more (checked), so the two are told apart.
    tol = 2e-2
    heldout, labels = load_heldout(RunFolder(run).heldout, 3)
    np.testing.assert_array_equal(labels, y)
    full = probe(np.arange(n))
    for tr, te in seen["folds"]:  # each row scored by the probe of the folds that held it out, at C*
        np.testing.assert_allclose(heldout.logits[te], probe(tr).decision_function(x[te]), atol=tol)
        assert np.abs(heldout.logits[te] - full.decision_function(x[te])).max() > 5 * tol  # 0.23-0.29
    head, _ = load_head(run / "head")  # the shipped probe: every train + validation row at C*
    w, b = head.linear.weight.detach().double().numpy(), head.linear.bias.detach().double().numpy()
    np.testing.assert_allclose(x @ w.T + b, full.decision_function(x), atol=tol)
    # the out-of-scope flag has a threshold, set on every row's distance to the other folds' rows
    profile = fit_run_uncertainty(run)
    assert profile.ood.info["n_heldout"] == n and math.isfinite(profile.ood.threshold)
    # data.refit=false keeps the probe trained on train alone, calibrated on validation
    plain = train(tiny_run_cfg("head=logreg", "data.refit=false", "overwrite=true")).metrics
    assert "calibrated_on" not in plain["selection"] and "estimate" not in plain["val"]
    assert not RunFolder(run).heldout.exists()
