"""``UcseClassifier`` as a scikit-learn estimator: clone, Pipeline, cross_val_score, GridSearchCV, pickle.

The references are scikit-learn's own machinery (``clone``, ``get_params``, ``accuracy_score``) and a
brute-force recount of what the estimator returns; the data are the toy task's cue-word texts, learnable
by the tiny random BERT (a cue word per class), so accuracy well above chance is a property, not a value.
"""

from __future__ import annotations

import math
import pickle
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.metrics import accuracy_score
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from toy_tasks import OWN_CUES

import ucse
from ucse.config.run_layout import RunFolder
from ucse.inference.classifier import UcseClassifier

CHANCE = 1 / len(OWN_CUES)


def test_init_stores_parameters_only_and_clone_round_trips(tiny_params, tmp_path):
    est = UcseClassifier(**tiny_params, seed=4)
    assert not [k for k in vars(est) if k.endswith("_")]  # nothing learnt, nothing read
    params = est.get_params()
    assert params["head"] == "logreg" and params["seed"] == 4 and params["output_dir"] is None
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    twin.set_params(head="textcnn", output_dir=str(tmp_path))
    assert twin.head == "textcnn" and est.head == "logreg"


def test_fit_predict_score_with_integer_labels(tiny_params, rows):
    texts, names = rows
    ids = np.asarray([sorted(OWN_CUES).index(n) * 5 + 2 for n in names])  # 2, 7, 12: not 0..C-1
    clf = UcseClassifier(**tiny_params).fit(texts[:180], ids[:180])
    assert clf.classes_.tolist() == [2, 7, 12] and clf.classes_.dtype.kind == "i"
    assert "test" not in clf.metrics_ and clf.profile_.fitted  # no test slice carved; profile fitted
    pred = clf.predict(texts[180:])
    assert isinstance(pred, np.ndarray) and pred.shape == (60,) and set(pred.tolist()) <= {2, 7, 12}
    proba = clf.predict_proba(texts[180:])
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(1)], pred)  # columns follow classes_
    assert clf.score(texts[180:], ids[180:]) == accuracy_score(ids[180:], pred) > CHANCE + 0.2
    # unsigned ids and a one-column DataFrame of texts: rows carry ints, as predict does (they were the
    # strings '2', '7', '12'), and a DataFrame gives one row per text (it gave one, for its column name)
    clf = UcseClassifier(**tiny_params).fit(texts[:180], ids[:180].astype(np.uint8))
    rows_out = clf.predict_with_uncertainty(pd.DataFrame({"text": texts[180:]}))
    assert len(rows_out) == 60 and [r["label"] for r in rows_out] == clf.predict(texts[180:]).tolist()
    assert all(type(r["label"]) is int and all(type(x) is int for x in r["set"]) for r in rows_out)


def test_labels_that_sort_differently_as_text_keep_their_columns(tiny_params, rows, tmp_path):
    """Labels 9 and 10 sort 10 < 9 as text: classes_ stay numeric, also saved and loaded back."""
    texts, names = rows
    lookup = {n: v for n, v in zip(sorted(OWN_CUES), (9, 10, 100))}
    y = np.asarray([lookup[n] for n in names])
    clf = UcseClassifier(**tiny_params).fit(texts[:180], y[:180])
    assert clf.classes_.tolist() == [9, 10, 100]
    proba, pred = clf.predict_proba(texts[180:]), clf.predict(texts[180:])
    np.testing.assert_array_equal(clf.classes_[proba.argmax(1)], pred)
    assert accuracy_score(y[180:], pred) > CHANCE + 0.2
    rows_out = clf.predict_with_uncertainty(texts[180:185])
    assert [r["label"] for r in rows_out] == pred[:5].tolist()  # integers, as predict() gives them
    # save_pretrained -> from_pretrained gives the same integers back, in the same columns
    back = UcseClassifier.from_pretrained(clf.save_pretrained(tmp_path / "model"), device="cpu")
    assert back.classes_.tolist() == [9, 10, 100] and back.classes_.dtype.kind == "i"
    np.testing.assert_array_equal(back.predict(texts[180:]), pred)
    np.testing.assert_allclose(back.predict_proba(texts[180:]), proba, atol=1e-6)


def test_pipeline_and_cross_val_score(tiny_params, rows):
    texts, y = rows
    pipe = Pipeline([("clf", UcseClassifier(**tiny_params))])
    scores = cross_val_score(pipe, texts, y, cv=3)
    assert scores.shape == (3,) and (scores > CHANCE + 0.2).all()


def test_grid_search_over_the_head(tiny_params, rows):
    texts, y = rows
    params = dict(tiny_params, overrides={**tiny_params["overrides"], "recipe": "paper", "optim.epochs": 3})
    search = GridSearchCV(UcseClassifier(**params), {"head": ["logreg", "textcnn"]}, cv=2)
    search.fit(texts[:150], y[:150])
    assert set(search.cv_results_["param_head"]) == {"logreg", "textcnn"}
    assert search.best_params_["head"] in {"logreg", "textcnn"}
    assert search.best_estimator_.head == search.best_params_["head"]
    assert search.score(texts[150:], y[150:]) > CHANCE + 0.2


def test_pickle_is_small_and_predicts_the_same(tiny_params, rows):
    texts, y = rows
    clf = UcseClassifier(**tiny_params).fit(texts[:180], y[:180])
    (clf.head_dir_ / "notes.txt").write_text("SECRET-CONTENT")  # not a head file (or a link to one)
    blob = pickle.dumps(clf)
    assert len(blob) < 1_000_000 and b"SECRET-CONTENT" not in blob
    back = pickle.loads(blob)
    assert back.head_dir_ != clf.head_dir_  # its own copy of the head folder
    np.testing.assert_array_equal(back.predict(texts[180:]), clf.predict(texts[180:]))
    np.testing.assert_allclose(back.predict_proba(texts[180:]), clf.predict_proba(texts[180:]), atol=1e-6)


def test_precision_chosen_at_load_is_used_and_travels_with_the_estimator(tiny_params, rows, tmp_path):
    # A batch job saw a text's confidence move by 8e-3 with its batch companions under bf16 and could not ask
    # predict for fp32 (bench/batch_companions.py measures both).
    texts, y = rows
    saved = UcseClassifier(**tiny_params).fit(texts[:180], y[:180]).save_pretrained(tmp_path / "model")
    as_trained = UcseClassifier.from_pretrained(saved, device="cpu")  # the run's fp32
    bf16 = UcseClassifier.from_pretrained(saved, device="cpu", precision="bf16")
    assert as_trained.encoder_.backbone.precision.value == "fp32"
    assert bf16.encoder_.backbone.precision.value == "bf16"
    p32, p16 = as_trained.predict_proba(texts[180:]), bf16.predict_proba(texts[180:])
    assert not np.array_equal(p32, p16)  # bf16 arithmetic ran
    np.testing.assert_allclose(p16, p32, atol=0.05)  # bf16's 8 mantissa bits, through a small model
    back = pickle.loads(pickle.dumps(bf16))
    assert back.encoder_.backbone.precision.value == "bf16"
    np.testing.assert_array_equal(back.predict_proba(texts[180:]), p16)
    # fp32: a text's answer does not depend on the texts it is batched with (to float32 rounding)
    alone = np.concatenate([as_trained.predict_proba([t]) for t in texts[180:190]])
    np.testing.assert_allclose(alone, p32[:10], atol=1e-5)
    with pytest.raises(ValueError, match="fp16"):
        UcseClassifier.from_pretrained(saved, device="cpu", precision="fp16")


def test_temporary_run_folder_goes_with_the_estimator(tiny_params, rows):
    import gc

    texts, y = rows
    clf = UcseClassifier(**tiny_params).fit(texts[:120], y[:120])
    folder = clf.run_dir_.parent
    assert folder.is_dir()
    del clf
    gc.collect()
    assert not folder.exists()


def test_output_dir_keeps_the_run(tiny_params, rows, tmp_path):
    texts, y = rows
    clf = UcseClassifier(**tiny_params, output_dir=str(tmp_path / "run")).fit(texts[:120], y[:120])
    assert clf.run_dir_ == tmp_path / "run" and (tmp_path / "run" / "head" / "calibration.json").is_file()
    again = UcseClassifier.from_pretrained(tmp_path / "run", device="cpu")
    np.testing.assert_array_equal(again.predict(texts[120:]), clf.predict(texts[120:]))


def test_the_uncertifiable_warning_offers_no_command_it_cannot_serve(tiny_params, rows, tmp_path, caplog):
    # The estimator trains on rows in memory: its scratch folder goes with it, so the warnings offer the
    # setting for the next fit; a kept folder holds its rows (rows.parquet), which `ucse calibrate` reads.
    texts, y = rows
    with caplog.at_level("WARNING", logger="ucse.uncertainty"):
        UcseClassifier(**tiny_params).fit(texts, y)  # 24 validation texts: 5 % error is not certifiable
        scratch = caplog.text
        caplog.clear()
        UcseClassifier(**tiny_params, output_dir=str(tmp_path / "kept")).fit(texts, y)
        kept = caplog.text
        caplog.clear()
        served = UcseClassifier.from_pretrained(tmp_path / "kept", device="cpu")
    assert served.profile_.info["recalibrate"] is True
    assert "retraining with `uncertainty.abstain." in scratch and "ucse calibrate" not in scratch
    command = f"`ucse calibrate run={tmp_path / 'kept'} uncertainty.abstain."
    for said in (kept, caplog.text):
        assert command in said and "retraining" not in said
    assert RunFolder.SCRATCH_PREFIX not in scratch


def test_bad_fit_inputs_are_clear_errors(tiny_params):
    with pytest.raises(ValueError, match="one label per text"):
        UcseClassifier(**tiny_params).fit(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="print alike"):
        UcseClassifier(**tiny_params).fit(["a b", "c d", "e f", "g h"], [Decimal(1), "1", Decimal(1), "1"])
    # one label: "Check data.label_column='label'" named a setting an estimator user never gave
    with pytest.raises(
        ValueError, match=r"y holds a single label \(\['x'\]\); a classifier needs two or more"
    ):
        UcseClassifier(**tiny_params).fit(["a b", "c d"], ["x", "x"])
    with pytest.raises(ValueError, match="hed"):
        UcseClassifier(**dict(tiny_params, head="hed")).fit(["a b", "c d"], ["x", "y"])
    # a misspelt override named its origin "command line" (there was none)
    bad = dict(tiny_params, overrides={**tiny_params["overrides"], "optim.lrr": 1})
    with pytest.raises(ValueError, match=r"key 'optim.lrr' \(from the estimator's parameters\)"):
        UcseClassifier(**bad).fit(["a b", "c d"], ["x", "y"])
    with pytest.raises(ValueError, match=r"'optim.lrr' \(from ucse.train's keyword arguments\)"):
        ucse.train((["a b", "c d"], ["x", "y"]), **{"optim.lrr": 1})


def test_unfitted_predict_says_fit_first(tiny_params):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        UcseClassifier(**tiny_params).predict(["a"])


@pytest.mark.parametrize("dtype", [object, float])
def test_ids_as_objects_or_floats_survive_a_reload_with_their_columns(tiny_params, rows, tmp_path, dtype):
    # kind 'O' (or 'f') saved the ids as text: after from_pretrained classes_ were '0', '10', '2' (or '1.0',
    # '10.0', '2.0') and a column of predict_proba meant another class (|diff| up to 0.41 / 0.99)
    texts, names = rows
    ids = np.asarray([[10, 2, 1][sorted(OWN_CUES).index(n)] for n in names], dtype=dtype)
    clf = UcseClassifier(**tiny_params).fit(texts[:120], ids[:120])
    clf.save_pretrained(tmp_path / "saved")
    again = UcseClassifier.from_pretrained(tmp_path / "saved", device="cpu")
    assert clf.classes_.tolist() == again.classes_.tolist() == [1, 2, 10]
    assert again.classes_.dtype.kind == "i"
    np.testing.assert_allclose(again.predict_proba(texts[120:]), clf.predict_proba(texts[120:]), atol=1e-6)
    assert again.predict(texts[120:]).tolist() == clf.predict(texts[120:]).tolist()


def test_a_second_fit_into_one_output_dir_says_how_in_python(tiny_params, rows, tmp_path):
    # the second fold of cross_val_score met "Pass overwrite=true ... ckpt_path=last": command-line words
    texts, y = rows
    est = UcseClassifier(**tiny_params, output_dir=str(tmp_path / "run")).fit(texts[:90], y[:90])
    with pytest.raises(
        ValueError, match=r"already holds a run; nothing was changed. Pass overrides=\{'overwrite'"
    ):
        est.fit(texts[:90], y[:90])
    said_no = dict(tiny_params, overrides={**tiny_params["overrides"], "overwrite": "false"})
    with pytest.raises(ValueError, match=r"Pass overrides=\{'overwrite'"):  # 'false' asks for nothing
        UcseClassifier(**said_no, output_dir=str(tmp_path / "run")).fit(texts[:90], y[:90])
    again = dict(tiny_params, overrides={**tiny_params["overrides"], "overwrite": True})
    UcseClassifier(**again, output_dir=str(tmp_path / "run")).fit(texts[:90], y[:90])  # asked: replaced
    with pytest.raises(ValueError, match="X is one string; fit needs a list of texts"):
        UcseClassifier(**tiny_params).fit("hello world", ["a"])


def test_a_small_fit_says_its_sets_and_flag_answer_the_same_for_every_text(tiny_params, rows, caplog):
    # 40 rows calibrated on their 10 % validation slice (data.refit=false; by default the probe is
    # cross-fitted over all 40) leave 4 held-out texts: every set holds every label and the flag flags
    # nothing; from Python nothing said so (the command's summary said it of the flag only)
    texts, y = rows
    holdout = {**tiny_params, "overrides": {**tiny_params["overrides"], "data": {"refit": False}}}
    with caplog.at_level("WARNING", logger="ucse.uncertainty"):
        clf = UcseClassifier(**holdout).fit(texts[:40], y[:40])
    n = clf.profile_.info["n_validation"]
    said = f"every prediction set holds every label: a set at alpha 0.1 needs 9+ held-out texts, {n} here"
    assert n < 9 and said in caplog.text
    assert all(set(row["set"]) == set(clf.classes_) for row in clf.predict_with_uncertainty(texts[40:44]))
    if clf.profile_.ood is not None:
        assert "the out-of-scope flag flags no text" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="ucse.uncertainty"):  # no repeat where warnings were declined:
        pickle.loads(pickle.dumps(clf))  # joblib ships estimators between processes this way
        UcseClassifier.from_pretrained(clf.run_dir_, device="cpu", warn=False)
    assert "every prediction set" not in caplog.text


def test_a_small_fit_of_the_probe_is_calibrated_on_every_row(tiny_params, rows):
    # the same 40 rows by default: the probe ships fitted on all 40 and is calibrated on its out-of-fold
    # outputs over them, so the sets and the flag have held-out texts to be set on (a user's trial: a 10 %
    # slice of 120 texts certified nothing and set no out-of-scope threshold)
    texts, y = rows
    clf = UcseClassifier(**tiny_params).fit(texts[:40], y[:40])
    assert clf.profile_.info["n_validation"] == 40
    assert clf.profile_.qhat is not None and math.isfinite(clf.profile_.qhat)  # 4 texts: every label


def test_from_pretrained_names_its_own_argument_not_a_command_setting(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^UcseClassifier.from_pretrained: .*nope: no such folder"):
        UcseClassifier.from_pretrained(tmp_path / "nope")
