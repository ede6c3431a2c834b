"""``UcseClassifier``: label names, probabilities and uncertainty rows against independent references."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax
from tiny_models import sample_texts
from toy_tasks import OWN_CUES, own_rows

import ucse
from ucse.core.encoder import UcseEncoder
from ucse.heads.io import HEAD_FILES
from ucse.heads.manifest import write_manifest
from ucse.inference import classifier as classifier_module
from ucse.inference.classifier import UcseClassifier
from ucse.inference.head_files import read_head_files

NAMES = sorted(OWN_CUES)


@pytest.fixture(scope="module")
def clf(tiny_clf_run: Path) -> UcseClassifier:
    return UcseClassifier.from_pretrained(tiny_clf_run, device="cpu")


def _reference_probs(run: Path, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(raw logits, probabilities) computed outside the classifier: head logits / saved temperature."""
    enc = UcseEncoder.from_dir(run / "head")
    logits = enc.encode_gaussian(texts).logits.astype(np.float64)
    cal = json.loads((run / "head" / "calibration.json").read_text())["calibration"]
    assert cal["method"] == "temperature"
    return logits, softmax(logits / cal["temperature"], axis=1)


def test_classes_and_predictions_are_label_names(clf, tiny_clf_run):
    assert list(clf.classes_) == NAMES
    texts = [r["text"] for r in own_rows(30, seed=7)]
    labels = list(clf.predict(texts))
    assert len(labels) == 30 and set(labels) <= set(NAMES)
    probs = clf.predict_proba(texts)
    assert probs.shape == (30, 3)
    _, ref = _reference_probs(tiny_clf_run, texts)
    np.testing.assert_allclose(probs, ref, atol=1e-5)
    assert labels == [NAMES[i] for i in ref.argmax(1)]
    # The cue words are learnt: well above chance (1/3) on fresh rows.
    truth = [r["label"] for r in own_rows(30, seed=7)]
    assert np.mean([a == b for a, b in zip(labels, truth)]) > 0.5


def test_a_bare_string_is_one_text(clf):
    text = "my bank card kalo"
    assert list(clf.predict(text)) == list(clf.predict([text]))
    assert clf.predict_proba(text).shape == (1, 3)
    assert len(clf.predict_with_uncertainty(text)) == 1
    assert clf.encode_gaussian(text).mean.shape[0] == 1


def test_chunked_encoding_keeps_input_order(clf, monkeypatch):
    texts = sample_texts(40, seed=3, min_words=1, max_words=20)
    whole = clf.encode_gaussian(texts)
    monkeypatch.setattr(classifier_module, "CHUNK", 7)  # 6 chunks of the length-sorted order
    chunked = clf.encode_gaussian(texts)
    np.testing.assert_allclose(chunked.logits, whole.logits, atol=1e-5)
    np.testing.assert_allclose(chunked.mean, whole.mean, atol=1e-5)
    np.testing.assert_allclose(chunked.var, whole.var, atol=1e-5)


def test_rows_carry_calibrated_confidence_uncertainty_abstain_and_sets(clf, tiny_clf_run):
    texts = [r["text"] for r in own_rows(12, seed=5)]
    rows = clf.predict_with_uncertainty(texts, top_k=2)
    _, ref = _reference_probs(tiny_clf_run, texts)
    saved = json.loads((tiny_clf_run / "head" / "calibration.json").read_text())
    threshold = float(saved["abstain"]["threshold"])
    ood_threshold = float(saved["ood"]["threshold"])
    assert [r["text"] for r in rows] == texts
    for row, p in zip(rows, ref):
        assert set(row) == {
            "text",
            "label",
            "confidence",
            "uncertainty",
            "abstain",
            "ood",
            "ood_score",
            "probs",
            "set",
        }
        assert row["ood"] == (row["ood_score"] > ood_threshold)
        assert row["label"] == NAMES[int(p.argmax())]
        assert row["confidence"] == pytest.approx(p.max(), abs=1e-6)
        assert list(row["probs"]) == [NAMES[i] for i in np.argsort(-p)[:2]]
        assert list(row["probs"].values()) == pytest.approx(np.sort(p)[::-1][:2], abs=1e-6)
        # plain Python values (json.dumps and the CLI's writer take them as they are)
        assert type(row["label"]) is str and all(type(v) is float for v in row["probs"].values())
        assert type(row["confidence"]) is float
        assert row["abstain"] == (row["uncertainty"] > threshold)
        # Label names, most probable first (randomised APS may return an empty set).
        assert row["set"] == [NAMES[i] for i in np.argsort(-p) if NAMES[i] in row["set"]]
        if saved["score"] == "msp":
            assert row["uncertainty"] == pytest.approx(1 - p.max(), abs=1e-6)
    assert len(clf.predict_with_uncertainty(texts, sets=False)[0]) == 8


def test_without_calibration_it_falls_back_to_the_softmax(clf, tiny_clf_run, tmp_path):
    head = tmp_path / "head"
    shutil.copytree(tiny_clf_run / "head", head)
    for f in head.glob("calibration.*"):
        f.unlink()
    # Listed in the manifest but gone: a partial copy, which would silently drop abstention, sets and the flag
    with pytest.raises(ValueError, match=r"calibration\.(json|safetensors) is missing, though .*manifest"):
        UcseClassifier.from_pretrained(head, device="cpu")
    write_manifest(head, HEAD_FILES)  # a head saved without a profile lists none
    plain = UcseClassifier.from_pretrained(head, device="cpu")  # a head folder, not a run folder
    texts = [r["text"] for r in own_rows(9, seed=2)]
    logits, _ = _reference_probs(tiny_clf_run, texts)
    ref = softmax(logits, axis=1)
    rows = plain.predict_with_uncertainty(texts)
    assert plain.uncertainty_score_ == "msp"
    for row, p in zip(rows, ref):
        assert row["confidence"] == pytest.approx(p.max(), abs=1e-6)
        assert row["uncertainty"] == pytest.approx(1 - p.max(), abs=1e-6)
        assert row["abstain"] is False and "set" not in row


def test_missing_run_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        UcseClassifier.from_pretrained(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="neither a finished ucse run nor a head folder"):
        UcseClassifier.from_pretrained(tmp_path)


@pytest.mark.parametrize("form", ["(texts, labels)", "csv path"])
def test_ucse_train_then_predict_label_names(form, train_overrides, tmp_path, capsys):
    rows = own_rows(150, seed=1)
    if form == "csv path":
        import pandas as pd

        data = tmp_path / "tickets.csv"
        pd.DataFrame(rows).to_csv(data, index=False)
    else:
        data = ([r["text"] for r in rows], [r["label"] for r in rows])
    trained = ucse.train(data, **train_overrides(tmp_path / "run"), seed=1, device="cpu")
    shown = capsys.readouterr().out  # the Python API prints what `ucse train` prints
    assert shown.startswith(f"run: {tmp_path / 'run'}\ntest accuracy ")
    assert "uncertainty: calibration" in shown
    assert trained.metrics_["data"]["num_classes"] == 3
    assert trained.profile_.fitted  # the one pipeline: the head ships with its uncertainty profile
    clf = ucse.UcseClassifier.from_pretrained(trained.run_dir_, device="cpu")
    assert list(clf.classes_) == NAMES == list(trained.classes_)
    fresh = own_rows(30, seed=9)
    got = clf.predict([r["text"] for r in fresh])
    assert np.mean([g == r["label"] for g, r in zip(got, fresh)]) > 0.5


def test_ucse_train_rejects_a_bad_override(tmp_path):
    with pytest.raises(ValueError, match="lcl_weigth"):
        ucse.train(([" a"], ["x"]), loss={"lcl_weigth": 0.5})


def test_compile_head_runs_the_head_through_compiled_head(tiny_clf_run, monkeypatch):
    """``compile_head=True`` (``ucse predict compile_head=true``) sends every batch through ``CompiledHead``
    (here with its compiler off: tests/heads/test_compiled.py checks the compiled outputs) and changes nothing
    else; it is an estimator parameter, so ``clone`` keeps it."""
    import ucse.heads.compiled as compiled_module
    from ucse.heads.compiled import CompiledHead

    seen = []

    class Spy(CompiledHead):
        def __init__(self, head):
            super().__init__(head)
            self.compiled = None  # the eager fallback: the wiring is under test, not the compiler

        def __call__(self, hidden, mask):
            seen.append(hidden.shape[0])
            return super().__call__(hidden, mask)

    monkeypatch.setattr(compiled_module, "CompiledHead", Spy)  # the encoder imports it on first use
    texts = sample_texts(30, seed=8)
    plain = UcseClassifier.from_pretrained(tiny_clf_run, device="cpu")
    compiled = UcseClassifier.from_pretrained(tiny_clf_run, device="cpu", compile_head=True)
    assert compiled.get_params()["compile_head"] and not plain.get_params()["compile_head"]
    np.testing.assert_array_equal(compiled.predict_proba(texts), plain.predict_proba(texts))
    assert sum(seen) == len(texts)


def test_save_pretrained_writes_one_folder_that_loads_the_same_classifier(clf, tiny_clf_run, tmp_path):
    import ucse

    texts = sample_texts(12, seed=9)
    out = clf.save_pretrained(tmp_path / "saved")
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in (tiny_clf_run / "head").iterdir() if p.is_file())
    assert "manifest.json" in names and "calibration.json" in names  # the profile travels with the head
    meta = json.loads((out / "config.json").read_text())["meta"]
    assert meta["ucse_version"] == ucse.__version__ and meta["backbone_fingerprint"]
    again = UcseClassifier.from_pretrained(out, device="cpu")
    np.testing.assert_array_equal(again.predict_proba(texts), clf.predict_proba(texts))
    assert again.predict_with_uncertainty(texts) == clf.predict_with_uncertainty(texts)


def test_save_pretrained_replaces_nothing_unasked_and_publishes_nothing_tampered(clf, tiny_clf_run, tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="already holds files; nothing was written"):
        clf.save_pretrained(busy)
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    # overwrite=True replaces a saved head, never a folder of other files (`save_pretrained(".", ...)`)
    with pytest.raises(ValueError, match="it is not a saved head folder"):
        clf.save_pretrained(busy, overwrite=True)
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    older = tmp_path / "older"
    clf.save_pretrained(older)
    (older / "model.safetensors").write_bytes(b"an older head's weights")
    clf.save_pretrained(older, overwrite=True)
    assert (older / "model.safetensors").read_bytes() == (clf.head_dir_ / "model.safetensors").read_bytes()
    for overlapping in (clf.head_dir_ / "copy", clf.head_dir_.parent):  # inside the head; its run folder
        with pytest.raises(ValueError, match="overlaps the head folder"):
            clf.save_pretrained(overlapping, overwrite=True)
    assert (clf.head_dir_ / "model.safetensors").is_file()
    # a source file changed after it was saved: the copy fails its manifest and is never published
    source = tmp_path / "source"
    shutil.copytree(tiny_clf_run / "head", source)
    weights = source / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    tampered = UcseClassifier(device="cpu")
    tampered.head_dir_, tampered._head_files = source, read_head_files(source)  # as if loaded so
    with pytest.raises(ValueError, match="model.safetensors"):
        tampered.save_pretrained(tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_a_damaged_metrics_file_still_loads_the_run(tiny_clf_run, tmp_path, caplog):
    # metrics.json only informs (metrics_); a damaged one must not stop a run from predicting
    copy = tmp_path / "run"
    shutil.copytree(tiny_clf_run, copy)
    (copy / "metrics.json").write_text('{"test": ')
    with caplog.at_level(logging.WARNING, logger="ucse.config.run_layout"):
        damaged = UcseClassifier.from_pretrained(copy, device="cpu")
    assert damaged.metrics_ == {} and "metrics.json is unreadable" in caplog.text
    intact = UcseClassifier.from_pretrained(tiny_clf_run, device="cpu")
    assert intact.metrics_["data"]["num_classes"] == 3
    texts = [r["text"] for r in own_rows(12, seed=3)]
    np.testing.assert_array_equal(damaged.predict_proba(texts), intact.predict_proba(texts))
