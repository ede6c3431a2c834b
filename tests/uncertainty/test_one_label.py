"""A head answering one label for every held-out text is warned of (ucse/uncertainty/one_label.py)."""

from __future__ import annotations

import numpy as np

from ucse.uncertainty.one_label import warn_if_one_label


def test_one_answer_for_texts_of_several_labels_is_warned_of(caplog):
    rng = np.random.default_rng(0)
    labels = np.array([0] * 16 + [1] * 4)  # 80 % the commonest label
    constant = rng.normal(size=(20, 2)) + np.array([5.0, 0.0])  # argmax 0 everywhere
    assert warn_if_one_label(constant, labels, ["no", "yes"])
    assert "answers 'no' for every one of the 20 held-out texts, which hold 2 labels" in caplog.text
    caplog.clear()
    learned = constant.copy()
    learned[16:] = [0.0, 5.0]  # the minority answered too
    assert not warn_if_one_label(learned, labels, ["no", "yes"])
    assert not warn_if_one_label(constant, np.zeros(20, dtype=int), None)  # one label held out: right
    assert not warn_if_one_label(constant[:9], labels[:9], None)  # too few texts to say
    assert caplog.text == ""
    # the run is named: a sweep trains many, and the warning came between their lines
    assert warn_if_one_label(constant, labels, ["no", "yes"], "sweep/A/linear-base/seed0")
    assert "sweep/A/linear-base/seed0: the head answers 'no'" in caplog.text
