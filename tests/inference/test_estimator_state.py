"""What a fitted ``UcseClassifier`` owns, and what it leaves of its caller's process (a review of the
estimator inside scikit-learn: pickles of another fold's head, lost warnings, a moved random stream).

References: the estimator's own predictions before the change, scikit-learn's conventions (a pickled fitted
estimator reproduces its predictions; ``check_estimator``'s input tags; ``NotFittedError`` first), and the
caller's state read before and after.
"""

from __future__ import annotations

import logging
import pickle
import shutil
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError

from ucse.inference.classifier import UcseClassifier


def test_a_pickle_or_save_holds_the_estimators_own_head_whatever_its_folder_holds_later(
    tiny_params, rows, tmp_path
):
    # cross_validate with one output_dir and overwrite (what the refit error suggests): a joblib dump of fold
    # 0's estimator held fold 1's head, read from the shared folder at dump time
    texts, y = rows
    params = dict(tiny_params, output_dir=str(tmp_path / "run"))
    params["overrides"] = {**tiny_params["overrides"], "overwrite": True}
    first = UcseClassifier(**params).fit(texts[:60], y[:60])
    before = first.predict_proba(texts[180:])
    second = UcseClassifier(**params).fit(texts[60:120], y[60:120])  # the same folder, written over
    assert not np.allclose(second.predict_proba(texts[180:]), before, atol=1e-3)  # another model
    back = pickle.loads(pickle.dumps(first))
    np.testing.assert_allclose(back.predict_proba(texts[180:]), before, atol=1e-6)
    saved = first.save_pretrained(tmp_path / "saved")
    again = UcseClassifier.from_pretrained(saved, device="cpu")
    np.testing.assert_allclose(again.predict_proba(texts[180:]), before, atol=1e-6)
    # the folder removed: the pickle held no head (it failed only when loaded), save_pretrained failed
    shutil.rmtree(tmp_path / "run")
    back = pickle.loads(pickle.dumps(first))
    np.testing.assert_allclose(back.predict_proba(texts[180:]), before, atol=1e-6)
    first.save_pretrained(tmp_path / "saved2")
    assert (tmp_path / "saved2" / "model.safetensors").is_file()


def test_fit_load_and_unpickle_leave_the_callers_random_stream_filters_and_loggers(tiny_params, rows):
    texts, y = rows
    torch.manual_seed(456)
    expected = torch.rand(3)
    names = (
        "lightning.pytorch.utilities.rank_zero",
        "lightning.fabric.utilities.rank_zero",
        "ucse.training.run",
    )
    levels = {n: logging.getLogger(n).level for n in names}
    filters = list(warnings.filters)
    torch.manual_seed(456)
    clf = UcseClassifier(**tiny_params).fit(texts[:90], y[:90])  # the head's modules drew their init
    back = pickle.loads(pickle.dumps(clf))
    UcseClassifier.from_pretrained(clf.run_dir_, device="cpu")
    assert torch.equal(torch.rand(3), expected)
    assert warnings.filters == filters  # Lightning's notes hidden for the fit only
    assert {n: logging.getLogger(n).level for n in names} == levels
    assert back.run_dir_ is None  # the temporary run folder was the other estimator's


def test_a_refit_removes_the_previous_fits_temporary_folder(tiny_params, rows):
    texts, y = rows
    clf = UcseClassifier(**tiny_params).fit(texts[:60], y[:60])
    first = clf.run_dir_.parent
    clf.fit(texts[60:120], y[60:120])
    assert not first.exists() and clf.run_dir_.parent.is_dir()
    assert clf.predict(texts[180:]).shape == (60,)


def test_text_input_tags_and_not_fitted_before_the_inputs_checks(tiny_params):
    tags = UcseClassifier(**tiny_params).__sklearn_tags__()
    assert tags.input_tags.string and not tags.input_tags.two_d_array  # as CountVectorizer's
    for method in ("predict", "predict_proba", "predict_with_uncertainty"):
        with pytest.raises(NotFittedError):  # a two-column table raised ValueError first
            getattr(UcseClassifier(**tiny_params), method)(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="X holds no texts"):  # was "y holds a single label ([])"
        UcseClassifier(**tiny_params).fit([], [])
