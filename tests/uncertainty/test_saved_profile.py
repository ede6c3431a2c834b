"""A saved uncertainty profile read back as untrusted input: every field range-checked, every file covered."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch
from head_utils import resign
from safetensors.torch import load_file, save_file

from ucse.config import HeadConfig, Pooling
from ucse.config.uncertainty import CalibrationMethod, ConformalConfig, ConformalMethod
from ucse.heads import build_head, save_head
from ucse.uncertainty.calibration import Calibrator
from ucse.uncertainty.density import fit_class_gaussians
from ucse.uncertainty.profile import UncertaintyProfile, load_uncertainty_profile
from ucse.uncertainty.selective import AbstainThreshold

C, D = 3, 6


@pytest.fixture
def head_dir(tmp_path):
    """A saved head with a full profile: temperature, abstention, RAPS sets, classifier weight, densities."""
    torch.manual_seed(0)
    head = build_head(HeadConfig(num_filters=4, embed_dim=D), 8, C, Pooling.mean)
    folder = save_head(head, tmp_path / "h", {"label_names": ["a", "b", "c"]})
    g = torch.Generator().manual_seed(1)
    feats, labels = torch.randn(60, D, generator=g, dtype=torch.float64), torch.arange(60) % C
    UncertaintyProfile(
        calibrator=Calibrator(
            CalibrationMethod.temperature,
            torch.full((C,), 0.5, dtype=torch.float64),
            torch.zeros(C, dtype=torch.float64),
        ),
        abstain=AbstainThreshold(0.4, "target_error", 0.1, 0.05, 0.08, 0.7, 0.05, True),
        conformal=ConformalConfig(method=ConformalMethod.raps, raps_lambda=0.2, raps_k_reg=1),
        qhat=0.9,
        weight=head.bottleneck.classifier.weight.detach().double(),
        gaussians=fit_class_gaussians(feats, labels, C),
    ).save(folder)
    return folder


def _edit(folder, fn):
    path = folder / "calibration.json"
    cfg = json.loads(path.read_text())
    fn(cfg)
    path.write_text(json.dumps(cfg))
    resign(folder)  # a consistent folder: the field checks, not the checksum, must refuse it


def _set(key, value):
    def edit(cfg):
        *parents, last = key.split(".")
        node = cfg
        for p in parents:
            node = node[p]
        node[last] = value

    return edit


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("conformal.qhat", -5, "a number in [0, 1.4]"),  # 1 + lambda * (C - k_reg)
        ("conformal.qhat", 1.5, "a number in [0, 1.4]"),
        ("conformal.qhat", "nan", "a number in [0, 1.4]"),
        ("conformal.qhat", "-inf", "a number in [0, 1.4]"),
        ("conformal.qhat", [0.5, 0.5], "a number in [0, 1.4]"),  # a list needs one per label (C = 3)
        ("conformal.qhat", [0.5, "nan", 0.5], "a number in [0, 1.4]"),
        ("abstain.threshold", "nan", 'a finite number, "inf" (never abstain) or "-inf" (always abstain)'),
        ("abstain.threshold", None, 'a finite number, "inf"'),
        ("calibration.temperature", 0, "a finite number > 0"),
        ("calibration.temperature", -2.0, "a finite number > 0"),
        ("calibration.method", "platt", "temperature | vector | none"),
        ("calibration.prior", "uniform", "train | balanced"),
        ("calibration.prior", 1, "train | balanced"),
        ("conformal.alpha", 1.5, "a number in (0, 1)"),
        ("conformal.alpha", 0, "a number in (0, 1)"),
        ("conformal.raps_lambda", -1, "a finite number >= 0"),
        ("conformal.raps_k_reg", 1.5, "an integer >= 0"),
        ("conformal.randomized", "yes", "true or false"),
        ("abstain.rule", "vibes", "target_error | coverage"),
        ("abstain.target", 1.5, "in (0, 1) for target_error"),
        ("abstain.delta", 0, "null or in (0, 1)"),
        ("abstain.val_coverage", 2, "a number in [0, 1]"),
        ("abstain.achievable", 1, "true or false"),
        ("samples", -1, "an integer in [0, 1024]"),
        ("samples", 10**9, "an integer in [0, 1024]"),
        ("seed", -3, "an integer in [0, 2**63)"),
        ("density_logdet", None, "a finite number with the density arrays"),
        ("info", [], "an object"),
    ],
)
def test_a_field_out_of_range_is_refused_naming_it(head_dir, key, value, allowed):
    _edit(head_dir, _set(key, value))
    message = f"{head_dir / 'calibration.json'}: field '{key}' is {value!r}, allowed: {allowed}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}.*refit it with `ucse calibrate run="):
        load_uncertainty_profile(head_dir)


def test_a_bogus_score_names_the_file_the_choices_and_the_fix(head_dir):
    _edit(head_dir, _set("score", "bogus"))
    with pytest.raises(
        ValueError, match=r"calibration.json: field 'score' is 'bogus', allowed: one of msp, .*; ref"
    ):
        load_uncertainty_profile(head_dir)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.pop("score"), r"the top level lacks key\(s\) \['score'\]"),
        (lambda c: c.update(bonus=1), r"the top level has unknown key\(s\) \['bonus'\]"),
        (lambda c: c["abstain"].update(extra=1), r"'abstain' has unknown key\(s\) \['extra'\]"),
        (
            lambda c: c["abstain"].pop("rule"),
            r"'abstain' lacks key\(s\) \['rule'\]",
        ),
        (lambda c: c["conformal"].update(qhat_2=1), r"'conformal' has unknown key\(s\) \['qhat_2'\]"),
        (lambda c: c.update(calibration=[]), r"field 'calibration' is \[\], allowed: an object"),
        (
            lambda c: c.update(format_version="1"),
            r"'format_version' is '1' \(a string\), not the JSON integer 1",
        ),
    ],
)
def test_missing_extra_or_mistyped_keys_are_refused(head_dir, edit, message):
    _edit(head_dir, edit)
    with pytest.raises(ValueError, match=message):
        load_uncertainty_profile(head_dir)


@pytest.mark.parametrize(
    ("key", "edge", "beyond"),
    [
        ("conformal.qhat", "inf", "-inf"),  # every label in the set / none (never valid)
        ("conformal.qhat", 0, -1e-3),
        ("abstain.threshold", "-inf", "nan"),  # always abstain / never decides
        ("abstain.threshold", "inf", "Infinity"),
    ],
)
def test_the_documented_extremes_are_accepted_and_one_step_beyond_is_not(head_dir, key, edge, beyond):
    _edit(head_dir, _set(key, beyond))
    with pytest.raises(ValueError, match=f"field '{key}' is"):
        load_uncertainty_profile(head_dir)
    _edit(head_dir, _set(key, edge))
    p = load_uncertainty_profile(head_dir)
    out = p.apply(np.zeros((2, D)), None, np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]]), sets=True)
    if key == "abstain.threshold":
        assert p.abstain.threshold == float(edge) and out.abstain.all() == (edge == "-inf")
    else:
        assert p.qhat == float(edge) and out.sets.all() == (edge == "inf")


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("calibration_scale", lambda t: t.fill_(math.nan), r"array 'calibration_scale' holds 3 NaN/inf"),
        ("calibration_bias", lambda t: t[:2], r"array 'calibration_bias' is torch.float64 \(2,\), expected"),
        (
            "classifier_weight",
            lambda t: torch.zeros(C, D + 1, dtype=t.dtype),
            r"array 'classifier_weight' is .* \(3, 7\), expected .* \(3, 6\)",
        ),
        ("density_log_prior", lambda t: t.fill_(math.inf), r"array 'density_log_prior' holds 3 NaN/inf"),
        ("density_precision", lambda t: t.fill_(math.nan), r"array 'density_precision' holds 36 NaN/inf"),
    ],
)
def test_bad_arrays_are_refused(head_dir, name, change, message):
    path = head_dir / "calibration.safetensors"
    arrays = load_file(str(path))
    arrays[name] = change(arrays[name]).contiguous()
    save_file(arrays, str(path))
    _edit(head_dir, lambda c: c.update(arrays_sha256=_sha(path)))
    with pytest.raises(ValueError, match=f"calibration.safetensors: {message}"):
        load_uncertainty_profile(head_dir)


def test_a_temperature_scale_that_is_not_positive_is_refused(head_dir):
    path = head_dir / "calibration.safetensors"
    arrays = load_file(str(path))
    arrays["calibration_scale"] = -arrays["calibration_scale"]
    save_file(arrays, str(path))
    _edit(head_dir, lambda c: c.update(arrays_sha256=_sha(path)))
    with pytest.raises(ValueError, match=r"calibration_scale \(1 / temperature\) must be > 0"):
        load_uncertainty_profile(head_dir)


def _sha(path):
    from ucse.atomic import sha256

    return sha256(path)


def test_an_edited_calibration_fails_its_checksum_naming_the_file(head_dir):
    path = head_dir / "calibration.json"
    path.write_text(path.read_text().replace('"qhat": 0.9', '"qhat": -5'))
    with pytest.raises(
        ValueError, match=rf"{path} does not match its SHA-256 .* refit it with `ucse calibrate run="
    ):
        load_uncertainty_profile(head_dir)


def test_a_calibration_written_after_the_manifest_is_refused_as_unlisted(tmp_path):
    torch.manual_seed(0)
    folder = save_head(
        build_head(HeadConfig(num_filters=4, embed_dim=D), 8, C, Pooling.mean), tmp_path / "h", {}
    )
    manifest = (folder / "manifest.json").read_bytes()
    UncertaintyProfile.plain(C).save(folder)
    (folder / "manifest.json").write_bytes(manifest)  # as if the fit was killed before its last step
    with pytest.raises(ValueError, match=r"calibration.json is not listed in .*manifest.json"):
        load_uncertainty_profile(folder)
