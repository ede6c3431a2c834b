"""The profile end to end on a tiny trained run: fitted, saved with the head, reloaded, applied, evaluated."""

from __future__ import annotations

import json

import matplotlib.image as mpimg
import numpy as np
import pytest
import torch

from ucse.config import from_yaml
from ucse.core.encoder import UcseEncoder
from ucse.data import load_classification
from ucse.evaluation.config import build_eval_config
from ucse.evaluation.evaluate import evaluate_run
from ucse.heads import load_head, save_head
from ucse.heads.io import CALIBRATION_ARRAYS, CALIBRATION_FILE
from ucse.training import train
from ucse.uncertainty.fit import fit_run_uncertainty
from ucse.uncertainty.profile import load_uncertainty_profile
from ucse.uncertainty.train_split import encode_splits


@pytest.fixture
def tiny_run(tiny_run_cfg):
    return train(tiny_run_cfg("uncertainty.abstain.target_error=0.3", "uncertainty.samples=8"))


def _test_outputs(run_dir):
    cfg = from_yaml(run_dir / "config.yaml")
    encoder = UcseEncoder.from_dir(run_dir / "head")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    return encode_splits(cfg, encoder, data, ("test",))["test"], data


def test_without_a_profile_predictions_are_plain_softmax_and_never_abstain(tiny_run):
    out, _ = _test_outputs(tiny_run.run_dir)
    profile = load_uncertainty_profile(tiny_run.run_dir / "head")
    assert not profile.fitted
    res = profile.apply(out.mean, out.var, out.logits, sets=True)
    probs = torch.softmax(torch.from_numpy(out.logits).double(), 1).numpy()
    np.testing.assert_allclose(res.probs, probs)
    np.testing.assert_allclose(res.uncertainty, 1 - probs.max(1))
    assert res.score == "msp" and not res.abstain.any() and res.sets is None


def test_fit_writes_artifacts_that_reload_and_apply_identically(tiny_run):
    head = tiny_run.run_dir / "head"
    fitted = fit_run_uncertainty(tiny_run.run_dir)
    assert (head / CALIBRATION_FILE).is_file() and (head / CALIBRATION_ARRAYS).is_file()
    saved = json.loads((head / CALIBRATION_FILE).read_text())
    assert saved["abstain"]["target"] == 0.3 and saved["samples"] == 8
    aurcs, candidates = saved["info"]["validation_aurc"], saved["info"]["score_candidates"]
    assert set(candidates) == {"msp", "entropy", "predictive_entropy", "mutual_information"} < set(aurcs)
    assert saved["score"] == min(candidates, key=aurcs.get)  # auto: the lowest validation AURC among them
    loaded = load_uncertainty_profile(head)
    assert loaded.fitted and loaded.score == fitted.score and loaded.gaussians is not None
    out, data = _test_outputs(tiny_run.run_dir)
    a = fitted.apply(out.mean, out.var, out.logits, sets=True)
    b = loaded.apply(out.mean, out.var, out.logits, sets=True)
    for name in ("probs", "uncertainty", "abstain", "sets"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name))
    assert b.confidence == pytest.approx(b.probs.max(1))
    assert all(len(s) == m.sum() for s, m in zip(b.set_labels(data.label_names), b.sets, strict=True))
    # The same text gets the same uncertainty, abstention and set in a batch of one.
    one = loaded.apply(out.mean[3:4], out.var[3:4], out.logits[3:4], sets=True)
    np.testing.assert_allclose(one.uncertainty, b.uncertainty[3:4])
    np.testing.assert_array_equal(one.sets, b.sets[3:4])


def test_calibration_is_tied_to_its_weights(tiny_run):
    head = tiny_run.run_dir / "head"
    fit_run_uncertainty(tiny_run.run_dir)
    model, meta = load_head(head)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(head / "model.safetensors"))
    with pytest.raises(ValueError, match="fitted for other weights"):
        load_uncertainty_profile(head)
    # Saving a head over the folder replaces it whole: the stale calibration goes with the old weights.
    save_head(model, head, meta)
    assert not (head / CALIBRATION_FILE).exists()
    assert not load_uncertainty_profile(head).fitted


def test_eval_reports_calibration_selective_conformal_and_plots(tiny_run):
    fit_run_uncertainty(tiny_run.run_dir)
    evaluate_run(build_eval_config([f"run={tiny_run.run_dir}", "tsne_samples=30", "efficiency=false"]))
    report = json.loads((tiny_run.run_dir / "eval.json").read_text())
    assert report["profile_source"] == "saved"
    c, s, k = report["calibration"], report["selective"], report["conformal"]
    assert c["temperature"] > 0 and c["ece_before"] == pytest.approx(report["metrics"]["ece"], abs=1e-6)
    assert {"ece_after", "nll_before", "nll_after", "adaptive_ece_after", "brier_after"} <= set(c)
    assert s["default_score"] in s["aurc"] and set(s["aurc"]) == set(s["e_aurc"])
    assert {"msp", "entropy", "sigma", "predictive_entropy", "mahalanobis"} <= set(s["aurc"])
    # The report's figures recomputed from the saved profile applied to the test split's outputs.
    out, data = _test_outputs(tiny_run.run_dir)
    res = load_uncertainty_profile(tiny_run.run_dir / "head").apply(out.mean, out.var, out.logits, sets=True)
    y = data.labels("test")
    assert s["target_error"] == 0.3 and s["test_coverage"] == pytest.approx((~res.abstain).mean())
    assert k["alpha"] == 0.1 and k["coverage"] == pytest.approx(res.sets[np.arange(len(y)), y].mean())
    assert k["mean_set_size"] == pytest.approx(res.sets.sum(1).mean()) and k["mean_set_size"] >= 1
    for name in ("reliability.png", "risk_coverage.png"):
        img = mpimg.imread(tiny_run.run_dir / name)
        assert img.ndim == 3 and img.shape[0] > 200 and np.std(img) > 0.01


def test_eval_fits_in_memory_when_nothing_was_saved(tiny_run):
    evaluate_run(build_eval_config([f"run={tiny_run.run_dir}", "plots=false", "efficiency=false"]))
    report = json.loads((tiny_run.run_dir / "eval.json").read_text())
    assert report["profile_source"] == "fitted at evaluation"
    assert not (tiny_run.run_dir / "head" / CALIBRATION_FILE).exists()  # eval writes nothing into head/
    profile = fit_run_uncertainty(tiny_run.run_dir)  # the same fit, now saved: the report used its twin
    out, data = _test_outputs(tiny_run.run_dir)
    res = profile.apply(out.mean, out.var, out.logits, sets=True)
    y = data.labels("test")
    assert report["conformal"]["coverage"] == pytest.approx(res.sets[np.arange(len(y)), y].mean())


def test_eval_of_a_run_without_uncertainty_reports_plain_softmax(tiny_run_cfg):
    run = train(tiny_run_cfg("uncertainty.enabled=false"))
    evaluate_run(build_eval_config([f"run={run.run_dir}", "plots=false", "efficiency=false"]))
    report = json.loads((run.run_dir / "eval.json").read_text())
    assert report["profile_source"].startswith("plain softmax")
    assert report["calibration"]["method"] == "none"
    assert report["calibration"]["ece_after"] == pytest.approx(report["calibration"]["ece_before"])
    assert report["conformal"] is None and report["selective"]["test_coverage"] == 1.0


def test_set_labels_are_each_rows_members_most_probable_first():
    """The bulk conversion against a sort per row: ties keep column order, empty and full sets included."""
    from ucse.uncertainty.profile import UncertaintyOutput

    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(6) * 0.3, 40)
    probs[0] = [0.25, 0.25, 0.1, 0.25, 0.1, 0.05]  # ties
    sets = rng.random((40, 6)) < 0.4
    sets[0], sets[1], sets[2] = True, False, True  # the tied row whole, an empty and a full set
    names = [f"label {i}" for i in range(6)]
    out = UncertaintyOutput(
        probs, probs.argmax(1), probs.max(1), 1 - probs.max(1), "msp", np.zeros(40, bool), sets
    )
    expected = [[names[c] for c in np.argsort(-p, kind="stable") if m[c]] for p, m in zip(probs, sets)]
    assert out.set_labels(names) == expected
    assert (
        expected[1] == [] and len(expected[2]) == 6 and expected[0][:3] == ["label 0", "label 1", "label 3"]
    )


def test_the_predictive_scores_are_the_entropy_and_mutual_information_of_calibrated_samples():
    # By hand in numpy: z_s = mu + eps_s * sigma through the classifier (logits + (eps_s sigma) W^T), each
    # sample's logits scaled by the profile's 1/T, softmaxed; predictive entropy = H(mean of the samples),
    # mutual information = H(mean) - mean of H. The S noise vectors are the seed's (the scores' contract).
    from ucse.config.uncertainty import CalibrationMethod
    from ucse.uncertainty.calibration import Calibrator
    from ucse.uncertainty.profile import UncertaintyProfile

    rng = np.random.default_rng(0)
    n, c, d, s, t = 6, 4, 5, 16, 2.5
    logits, var, weight = rng.normal(size=(n, c)) * 3, rng.uniform(0.2, 2.0, (n, d)), rng.normal(size=(c, d))
    cal = Calibrator(
        CalibrationMethod.temperature, torch.full((c,), 1 / t, dtype=torch.float64), torch.zeros(c)
    )
    profile = UncertaintyProfile(cal, weight=torch.as_tensor(weight), samples=s, seed=3)
    got = profile.scores(
        torch.as_tensor(rng.normal(size=(n, d))), torch.as_tensor(var), torch.as_tensor(logits)
    )
    eps = torch.randn((s, 1, d), generator=torch.Generator().manual_seed(3), dtype=torch.float64).numpy()
    z = (logits + (eps * np.sqrt(var)) @ weight.T) / t  # (S, N, C)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)

    def entropy(q):
        return -(q * np.log(q)).sum(-1)

    pe, mi = entropy(p.mean(0)), entropy(p.mean(0)) - entropy(p).mean(0)
    np.testing.assert_allclose(got["predictive_entropy"].numpy(), pe, rtol=1e-10)
    np.testing.assert_allclose(got["mutual_information"].numpy(), mi, rtol=1e-8, atol=1e-12)
    # the premises: the two scores differ, and the calibration moves them (T = 1 gives other values)
    assert np.abs(pe - mi).min() > 1e-3
    z1 = logits + (eps * np.sqrt(var)) @ weight.T
    p1 = np.exp(z1 - z1.max(-1, keepdims=True))
    assert np.abs(entropy((p1 / p1.sum(-1, keepdims=True)).mean(0)) - pe).min() > 1e-3
