"""A saved head read back as untrusted input: manifest, bounded config, finite weights, label names."""

from __future__ import annotations

import json

import pytest
import torch
from head_utils import make_seqs, pad_batch, resign

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import build_head, load_head, save_head
from ucse.heads import io as head_io
from ucse.heads.meta import label_values

NAMES = ["a", "b", "c"]
MANIFEST_FILE = "manifest.json"


def _head(head_type=HeadType.textcnn):
    torch.manual_seed(0)
    return build_head(HeadConfig(type=head_type, num_filters=4, embed_dim=6), 8, 3, Pooling.mean).eval()


@pytest.fixture
def saved(tmp_path):
    return save_head(_head(), tmp_path / "h", {"label_names": NAMES, "backbone": {"name": "tiny"}})


def _edit(folder, fn, sign=True):
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    fn(cfg)
    path.write_text(json.dumps(cfg))
    if sign:
        resign(folder)


@pytest.fixture
def meta_only(monkeypatch):
    """Fail the test if a head is built anywhere but on the meta device (i.e. memory is allocated for it)."""
    real = head_io.build_head

    def guarded(*args, **kwargs):
        assert torch.empty(0).device.type == "meta", "a head was built in memory from an unchecked config"
        return real(*args, **kwargs)

    monkeypatch.setattr(head_io, "build_head", guarded)


def _edit_weights(folder, fn):
    """Change the saved tensors (``fn`` edits the dict in place) and sign the folder again."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    fn(tensors)
    save_file(tensors, str(path))
    resign(folder)


def test_a_head_with_nan_weights_is_refused_naming_the_tensor(tmp_path):
    head = _head()
    save_head(head, tmp_path / "h", {})
    with torch.no_grad():
        head.bottleneck.classifier.weight[1, 2] = float("nan")
        head.bottleneck.mu.bias[0] = float("inf")
    # not written (before, it was, replacing the good head, and only the load refused it)
    with pytest.raises(ValueError, match=r"model.safetensors: tensor '\S+' holds 1 NaN/inf value\(s\)"):
        save_head(head, tmp_path / "h", {})
    assert load_head(tmp_path / "h")[0] is not None  # the good head is still there
    _edit_weights(tmp_path / "h", lambda t: t["bottleneck.mu.bias"].__setitem__(0, float("inf")))
    with pytest.raises(ValueError, match=r"tensor 'bottleneck.mu.bias' holds 1 NaN/inf value\(s\)"):
        load_head(tmp_path / "h")


@pytest.mark.parametrize(
    ("head_type", "name", "edit", "message"),
    [
        # each loaded before and gave NaN (or silently wrong) probabilities
        (
            HeadType.textcnn,
            "bottleneck.mu.weight",
            lambda t: t.double().fill_(1e300),
            r"holds 72 NaN/inf value.*\(as float32\)",
        ),
        (
            HeadType.blend,
            "gaussian.state_norm.std",
            lambda t: t.fill_(0.0),
            "'gaussian.state_norm.std' must be >=",
        ),
        (HeadType.textcnn, "state_norm.std", lambda t: t.fill_(1e-44), "'state_norm.std' must be >= 1e-06"),
        (
            HeadType.blend,
            "temperatures",
            lambda t: t.fill_(0.0),
            "a blend needs 0 <= weight <= 1 and temperatures",
        ),
        (HeadType.blend, "temperatures", lambda t: t.fill_(-1.0), "a blend needs"),
        (HeadType.blend, "weight", lambda t: t.fill_(3.0), r"a blend needs .* got \[?3.0"),
    ],
)
def test_weights_the_head_cannot_use_are_refused(tmp_path, head_type, name, edit, message):
    torch.manual_seed(0)
    cfg = HeadConfig(type=head_type, num_filters=4, embed_dim=6, normalize_states=True)
    save_head(build_head(cfg, 8, 3, Pooling.mean).eval(), tmp_path / "h", {})
    _edit_weights(tmp_path / "h", lambda t: t.__setitem__(name, edit(t[name].clone())))
    with pytest.raises(ValueError, match=message):
        load_head(tmp_path / "h")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["a", "a", "b"], r"meta.label_names repeats \['a'\]"),
        ("abc", r"meta.label_names must be a list of non-empty strings .* got 'abc'"),
        (["a", "b"], r"meta.label_names holds 2 names but the head has num_classes=3"),
        (["a", "b", "c", "d"], r"meta.label_names holds 4 names"),
        (["a", 1, "c"], r"meta.label_names must be a list of non-empty strings"),
        (["a", " ", "c"], r"meta.label_names must be a list of non-empty strings"),
    ],
)
def test_bad_label_names_are_refused(saved, tmp_path, names, message):
    with pytest.raises(ValueError, match=message):  # not saved: it was, and only the load refused it
        save_head(_head(), tmp_path / "other", {"label_names": names})
    assert not (tmp_path / "other").exists()
    _edit(saved, lambda cfg: cfg["meta"].__setitem__("label_names", names))
    with pytest.raises(ValueError, match=rf"config.json: {message}"):
        load_head(saved)


@pytest.mark.parametrize(
    ("kind", "names", "message"),
    [
        ("float", ["1", "2", "3"], r"meta.label_type is 'float', expected one of"),
        (1, ["1", "2", "3"], r"meta.label_type is 1, expected one of"),
        ("int", ["1", "02", "3"], r"label_names has '02', not the decimal form"),
        ("int", ["1", "x", "3"], r"label_names has 'x', not the decimal form"),
        ("int", ["1", " 2", "3"], r"label_names has ' 2', not the decimal form"),
        ("int", ["1", str(2**64), "3"], r"label_names has '18446744073709551616', not the decimal form"),
    ],
)
def test_a_bad_label_type_is_refused(saved, tmp_path, kind, names, message):
    with pytest.raises(ValueError, match=message):
        save_head(_head(), tmp_path / "other", {"label_names": names, "label_type": kind})
    _edit(saved, lambda cfg: cfg["meta"].update(label_names=names, label_type=kind))
    with pytest.raises(ValueError, match=rf"config.json: .*{message}"):
        load_head(saved)


def test_label_values_give_integer_ids_back_as_ints():
    assert label_values({"label_names": ["-3", "9", "10"], "label_type": "int"}) == [-3, 9, 10]
    assert label_values({"label_names": ["-3", "9", "10"], "label_type": "str"}) == ["-3", "9", "10"]
    assert label_values({"label_names": ["9", "10"]}) == ["9", "10"]  # a head from before label_type: names
    assert label_values({}) == []


def test_a_string_format_version_says_the_type_is_wrong(saved):
    _edit(saved, lambda c: c.update(format_version="1"))
    with pytest.raises(ValueError, match=r"'format_version' is '1' \(a string\), not a JSON integer"):
        load_head(saved)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden_size", 10**9),
        ("num_classes", 10**9),
        ("hidden_size", True),
        ("head.kernel_sizes", [10**6]),
        ("head.kernel_sizes", [3] * 10**5),
        ("head.kernel_sizes", "345"),
        ("head.embed_dim", 10**9),
        ("head.num_filters", -4),
        ("head.dropout", float("nan")),
        ("head.gaussian", "yes"),
    ],
)
def test_sizes_out_of_range_are_refused_before_anything_is_built(saved, meta_only, field, value):
    def put(cfg):
        node, key = (cfg["head"], field[5:]) if field.startswith("head.") else (cfg, field)
        node[key] = value

    _edit(saved, put)
    with pytest.raises(ValueError, match=rf"config.json: field '{field}' is .*, allowed: "):
        load_head(saved)


def test_sizes_in_range_but_not_those_of_the_file_allocate_nothing(saved, meta_only):
    _edit(saved, lambda c: c.update(hidden_size=16384))
    with pytest.raises(ValueError, match=r"model.safetensors does not match the head described in"):
        load_head(saved)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_file_changed_after_saving_is_refused_naming_it(saved, name):
    path = saved / name
    if name == "config.json":  # a valid edit: another pooling
        path.write_text(json.dumps({**json.loads(path.read_text()), "pooling": "cls"}, indent=2))
    else:  # one flipped bit in the last weight
        data = bytearray(path.read_bytes())
        data[-2] ^= 1
        path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"{path} does not match its SHA-256 in .*manifest.json"):
        load_head(saved)


def test_a_damaged_manifest_is_one_clear_error(saved):
    (saved / MANIFEST_FILE).write_text('{"format_version": 1, "files": {"config.json": {"sha256": 5}}}')
    with pytest.raises(ValueError, match=r"manifest.json is not a ucse head manifest"):
        load_head(saved)


def test_a_head_saved_before_the_manifest_loads_and_gains_one_with_its_calibration(saved, caplog):
    from ucse.uncertainty.profile import UncertaintyProfile, load_uncertainty_profile

    (saved / MANIFEST_FILE).unlink()  # what save_head wrote before the manifest existed
    with caplog.at_level("WARNING", logger="ucse.heads"):
        head, meta = load_head(saved)
        load_head(saved)
    # said (an edited label order loaded silently without it), and once per folder, not per file or load
    told = [r.getMessage() for r in caplog.records if "without checking them for changes" in r.getMessage()]
    assert len(told) == 1 and told[0].startswith(f"{saved} has no manifest.json")
    hidden, mask = pad_batch(make_seqs(), "right")
    torch.testing.assert_close(head(hidden, mask).logits, _head()(hidden, mask).logits, rtol=0, atol=0)
    UncertaintyProfile.plain(3).save(saved)
    listed = json.loads((saved / MANIFEST_FILE).read_text())["files"]
    assert sorted(listed) == sorted(head_io.ARTIFACTS)
    assert load_uncertainty_profile(saved).fitted


def test_a_probes_embedding_width_is_its_states_width(tmp_path):
    # head.embed_dim does not size the logreg probe (its mu is the unit pooled state): read back as D, it
    # made the probe's own saved calibration refused for its (C, H) arrays
    head = build_head(HeadConfig(type=HeadType.logreg, embed_dim=4), 6, 3, Pooling.mean)
    save_head(head, tmp_path / "h", {})
    out = head(torch.randn(2, 5, 6), torch.ones(2, 5, dtype=torch.long))
    assert head_io.saved_sizes(tmp_path / "h") == (3, out.mean.shape[1]) == (3, 6)
