"""A saved head names the backbone weights it was trained on; loading refuses other weights, naming both.

Reference: the backbone's own fingerprint function (``model_fingerprint``: sha256 over the weight, config and
tokenizer files), and a copy of the tiny BERT whose files differ by one harmless config key.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from head_utils import resign

from ucse.backbone.loading import model_fingerprint
from ucse.config import BackboneConfig
from ucse.core.encoder import UcseEncoder


@pytest.fixture
def head_copy(tiny_clf_run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(tiny_clf_run, dst)
    return dst / "head"


def test_the_saved_head_records_its_backbone_fingerprint(head_copy, tiny_bert_dir):
    meta = json.loads((head_copy / "config.json").read_text())["meta"]
    assert meta["backbone_fingerprint"] == model_fingerprint(BackboneConfig(model=str(tiny_bert_dir)))
    assert meta["backbone_fingerprint"].startswith("sha256:")


def test_other_weights_are_refused_naming_both(head_copy, tiny_bert_dir, tmp_path):
    other = tmp_path / "other_bert"
    shutil.copytree(tiny_bert_dir, other)
    cfg = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**cfg, "note": "a different file"}))
    trained = model_fingerprint(BackboneConfig(model=str(tiny_bert_dir)))
    now = model_fingerprint(BackboneConfig(model=str(other)))
    assert trained != now
    with pytest.raises(ValueError, match="trained on backbone weights") as err:
        UcseEncoder.from_dir(head_copy, backbone_overrides={"model": str(other)})
    assert trained[:40] in str(err.value) and now[:40] in str(err.value)
    assert UcseEncoder.from_dir(head_copy).label_names  # the right weights still load


def test_a_head_saved_before_fingerprints_loads_unchecked(head_copy):
    """A head folder from before the field existed (no ``backbone_fingerprint``) still loads."""
    config = json.loads((head_copy / "config.json").read_text())
    del config["meta"]["backbone_fingerprint"]
    (head_copy / "config.json").write_text(json.dumps(config, indent=2))
    resign(head_copy)
    enc = UcseEncoder.from_dir(head_copy)
    assert enc.label_names == config["meta"]["label_names"]
