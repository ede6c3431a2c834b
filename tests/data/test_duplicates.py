"""Copies of one text among rows (ucse/data/duplicates.py) and the warnings they raise when loading."""

from __future__ import annotations

import numpy as np
from toy_tasks import own_rows, write_rows

from ucse.data import load_task_data
from ucse.data.duplicates import text_groups, text_key


def test_copies_share_a_key_up_to_case_form_punctuation_and_spacing():
    key = text_key("How do I  reset my PIN?")
    assert key == text_key("how do i reset my pin !") == "how do i reset my pin"
    assert text_key("ﬁle caf\u00e9") == text_key("FILE CAFE\u0301")  # NFKC: a ligature, a combining accent
    assert text_key("reset my pin") != text_key("reset my pins")
    assert text_key("🙂") != text_key("🚚❓") and text_key("?!") != text_key("...")  # no words: as written


def test_groups_number_copies_alike_and_are_none_without_copies():
    groups = text_groups(["a b", "c", "A  b!", "d", "c"])
    assert groups.tolist() == [0, 1, 0, 2, 1]
    assert text_groups(["a", "b", "c"]) is None


def test_near_copies_across_splits_and_test_texts_in_validation_are_warned(tmp_path, caplog):
    # "5 of 25 test texts also occur in train" counted exact strings only, and never compared test with
    # validation, on which head=auto's shipped model trains too
    rows = own_rows(60)
    write_rows(tmp_path / "t" / "train.csv", rows[:40])
    write_rows(tmp_path / "t" / "val.csv", rows[40:])
    shouted = [{**r, "text": r["text"].upper() + " ?!"} for r in rows[:3]]  # near copies of train rows
    write_rows(tmp_path / "t" / "test.csv", shouted + rows[40:44] + own_rows(20, seed=1))
    load_task_data(tmp_path / "t")
    assert "7 of 27 test texts also occur in train or validation" in caplog.text
    assert "validation texts also occur" not in caplog.text
    assert np.all(text_groups([r["text"] for r in shouted + rows[:3]]) == [0, 1, 2, 0, 1, 2])
