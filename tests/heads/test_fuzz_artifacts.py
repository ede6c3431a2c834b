"""Property-based fuzz of the head and profile loaders: random JSON edits, random bytes, random truncations.

Each example damages a copy of a saved head folder (with a full uncertainty profile) and loads it the way
``ucse predict`` does (head, ``meta.backbone``, profile), either re-signing the manifest as a tamperer who
knows the format would, or not. The contract: a named error (``ValueError`` / ``FileNotFoundError``, which
the CLI prints in one line with exit 2), or a head and profile that give finite, normalised answers; an
unsigned change is always refused. Derandomised and bounded (a few seconds).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from head_utils import resign
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ucse.config import HeadConfig, Pooling
from ucse.config.uncertainty import CalibrationMethod, ConformalConfig, ConformalMethod
from ucse.heads import build_head, load_head, save_head
from ucse.heads.meta import stored_backbone, stored_instruction
from ucse.uncertainty.calibration import Calibrator
from ucse.uncertainty.density import fit_class_gaussians
from ucse.uncertainty.profile import UncertaintyProfile, load_uncertainty_profile
from ucse.uncertainty.selective import AbstainThreshold

SETTINGS = settings(
    max_examples=60, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
C, D, H = 3, 6, 8
FILES = ["config.json", "model.safetensors", "calibration.json", "calibration.safetensors", "manifest.json"]

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.sampled_from([0, 1, -1, 2, 3, 10**9, 0.5, 1.5, -5]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(["", "1", "inf", "-inf", "nan", "msp", "aps", "textcnn", "mean", "a"]),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
edits = st.lists(
    st.tuples(st.integers(0, 10**6), st.sampled_from(["drop", "replace", "retype"]), json_values),
    min_size=1,
    max_size=3,
)


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    """A saved head with every part of a profile: calibration, abstention, RAPS sets, weight, densities."""
    torch.manual_seed(0)
    head = build_head(HeadConfig(num_filters=4, embed_dim=D), H, C, Pooling.mean)
    meta = {
        "label_names": ["a", "b", "c"],
        "backbone": {"name": "tiny", "model": "m", "max_length": 64},
        "instruction": "Classify the text",
    }
    folder = save_head(head, tmp_path_factory.mktemp("fuzz") / "h", meta)
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(60, D, generator=g, dtype=torch.float64)
    UncertaintyProfile(
        calibrator=Calibrator(
            CalibrationMethod.vector,
            torch.rand(C, generator=g, dtype=torch.float64) + 0.5,
            torch.zeros(C, dtype=torch.float64),
        ),  # fmt: skip
        abstain=AbstainThreshold(0.4, "target_error", 0.1, 0.05, 0.08, 0.7, 0.05, True),
        conformal=ConformalConfig(method=ConformalMethod.raps, raps_lambda=0.2, raps_k_reg=1),
        qhat=0.9,
        weight=head.bottleneck.classifier.weight.detach().double(),
        gaussians=fit_class_gaussians(feats, torch.arange(60) % C, C),
    ).save(folder)
    return folder


def _paths(node, prefix=()):
    """Every (container path, key) in a JSON document, in a fixed order."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


def _apply(doc, edit):
    at, op, value = edit
    paths = list(_paths(doc))
    if not paths:
        return doc
    *parents, key = paths[at % len(paths)]
    node = doc
    for p in parents:
        node = node[p]
    if op == "drop":
        node.pop(key) if isinstance(node, dict) else node.pop(key)
    elif op == "replace":
        node[key] = value
    else:  # the same value under another JSON type
        old = node[key]
        node[key] = str(old) if not isinstance(old, str) else [old] if value is None else {"v": old}
    return doc


def _load_like_predict(folder: Path):
    """What ``ucse predict`` reads from a head folder before any text: head, backbone config, profile."""
    head, meta = load_head(folder)
    stored_backbone(meta, folder / "config.json")
    stored_instruction(meta, folder / "config.json")
    return head, meta, load_uncertainty_profile(folder)


def _check_answers(head, meta, profile) -> None:
    """A head and profile that loaded must give finite, normalised answers to finite inputs."""
    assert all(bool(torch.isfinite(p).all()) for p in head.state_dict().values())
    names = meta.get("label_names")
    assert names is None or (len(names) == len(set(names)) == C and all(isinstance(n, str) for n in names))
    g = torch.Generator().manual_seed(2)
    hidden, mask = torch.randn(4, 5, H, generator=g), torch.ones(4, 5, dtype=torch.long)
    with torch.no_grad():
        out = head(hidden, mask)
    res = profile.apply(out.mean.double(), out.var.double(), out.logits.double(), sets=True)
    assert np.isfinite(res.probs).all() and np.allclose(res.probs.sum(1), 1.0)
    assert not np.isnan(res.uncertainty).any() and res.abstain.dtype == bool
    assert res.sets is None or res.sets.dtype == bool


def _outcome(folder: Path, must_fail: str | None) -> None:
    try:
        loaded = _load_like_predict(folder)
    except (ValueError, FileNotFoundError) as err:  # the named errors: exit 2 in one line through the CLI
        assert "\n" not in str(err), str(err)
        return
    assert must_fail is None, f"an unsigned change to {must_fail} was accepted"
    _check_answers(*loaded)


@SETTINGS
@given(target=st.sampled_from(["config.json", "calibration.json"]), ops=edits, signed=st.booleans())
def test_random_json_edits_load_soundly_or_fail_in_one_named_error(original, target, ops, signed):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(shutil.copytree(original, Path(tmp) / "h"))
        doc = json.loads((folder / target).read_text())
        for op in ops:
            doc = _apply(doc, op)
        (folder / target).write_text(json.dumps(doc))  # another layout than the saved one: other bytes
        if signed:
            resign(folder)
        _outcome(folder, None if signed else target)


@SETTINGS
@given(
    target=st.sampled_from(FILES),
    cut=st.integers(0, 10**6),
    noise=st.binary(max_size=16),
    signed=st.booleans(),
)
def test_random_bytes_and_truncations_fail_in_one_named_error(original, target, cut, noise, signed):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(shutil.copytree(original, Path(tmp) / "h"))
        raw = (folder / target).read_bytes()
        cut %= len(raw) + 1
        damaged = raw[:cut] + noise
        (folder / target).write_bytes(damaged)
        if signed and target != "manifest.json":
            resign(folder)
        changed = damaged != raw and not signed and target != "manifest.json"
        _outcome(folder, target if changed else None)
