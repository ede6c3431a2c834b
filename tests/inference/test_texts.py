"""The texts a classifier is handed in memory (ucse/inference/texts.py)."""

import numpy as np
import pandas as pd
import pytest

from ucse.inference.texts import as_texts


def test_a_one_column_table_gives_its_rows():
    texts = ["my bank card", "a dog", "jazz"]
    # a DataFrame iterates its column names: predict(df) answered once, for the text "text"
    assert as_texts(pd.DataFrame({"text": texts})) == texts
    assert as_texts(np.array(texts, dtype=object)[:, None]) == texts
    assert as_texts(pd.Series(texts)) == texts and as_texts(tuple(texts)) == texts
    assert as_texts("one text") == ["one text"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            pd.DataFrame({"id": [1, 2], "text": ["a", "b"]}),
            r"one column of strings, got a table of shape \(2, 2\)",
        ),
        (b"my bank card", "texts are bytes; decode them"),
    ],
)
def test_a_table_of_several_columns_or_bytes_is_refused(value, message):
    with pytest.raises(ValueError, match=message):
        as_texts(value)


@pytest.mark.parametrize("missing", [None, np.nan, float("nan"), pd.NA])
def test_a_missing_label_is_refused_naming_its_row(missing):
    # None / NaN became a class named 'nan' (or 'None') and was trained as one
    from ucse.inference.texts import as_labels

    y = ["a", "b", "a", missing, "b", missing]
    with pytest.raises(ValueError, match=r"y\[3\] is missing \(.*; 2 of 6 labels are\): drop those rows"):
        as_labels(y, 6)
    with pytest.raises(ValueError, match=r"y\[3\] is missing"):
        as_labels(pd.Series(y, dtype=object), 6)


def test_integer_labels_in_an_object_array_are_integers():
    # np.array(ids, dtype=object) has kind 'O': the labels were saved as text and came back as '0', '10', '2'
    from ucse.inference.texts import as_labels

    given, _, classes = as_labels(np.array([10, 2, 1, 0, np.int64(2)], dtype=object), 5)
    assert given.dtype == np.int64 and given.tolist() == [10, 2, 1, 0, 2] and classes == [0, 1, 2, 10]
    flags, _, _ = as_labels(np.array([True, False, True], dtype=object), 3)  # bools are no ids
    assert flags.dtype == object


def test_whole_number_float_labels_are_integers_and_other_numbers_or_a_mix_are_refused():
    # a pandas integer column that held NaN is float64 after dropna: saved as '1.0', '10.0', '2.0' and sorted
    # as text, the reloaded predict_proba columns meant other classes
    from sklearn.utils.multiclass import type_of_target

    from ucse.inference.texts import as_labels

    given, labels, classes = as_labels(pd.Series([1.0, 10.0, 2.0, 1.0]), 4)
    assert given.dtype == np.int64 and classes == [1, 2, 10] and [str(c) for c in classes] == ["1", "2", "10"]
    # 0.5, 1.5, 2.5, 10.5 trained as names: score() then failed ("continuous is not supported") and a reload
    # gave string classes in text order, predict_proba's columns moved; scikit-learn refuses such a target
    halves = np.array([0.5, 1.5, 2.5, 10.5])
    assert type_of_target(halves) == "continuous"
    with pytest.raises(ValueError, match=r"no class labels \(0.5\)"):
        as_labels(halves, 4)
    # numbers among names: score() failed comparing them ('<' not supported)
    with pytest.raises(ValueError, match=r"mixes numbers and other labels \(1 and 'a'\)"):
        as_labels([1, "a", 2, "a"], 4)
    assert as_labels(np.array([True, False, True]), 3)[2] == [False, True]  # booleans are no numbers here
    # (a review) 1.5 in an object column passed as a name, inf raised OverflowError, and 1 and 1.0 were two
    # classes that printed alike (the fit failed at its end)
    for odd, shown in ((np.array([1, 1.5, 2], dtype=object), "1.5"), (np.array([1.0, np.inf]), "inf")):
        with pytest.raises(ValueError, match=f"no class labels \\({shown}\\)"):
            as_labels(odd, len(odd))
    given, _, classes = as_labels(np.array([1, 1.0, 2], dtype=object), 3)
    assert given.dtype == np.int64 and classes == [1, 2]


@pytest.mark.parametrize(
    "y",
    [
        [["a"], ["a", "b"], ["b"]],  # ragged: numpy's own "inhomogeneous shape" error before
        [{"a"}, {"b"}, {"a"}],  # sets: "unhashable type: 'set'" before
        pd.Series([["a"], ["b"], ["a"]]),
        np.eye(3, dtype=int),  # an indicator matrix, as MultiLabelBinarizer gives
        pd.DataFrame(np.eye(3), columns=["a", "b", "c"]),
    ],
)
def test_several_labels_per_text_are_refused_saying_multi_label(y):
    from ucse.inference.texts import as_labels

    with pytest.raises(ValueError, match="several labels per text .multi-label classification. are not"):
        as_labels(y, 3)


def test_a_column_vector_of_labels_is_raveled_with_scikit_learns_warning():
    # it was refused ("y has shape (3, 1)"), where scikit-learn's classifiers take it with a warning
    from sklearn.exceptions import DataConversionWarning

    from ucse.inference.texts import as_labels

    for y, want in (
        (np.array([[1], [0], [1]]), [0, 1]),
        (pd.DataFrame({"team": ["b", "a", "b"]}), ["a", "b"]),
    ):
        with pytest.warns(DataConversionWarning):
            given, labels, classes = as_labels(y, 3)
        assert given.ndim == labels.ndim == 1 and classes == want
