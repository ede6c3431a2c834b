import json

import pytest
import torch
from head_utils import make_seqs, pad_batch, resign
from safetensors.torch import load_file, save_file

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import FORMAT_VERSION, GaussianTextCNN, build_head, load_head, save_head

META = {
    "labels": ["a", "b", "c"],
    "backbone": {"name": "tiny", "pooling": Pooling.last},
    "ucse_version": "0.1.0",
}


def _head(head_type=HeadType.textcnn):
    torch.manual_seed(0)
    cfg = HeadConfig(type=head_type, gaussian=True, num_filters=4, embed_dim=6)
    return build_head(cfg, 8, 3, Pooling.last)


@pytest.mark.parametrize("head_type", [HeadType.textcnn, HeadType.linear, HeadType.mlp, HeadType.attention])
def test_round_trip_gives_identical_outputs(tmp_path, head_type):
    head = _head(head_type).eval()
    save_head(head, tmp_path / "head", META)
    loaded, meta = load_head(tmp_path / "head")
    assert type(loaded) is type(head) and not loaded.training
    assert meta == {**META, "backbone": {"name": "tiny", "pooling": "last"}}
    hidden, mask = pad_batch(make_seqs(), "left")
    a, b = head(hidden, mask), loaded(hidden, mask)
    torch.testing.assert_close(a.logits, b.logits, rtol=0, atol=0)
    torch.testing.assert_close(a.var, b.var, rtol=0, atol=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["head"]  # no temp folders left


def test_config_json_is_plain_json_with_enum_strings(tmp_path):
    save_head(_head(), tmp_path / "h", META)
    cfg = json.loads((tmp_path / "h" / "config.json").read_text())
    assert cfg["format_version"] == FORMAT_VERSION
    assert cfg["head"]["type"] == "textcnn" and cfg["pooling"] == "last"
    assert cfg["hidden_size"] == 8 and cfg["num_classes"] == 3 and cfg["head"]["kernel_sizes"] == [3, 4, 5]
    assert cfg["meta"]["labels"] == ["a", "b", "c"]


def test_overwrites_an_existing_head_but_not_other_folders(tmp_path):
    save_head(_head(HeadType.linear), tmp_path / "h", {"v": 1})
    save_head(_head(HeadType.textcnn), tmp_path / "h", {"v": 2})
    loaded, meta = load_head(tmp_path / "h")
    assert isinstance(loaded, GaussianTextCNN) and meta == {"v": 2}
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a saved head folder"):
        save_head(_head(), tmp_path / "work", {})
    assert (tmp_path / "work" / "notes.txt").read_text() == "keep me"


def test_save_needs_spec_and_json_meta(tmp_path):
    with pytest.raises(ValueError, match="build_head"):
        save_head(GaussianTextCNN(8, 3), tmp_path / "h", {})
    with pytest.raises(TypeError, match="JSON"):
        save_head(_head(), tmp_path / "h", {"bad": object()})
    assert not (tmp_path / "h").exists() and list(tmp_path.iterdir()) == []


@pytest.fixture
def saved(tmp_path):
    return save_head(_head(), tmp_path / "h", META)


def test_missing_files(saved):
    (saved / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_head(saved)


def _edit_config(saved, fn):
    path = saved / "config.json"
    cfg = json.loads(path.read_text())
    fn(cfg)
    path.write_text(json.dumps(cfg))
    resign(saved)


def test_unknown_format_version(saved):
    _edit_config(saved, lambda c: c.update(format_version=99))
    with pytest.raises(ValueError, match="format_version.*re-export"):
        load_head(saved)


def test_unknown_head_field(saved):
    _edit_config(saved, lambda c: c["head"].update(wings=2))
    with pytest.raises(ValueError, match="config.json.*wings"):
        load_head(saved)


def test_missing_config_field(saved):
    _edit_config(saved, lambda c: c.pop("num_classes"))
    with pytest.raises(ValueError, match="num_classes"):
        load_head(saved)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.pop("bottleneck.mu.bias"), r"missing tensors \['bottleneck.mu.bias'\]"),
        (lambda s: s.update(extra=torch.zeros(1)), r"unexpected tensors \['extra'\]"),
        (lambda s: s.update({"bottleneck.mu.bias": torch.zeros(7)}), r"bottleneck.mu.bias: file \(7,\)"),
    ],
)
def test_tensor_mismatches(saved, edit, message):
    path = saved / "model.safetensors"
    state = load_file(str(path))
    edit(state)
    save_file(state, str(path))
    resign(saved)
    with pytest.raises(ValueError, match=message):
        load_head(saved)


@pytest.mark.parametrize("signed", [False, True])
def test_corrupt_safetensors(saved, signed):
    path = saved / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-64])
    if signed:
        resign(saved)
    message = "is not a readable safetensors file" if signed else "does not match its SHA-256"
    with pytest.raises(ValueError, match=f"model.safetensors {message}.*re-export the head"):
        load_head(saved)
