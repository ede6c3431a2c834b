"""Per-label figures against scikit-learn's, with labels absent, never predicted or perfect."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

from ucse.evaluation.metrics import classification_metrics
from ucse.training.label_report import confusion_counts, per_label, weakest_labels, weakest_line

NAMES = ["alpha", "beta", "gamma", "delta", "eps"]


def _case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, C) logits and (N,) labels: label 4 never occurs, label 3 is never predicted (its column is low)."""
    rng = np.random.default_rng(seed)
    y = rng.choice(4, size=60, p=[0.5, 0.3, 0.15, 0.05])
    logits = rng.normal(size=(60, 5))
    logits[np.arange(60), y] += rng.uniform(0, 3, size=60)  # right more often than not
    logits[:, 3] -= 50.0  # never the top
    return logits, y


@pytest.mark.parametrize("seed", range(5))
def test_rows_match_scikit_learn(seed):
    logits, y = _case(seed)
    pred = logits.argmax(1)
    m = confusion_counts(logits, y, 5)
    assert np.array_equal(m, confusion_matrix(y, pred, labels=range(5)))
    assert np.array_equal(confusion_counts(pred, y, 5), m)  # ids or scores: one matrix
    rows = per_label(m, NAMES)
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=range(5), zero_division=0)
    for i, row in enumerate(rows):
        assert row["label"] == NAMES[i] and row["support"] == s[i] and row["predicted"] == (pred == i).sum()
        # undefined figures are None exactly where scikit-learn divides by zero
        assert (row["precision"] is None) == ((pred == i).sum() == 0)
        assert (row["recall"] is None) == (s[i] == 0)
        assert row["precision"] == pytest.approx(p[i] if row["precision"] is not None else None)
        assert row["recall"] == pytest.approx(r[i] if row["recall"] is not None else None)
        if row["f1"] is not None:
            assert row["f1"] == pytest.approx(f[i])
    assert rows[4]["recall"] is None and rows[3]["precision"] is None and rows[3]["recall"] == 0.0
    # the mean of the defined F1s is the macro-F1 the metrics report (labels present or predicted)
    defined = [row["f1"] for row in rows if row["f1"] is not None]
    assert np.mean(defined) == pytest.approx(classification_metrics(logits, y, 5)["f1_macro"], abs=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_confused_with_is_the_commonest_wrong_answer(seed):
    logits, y = _case(seed)
    pred = logits.argmax(1)
    for i, row in enumerate(per_label(confusion_counts(pred, y, 5), NAMES)):
        wrong = pred[(y == i) & (pred != i)]
        if len(wrong) == 0:
            assert row["confused_with"] is None and row["confused_count"] == 0
            continue
        counts = np.bincount(wrong, minlength=5)
        assert row["confused_count"] == counts.max()
        assert row["confused_with"] == NAMES[int(np.flatnonzero(counts == counts.max())[0])]  # lowest id


def test_shape_is_checked():
    with pytest.raises(ValueError, match=r"\(5, 5\) for 5 labels"):
        per_label(np.zeros((4, 4), dtype=int), NAMES)


def test_weakest_labels_lowest_recall_first_and_untrusted_rows_skipped():
    m = np.array([[8, 2, 0], [3, 1, 0], [0, 0, 5]])  # recall 0.8, 0.25, 1.0
    rows = per_label(m, ["a", "b", "c"])
    assert [r["label"] for r in weakest_labels(rows, 2)] == ["b", "a"]
    line = weakest_line(rows, "test")
    # every label recalled fully has nothing to say: "c" is left out
    assert line == (
        "lowest recall by label on test: 'b' 1 of 4 right (0.25; 3 read as 'a'), 'a' 8 of 10 right (0.80; 2 "
        "read as 'b')"
    )
    assert weakest_line(per_label(np.diag([3, 4]), ["a", "b"]), "test") is None
    m[2, 1] = 1  # now every label has an error: all three named
    assert weakest_line(per_label(m, ["a", "b", "c"]), "test").startswith(
        "recall by label on test: 'b' 1 of 4"
    )
    assert weakest_line(rows, "test", k=1).startswith("lowest recall by label on test: 'b' 1 of 4")
    # read back from disk: anything malformed is skipped, never raised
    bad = [{"label": "x", "recall": "0.1", "support": 3}, None, {"label": 1.5, "recall": 0.0, "support": 1}]
    assert weakest_labels(bad + [rows[1]]) == [rows[1]]
    assert weakest_line("oops", "test") is None and weakest_line([], "test") is None
    # a label absent from the split has no recall: not named among the weakest, said at the end
    rows = per_label(np.array([[2, 1], [0, 0]]), ["a", "b"])
    assert [r["label"] for r in weakest_labels(rows)] == ["a"]
    assert weakest_line(rows, "test").endswith("; no test texts of 'b'")


def test_the_weakest_are_those_surest_to_be_weak():
    # a trial: three labels missed on their one test text each hid labels recalled 0.88 of 17 and 4 of 20
    from scipy.stats import binomtest

    names = ["one_a", "one_b", "one_c", "many", "fourth", "tenth", "fine"]
    right, n = [0, 0, 0, 15, 4, 2, 50], [1, 1, 1, 17, 20, 10, 50]
    m = np.zeros((7, 7), dtype=int)
    for i, (r, k) in enumerate(zip(right, n)):
        m[i, i], m[i, 6 if i != 6 else 0] = r, k - r
    rows = per_label(m, names)
    upper = {
        nm: binomtest(r, k).proportion_ci(method="wilson").high for nm, r, k in zip(names, right, n) if r < k
    }
    want = sorted(upper, key=lambda nm: (upper[nm], right[names.index(nm)] / n[names.index(nm)]))
    assert [r["label"] for r in weakest_labels(rows, 6)] == want[:6]
    assert [r["label"] for r in weakest_labels(rows, 2)] == ["fourth", "tenth"]  # 4 of 20 before 2 of 10


@pytest.mark.parametrize(
    ("right", "n", "shown"), [(508, 510, "0.996"), (1, 400, "0.003"), (9999, 10000, ">0.999"), (3, 7, "0.43")]
)
def test_shares_near_the_ends_are_not_rounded_onto_them(right, n, shown):
    m = np.array([[right, n - right], [0, 5]])
    assert f"{right} of {n} right ({shown};" in weakest_line(per_label(m, ["ok", "spam"]), "test")


def test_label_names_are_quoted_so_separators_and_numbers_read_as_one_name():
    m = np.array([[1, 1, 0], [0, 2, 0], [0, 1, 1]])
    line = weakest_line(per_label(m, ["billing, refunds", "5", "multi\nline"]), "test")
    assert line == (
        "lowest recall by label on test: 'billing, refunds' 1 of 2 right (0.50; 1 read as '5'), "
        "'multi\\nline' 1 of 2 right (0.50; 1 read as '5')"
    )
    assert "\n" not in line.replace("\\n", "")  # one line in the terminal


def test_answers_least_often_right():
    m = np.array([[5, 0, 0], [6, 2, 0], [3, 0, 9]])  # 'a' is answered 14 times, 5 of them right
    line = weakest_line(per_label(m, ["a", "b", "c"]), "test", of="precision")
    assert line == "answers least often right on test: 'a' 5 of 14 (0.36)"


def test_integer_labels_stay_integers_as_predict_answers_them():
    m = np.array([[1, 1, 0], [0, 2, 0], [0, 0, 0]])  # label 10 has no texts
    rows = per_label(m, [-5, 7, 10])
    assert [r["label"] for r in rows] == [-5, 7, 10] and rows[0]["confused_with"] == 7
    assert all(type(r["label"]) is int for r in rows)
    # read back from metrics.json (ints) the lines are the same as for names, quoted
    line = weakest_line(rows, "test")
    assert line == (
        "lowest recall by label on test: '-5' 1 of 2 right (0.50; 1 read as '7'); no test texts of '10'"
    )
    assert per_label(m, ["-5", "7", "10"])[0]["label"] == "-5"  # names stay names
    assert weakest_labels([{"label": True, "recall": 0.5, "support": 2}]) == []  # a bool is no label
