"""Copies of one text among rows (ucse/data/duplicates.py) and the warnings they raise when loading."""

from __future__ import annotations

import random

import numpy as np
import pytest
from omegaconf import OmegaConf
from toy_tasks import make_task, own_rows, write_rows

from ucse.config import DataConfig, build_config
from ucse.config.build import from_yaml, to_yaml
from ucse.data import load_classification, load_task_data
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


def _keys(td, split):
    return {text_key(t) for t in td.texts(split)}


def _doubled_rows(n: int = 90) -> list[dict]:
    """``own_rows(n)`` and a near copy of every third row (shouted, another label for one), shuffled."""
    rows = own_rows(n)
    copies = [{**r, "text": r["text"].upper() + " !!"} for r in rows[::3]]
    copies[0]["label"] = rows[1]["label"]  # a copy with a conflicting label moves with its text too
    mixed = rows + copies
    random.Random(0).shuffle(mixed)
    return mixed


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_carved_test_and_validation_slices_keep_a_texts_copies_on_one_side(tmp_path, seed, caplog):
    # a copy carved into test or validation scored a row its twin trained on (the leakage review): the
    # slices are carved from one row per text and every copy follows it
    path = write_rows(tmp_path / "tickets.csv", _doubled_rows())
    caplog.set_level("INFO", logger="ucse.data.splitting")
    td = load_task_data(path, data=DataConfig(group_copies=True), seed=seed)
    train, val, test = (_keys(td, s) for s in ("train", "validation", "test"))
    assert not (train & val) and not (train & test) and not (val & test)
    assert sum(len(td.texts(s)) for s in ("train", "validation", "test")) == 120  # every row kept
    # sizes: fractions of the 90 distinct texts, stratified over the 3 labels as the plain carve is
    assert len(test) == 18 and len(val) == 8
    # one line for both carves (it printed once per carve, with two counts)
    assert caplog.text.count("rows are copies of another text") == 1
    assert "30 rows are copies" in caplog.text and "data.test_fraction and data.val_fraction" in caplog.text
    assert "also occur in" not in caplog.text  # the overlap warning has nothing left to say
    # the plain carve (recipe=paper's) splits copies: the check above can fail
    plain = load_task_data(path, data=DataConfig(group_copies=False), seed=seed)
    p_train, p_test = _keys(plain, "train"), _keys(plain, "test")
    assert p_train & p_test


def test_without_copies_the_carve_takes_the_plain_rows(tmp_path):
    path = write_rows(tmp_path / "tickets.csv", own_rows(90))
    for seed in (0, 1):
        grouped = load_task_data(path, data=DataConfig(group_copies=True), seed=seed)
        plain = load_task_data(path, data=DataConfig(group_copies=False), seed=seed)
        for split in ("train", "validation", "test"):
            assert grouped.texts(split) == plain.texts(split)


def test_a_registered_tasks_carved_validation_keeps_copies_together(tmp_path):
    # the shared/data layout (Banking77 has no validation split): the same rule as a user's file
    names = sorted({r["label"] for r in own_rows(3)})

    def ids(rows):
        return [{**r, "label": names.index(r["label"]), "label_text": r["label"]} for r in rows]

    root = make_task(tmp_path, {"train": ids(_doubled_rows()), "test": ids(own_rows(30, seed=1))})
    for group in (True, False):
        cfg = build_config([f"data.root={root}", "task.name=ToyClassification", f"data.group_copies={group}"])
        td = load_classification(cfg.task, cfg.data, seed=0)
        shared = _keys(td, "train") & _keys(td, "validation")
        assert (not shared) if group else shared


def test_copies_are_grouped_by_default_but_not_under_the_papers_recipe(tmp_path):
    assert build_config([]).data.group_copies is True
    assert build_config(["recipe=paper"]).data.group_copies is False
    assert build_config(["recipe=paper", "data.group_copies=true"]).data.group_copies is True
    assert build_config(["data.group_copies=false"]).data.group_copies is False
    # a run's config.yaml records the value; one written before the setting carved plainly
    cfg = build_config([])
    (tmp_path / "new.yaml").write_text(to_yaml(cfg))
    assert from_yaml(tmp_path / "new.yaml").data.group_copies is True
    old = OmegaConf.create(to_yaml(cfg))
    del old.data["group_copies"]
    OmegaConf.save(old, tmp_path / "old.yaml")
    assert from_yaml(tmp_path / "old.yaml").data.group_copies is False


def test_labels_whose_rows_are_copies_of_one_text_keep_rows_to_train_on(tmp_path, caplog):
    # a review: with every label one text repeated, the grouped carve's fallback took a label's only text
    # into the slice (train {'b': 18}, test {'a': 20}) and training failed on a label with no rows
    rows = [{"text": f"the {name} text", "label": name} for name in ("a", "b", "c") for _ in range(20)]
    path = write_rows(tmp_path / "repeated.csv", rows)
    td = load_task_data(path, data=DataConfig(group_copies=True), seed=0)
    assert {td.label_names[i] for i in td.labels("train").tolist()} == {"a", "b", "c"}
    assert "carved row by row instead" in caplog.text


def test_a_label_of_few_distinct_texts_is_kept_for_training_and_said(tmp_path, caplog):
    # 6 rows of label 'c' are copies of 2 texts: the grouped carve keeps it whole (as a 2-row label), and
    # the row count (6) said nothing of it
    rows = [r for r in own_rows(90) if r["label"] != "c"][:60]
    names = sorted({r["label"] for r in rows})
    rows += [{"text": f"the {w} text", "label": "c"} for w in ("first", "second") for _ in range(3)]
    path = write_rows(tmp_path / "few.csv", rows)
    td = load_task_data(path, data=DataConfig(group_copies=True), seed=0)
    c = td.label_names.index("c")
    assert td.labels("train").tolist().count(c) == 6  # every row of 'c' trains; none is scored
    said = [r.getMessage() for r in caplog.records if "distinct texts" in r.getMessage()]
    assert len(said) == 1 and "1 of 4 labels have copies of only 2 or fewer distinct texts ('c')" in said[0]
    assert not any(f"'{n}'" in said[0] for n in names)
    # without grouping the plain carve takes rows of 'c' into the slices: nothing to say
    caplog.clear()
    plain = load_task_data(path, data=DataConfig(group_copies=False), seed=0)
    assert plain.labels("train").tolist().count(c) < 6 and "distinct texts" not in caplog.text
