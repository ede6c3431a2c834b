"""Head folders saved by an earlier ucse (commit 534a231, before this layout) load and predict the same.

The fixtures under ``tests/fixtures/heads-534a231/`` were written by that commit's ``ucse.train`` on the tiny
BERT (rebuilt identically from its seed here) with its uncertainty profile and the probabilities its own
classifier gave for 20 texts (``expected.json``): today's code must reproduce them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ucse.core.encoder import UcseEncoder
from ucse.uncertainty.profile import load_uncertainty_profile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "heads-534a231"


@pytest.mark.parametrize("kind", ["textcnn", "logreg"])
def test_an_earlier_head_folder_loads_and_predicts_the_same(kind, tiny_bert_dir, tmp_path):
    head = tmp_path / "head"
    shutil.copytree(FIXTURES / kind, head)  # a copy: loading must not need to write, but never risk it
    expected = json.loads((head / "expected.json").read_text())
    config = json.loads((head / "config.json").read_text())
    assert "backbone_fingerprint" not in config["meta"]  # saved before the field existed
    enc = UcseEncoder.from_dir(head, backbone_overrides={"model": str(tiny_bert_dir)})  # the path moved
    profile = load_uncertainty_profile(head, num_classes=len(enc.label_names))
    assert profile.fitted
    out = enc.encode_gaussian(expected["texts"])
    probs = profile.apply(out.mean, out.var, out.logits).probs
    want = np.asarray(expected["probs"])
    # fp32 on a 32-d model: the same weights on another CPU differ in the last bits only.
    np.testing.assert_allclose(probs, want, atol=1e-4)
    clear = np.sort(want, axis=1)[:, -1] - np.sort(want, axis=1)[:, -2] > 1e-3
    got = [enc.label_names[i] for i in probs.argmax(1)]
    assert [g for g, c in zip(got, clear) if c] == [w for w, c in zip(expected["labels"], clear) if c]
