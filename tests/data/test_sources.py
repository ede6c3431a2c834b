"""Your own data: every accepted form loads to the same checked, split TaskData with string labels."""

import json
import math
from collections import Counter

import datasets
import pandas as pd
import pytest
from toy_tasks import OWN_CUES, OWN_FORMATS, make_task, own_rows, toy_data, toy_rows, toy_task, write_rows

from ucse.config import DataConfig, TaskConfig, build_config
from ucse.data import DataError, load_classification, load_task_data

NAMES = sorted(OWN_CUES)


def _pairs(td, split):
    return sorted((t, td.label_names[y]) for t, y in zip(td.splits[split]["text"], td.splits[split]["label"]))


def _all_pairs(td):
    return sorted(p for s in ("train", "validation", "test") for p in _pairs(td, s))


@pytest.mark.parametrize("fmt", OWN_FORMATS)
def test_single_file_every_format_carves_stratified_splits(tmp_path, fmt):
    rows = own_rows(90)
    path = write_rows(tmp_path / f"reviews.{fmt}", rows)
    td = load_task_data(path)
    assert td.name == "reviews" and td.source == str(path)
    assert td.label_names == NAMES
    assert td.splits["train"].features["label"] == datasets.ClassLabel(names=NAMES)
    # Every row comes back with its own label name, in exactly one split.
    assert _all_pairs(td) == sorted((r["text"], r["label"]) for r in rows)
    n_test = math.ceil(0.2 * 90)
    n_val = math.ceil(0.1 * (90 - n_test))
    assert [len(td.splits[s]) for s in ("train", "validation", "test")] == [
        90 - n_test - n_val,
        n_val,
        n_test,
    ]
    assert Counter(td.splits["test"]["label"]) == {0: 6, 1: 6, 2: 6}  # stratified: 30 rows per label


def test_every_format_gives_identical_splits(tmp_path):
    rows = own_rows(60)
    loaded = [load_task_data(write_rows(tmp_path / f"d.{fmt}", rows), seed=3) for fmt in OWN_FORMATS]
    for td in loaded[1:]:
        for split in ("train", "validation", "test"):
            assert td.splits[split]["text"] == loaded[0].splits[split]["text"]


def test_duplicates_across_splits_are_warned(tmp_path, caplog):
    rows = own_rows(60)
    write_rows(tmp_path / "t" / "train.csv", rows[:50])
    write_rows(tmp_path / "t" / "val.csv", rows[50:])
    write_rows(tmp_path / "t" / "test.csv", rows[:5] + own_rows(20, seed=1))
    td = load_task_data(tmp_path / "t")
    assert len(td.splits["test"]) == 25
    assert "5 of 25 test texts also occur in train" in caplog.text
    assert "validation texts" not in caplog.text
    assert "different labels" not in caplog.text  # the copies keep their label


def test_a_text_with_two_labels_is_warned_once_with_an_example(tmp_path, caplog):
    rows = own_rows(60)
    names = sorted({r["label"] for r in rows})
    other = next(n for n in names if n != rows[3]["label"])
    clash = [{"text": rows[3]["text"], "label": other}, {"text": rows[7]["text"], "label": rows[7]["label"]}]
    load_task_data(write_rows(tmp_path / "d.jsonl", rows + clash))
    warned = [r.getMessage() for r in caplog.records if "different labels" in r.getMessage()]
    assert len(warned) == 1
    assert warned[0].startswith("1 text(s) occur with different labels")
    assert repr(rows[3]["text"]) in warned[0] and repr(other) in warned[0]


def test_copies_up_to_case_and_punctuation_with_two_labels_are_warned(tmp_path, caplog):
    # a trial: "My bin wasnt collected this morning" as bins, "my bin wasnt collected this morning" as pothole
    rows = own_rows(60)
    names = sorted({r["label"] for r in rows})
    other = next(n for n in names if n != rows[3]["label"])
    copy = {"text": rows[3]["text"].upper() + " !!", "label": other}
    same = {"text": rows[7]["text"].upper(), "label": rows[7]["label"]}  # a copy with its own label
    load_task_data(write_rows(tmp_path / "d.csv", rows + [copy, same]))
    warned = [r.getMessage() for r in caplog.records if "different labels" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("1 text(s) occur with different labels (the same words")
    assert repr(other) in warned[0] and repr(rows[3]["label"]) in warned[0]


def test_carving_is_seeded(tmp_path):
    path = write_rows(tmp_path / "d.csv", own_rows(90))
    a, b, c = (load_task_data(path, seed=s).splits["test"]["text"] for s in (1, 1, 2))
    assert a == b and a != c


def test_split_folder_mixed_formats_used_as_given(tmp_path):
    rows = own_rows(120)
    write_rows(tmp_path / "task" / "train.csv", rows[:80])
    write_rows(tmp_path / "task" / "dev.jsonl", rows[80:100])
    write_rows(tmp_path / "task" / "test.parquet", rows[100:])
    (tmp_path / "task" / "notes.txt").write_text("ignored")
    td = load_task_data(tmp_path / "task")
    assert td.name == "task"
    assert td.splits["train"]["text"] == [r["text"] for r in rows[:80]]
    assert _pairs(td, "validation") == sorted((r["text"], r["label"]) for r in rows[80:100])
    assert _pairs(td, "test") == sorted((r["text"], r["label"]) for r in rows[100:])


def test_split_folder_without_test_carves_it(tmp_path):
    rows = own_rows(100)
    write_rows(tmp_path / "t" / "train.jsonl", rows[:90])
    write_rows(tmp_path / "t" / "validation.jsonl", rows[90:])
    td = load_task_data(tmp_path / "t", data=DataConfig(test_fraction=0.3))
    assert len(td.splits["test"]) == 27 and len(td.splits["validation"]) == 10


def test_split_folder_errors(tmp_path):
    write_rows(tmp_path / "a" / "train.csv", own_rows(9))
    write_rows(tmp_path / "a" / "train.jsonl", own_rows(9))
    with pytest.raises(DataError, match=r"several train files \(train.csv, train.jsonl\)"):
        load_task_data(tmp_path / "a")
    write_rows(tmp_path / "b" / "data.csv", own_rows(9))
    with pytest.raises(DataError, match=r"has no train file.*Found: data.csv"):
        load_task_data(tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_task_data(tmp_path / "missing.csv")
    (tmp_path / "x.txt").write_text("a\n")
    with pytest.raises(DataError, match=r"unsupported file type '.txt'"):
        load_task_data(tmp_path / "x.txt")


def test_save_to_disk_dataset_dict_and_dataset(tmp_path):
    rows = own_rows(90)
    dd = datasets.DatasetDict(
        train=datasets.Dataset.from_list(rows[:70]), test=datasets.Dataset.from_list(rows[70:])
    )
    dd.save_to_disk(tmp_path / "saved_dict")
    td = load_task_data(tmp_path / "saved_dict")
    assert td.name == "saved_dict"
    assert _pairs(td, "test") == sorted((r["text"], r["label"]) for r in rows[70:])
    datasets.Dataset.from_list(rows).save_to_disk(tmp_path / "saved_one")
    one = load_task_data(tmp_path / "saved_one")
    assert _all_pairs(one) == sorted((r["text"], r["label"]) for r in rows)


def test_in_memory_forms_match_the_csv(tmp_path):
    rows = own_rows(90)
    ref = load_task_data(write_rows(tmp_path / "d.csv", rows))
    texts, labels = [r["text"] for r in rows], [r["label"] for r in rows]
    forms = [
        pd.DataFrame(rows),
        (texts, labels),
        datasets.Dataset.from_list(rows),
        datasets.DatasetDict(train=datasets.Dataset.from_list(rows)),
    ]
    for form in forms:
        td = load_task_data(form)
        assert td.name == "data" and td.label_names == NAMES
        assert td.splits["test"]["text"] == ref.splits["test"]["text"], type(form)


def test_csv_labels_that_are_not_plain_integers_stay_names(tmp_path):
    # "01" and "1" were read as the id 1 (two labels merged), "007" as 7, and "²" failed int()
    for labels, names in ((["01", "1", "02", "2"], ["01", "02", "1", "2"]), (["007", "²"], ["007", "²"])):
        rows = [(f"text {k} {i}", lab) for i in range(6) for k, lab in enumerate(labels)]
        path = tmp_path / "d.csv"
        path.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in rows))
        assert load_task_data(path).label_names == names
    rows = [(f"text {k} {i}", lab) for i in range(6) for k, lab in enumerate(["3", "-1", " 10 "])]
    path.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in rows))
    assert load_task_data(path).label_names == ["-1", "3", "10"]  # plain integers are still ids


def test_csv_whole_number_floats_are_ids_as_in_jsonl(tmp_path):
    # pandas writes an integer column that held a missing value as 1.0, 2.0, 10.0: read as names, sorted as
    # text ("1.0", "10.0", "2.0") and answered as "1.0", where the same numbers in JSONL were the ids 1, 2, 10
    rows = [(f"text {k} {i}", lab) for i in range(6) for k, lab in enumerate(["1.0", "10.0", "2.00", "-5.0"])]
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in rows))
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "label": float(lab)}) + "\n" for t, lab in rows))
    for path in (csv_path, jsonl):
        td = load_task_data(path)
        assert td.label_names == ["-5", "1", "2", "10"] and td.integer_labels, path.suffix
        assert _all_pairs(td) == sorted((t, str(int(float(lab)))) for t, lab in rows)
    # a fraction anywhere makes no id: numbers that are not all whole are refused, as in JSONL (they were read
    # as names in a CSV: one class per value of what is likely a score)
    csv_path.write_text(
        "text,label\n" + "".join(f"{t},{lab}\n" for t, lab in rows + [("text x", "1.5"), ("text y", "1.5")])
    )
    with pytest.raises(DataError, match=r"d.csv line 26: every label in 'label' is a number and some"):
        load_task_data(csv_path)


def test_numpy_labels_read_as_the_python_values_they_hold(tmp_path):
    import numpy as np

    rows = own_rows(60)
    texts = [r["text"] for r in rows]
    ids = [NAMES.index(r["label"]) for r in rows]
    as_list = load_task_data((texts, ids))
    for labels in (np.array(ids), np.array(ids, dtype=np.int32), [np.int64(i) for i in ids]):
        td = load_task_data((np.array(texts), labels))  # each was refused: "not a non-empty string"
        assert td.label_names == as_list.label_names
        assert td.splits["test"]["text"] == as_list.splits["test"]["text"]
        assert td.labels("test").tolist() == as_list.labels("test").tolist()


def test_a_dataframe_with_a_repeated_column_name_is_refused_naming_it():
    df = pd.DataFrame([["a", "x", "y"], ["b", "y", "x"]], columns=["text", "label", "label"])
    with pytest.raises(DataError, match=r"more than one column named \['label'\]"):
        load_task_data(df)


def test_class_label_keeps_its_order_and_int_labels_sort_numerically(tmp_path):
    rows = own_rows(60)
    order = ["pets", "music", "money"]
    ds = datasets.Dataset.from_dict(
        {"text": [r["text"] for r in rows], "label": [order.index(r["label"]) for r in rows]},
        features=datasets.Features(text=datasets.Value("string"), label=datasets.ClassLabel(names=order)),
    )
    td = load_task_data(ds)
    assert td.label_names == order and not td.integer_labels
    assert _all_pairs(td) == sorted((r["text"], r["label"]) for r in rows)
    ids = {"money": 10, "music": 2, "pets": 7}
    int_rows = [{"text": r["text"], "label": ids[r["label"]]} for r in rows]
    for fmt in ("csv", "jsonl"):
        td = load_task_data(write_rows(tmp_path / f"ints.{fmt}", int_rows))
        assert td.label_names == ["2", "7", "10"] and td.integer_labels, fmt
        assert _all_pairs(td) == sorted((r["text"], str(r["label"])) for r in int_rows)


def test_csv_keeps_na_like_labels_and_numeric_texts(tmp_path):
    rows = [{"text": str(1000 + i), "label": ["NA", "null", "None"][i % 3]} for i in range(30)]
    td = load_task_data(write_rows(tmp_path / "d.csv", rows))
    assert td.label_names == ["NA", "None", "null"]
    assert _all_pairs(td) == sorted((r["text"], r["label"]) for r in rows)


def test_bool_labels_are_names(tmp_path):
    rows = [{"text": f"t{i}", "label": i % 2 == 0} for i in range(20)]
    td = load_task_data(write_rows(tmp_path / "b.jsonl", rows))
    assert td.label_names == ["false", "true"]


def test_columns_from_the_data_config(tmp_path):
    rows = [{"body": r["text"], "intent": r["label"], "id": i} for i, r in enumerate(own_rows(30))]
    path = write_rows(tmp_path / "d.parquet", rows)
    a = load_task_data(path, data=DataConfig(text_column="body", label_column="intent"))
    b = load_task_data(path, TaskConfig(name="t"), DataConfig(text_column="body", label_column="intent"))
    assert a.label_names == b.label_names == NAMES and b.name == "t"
    with pytest.raises(DataError) as err:
        load_task_data(path)
    assert (
        "has no column 'text' (data.text_column) or 'label' (data.label_column); its columns are "
        "['body', 'intent', 'id']. Set data.text_column=<column> and data.label_column=<column>."
    ) in str(err.value)
    assert str(path) in str(err.value)


def test_unseen_test_label_names_file_and_line(tmp_path):
    rows = own_rows(30)
    write_rows(tmp_path / "t" / "train.csv", rows)
    write_rows(tmp_path / "t" / "test.csv", rows[:4] + [{"text": "new one", "label": "sports"}])
    with pytest.raises(DataError) as err:
        load_task_data(tmp_path / "t")
    msg = str(err.value)
    assert str(tmp_path / "t" / "test.csv") in msg and "split 'test'" in msg
    assert "line 6: 'label' is not in the train split's label set: 'sports'" in msg
    td = load_task_data(tmp_path / "t", data=DataConfig(drop_bad_rows=True))
    assert td.dropped == {"train": 0, "validation": 0, "test": 1} and len(td.splits["test"]) == 4


def test_shared_layout_folder_as_data_path_matches_data_root(tmp_path):
    root = make_task(tmp_path, {"train": toy_rows("tr"), "test": toy_rows("te", 0.5)})
    via_root = load_classification(toy_task(), toy_data(root), seed=0)
    via_path = load_classification(toy_task(), DataConfig(path=str(root / "ToyClassification")), seed=0)
    assert via_path.label_names == via_root.label_names
    for split in ("train", "validation", "test"):
        assert _pairs(via_path, split) == _pairs(via_root, split)


def test_single_label_and_tiny_data_fail_clearly(tmp_path):
    with pytest.raises(DataError, match="a classifier needs at least two labels"):
        load_task_data(([f"t{i}" for i in range(10)], ["a"] * 10))
    with pytest.raises(DataError, match="different lengths: 2 texts, 1 labels"):
        load_task_data((["a", "b"], ["x"]))
    with pytest.raises(DataError, match="Cannot read data of type int"):
        load_task_data(5)


def test_labels_with_a_single_row_are_refused_before_carving(tmp_path, capsys):
    rows = [{"text": f"ticket {i}", "label": f"label-{i:03d}"} for i in range(300)]  # 300 rows, 300 labels
    path = write_rows(tmp_path / "tickets.csv", rows)
    with pytest.raises(DataError, match=r"tickets.csv: 300 of 300 labels have a single row \('label-000', "):
        load_task_data(path)
    from ucse.cli.main import main

    assert main(["train", f"data.path={path}", f"output_dir={tmp_path / 'run'}"]) == 2  # before any training
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "300 of 300 labels have a single row" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "head").exists()
    rows = own_rows(60) + [{"text": "a lonely one", "label": "zebra"}]  # one rare label among good ones
    with pytest.raises(DataError, match=r"1 of 4 labels have a single row \('zebra'\).*at least 2 rows"):
        load_task_data(write_rows(tmp_path / "one.jsonl", rows))
    # Given splits carve nothing: a rare train label is the user's choice there.
    (tmp_path / "given").mkdir()
    write_rows(tmp_path / "given" / "train.jsonl", rows)
    for split in ("validation", "test"):
        write_rows(tmp_path / "given" / f"{split}.jsonl", own_rows(9, seed=3))
    assert "zebra" in load_task_data(tmp_path / "given").label_names


def test_a_label_with_two_rows_stays_whole_in_training_and_is_named(tmp_path, caplog):
    rows = own_rows(60) + [
        {"text": "moving to Lisbon", "label": "relocation"},
        {"text": "Berlin move", "label": "relocation"},
    ]
    path = write_rows(tmp_path / "hr.csv", rows)
    for seed in range(8):  # a plain stratified carve left 0 or 1 of the two rows in training for some seeds
        caplog.clear()
        td = load_task_data(path, seed=seed)
        rare = td.label_names.index("relocation")
        assert Counter(td.splits["train"]["label"])[rare] == 2
        assert rare not in td.splits["validation"]["label"] and rare not in td.splits["test"]["label"]
        assert _all_pairs(td) == sorted((r["text"], r["label"]) for r in rows)  # nothing lost or duplicated
        warned = [r.getMessage() for r in caplog.records if "kept whole for training" in r.getMessage()]
        assert len(warned) == 1 and "1 of 4 labels have only 2 rows ('relocation')" in warned[0]
    # The other labels are still carved stratified, as fractions of their own rows.
    n_test = math.ceil(0.2 * 60)
    assert len(td.splits["test"]) == n_test and len(td.splits["validation"]) == math.ceil(0.1 * (60 - n_test))
    # Every label that small: no test slice (a test row would leave its label one row, which the default
    # head's cross-validation refuses), said once; validation is still carved from the rows.
    caplog.clear()
    tiny = [{"text": f"{name} text {i}", "label": name} for name in "abcdef" for i in range(2)]
    td = load_task_data(write_rows(tmp_path / "tiny.csv", tiny))
    assert len(td.splits["test"]) == 0 and len(td.splits["validation"]) > 0
    said = [r.getMessage() for r in caplog.records if "no test slice is carved" in r.getMessage()]
    assert len(said) == 1 and "every label has at most 2 rows" in said[0]


def test_labels_that_differ_only_in_case_or_spaces_are_named(tmp_path, caplog):
    rows = own_rows(60) + [{"text": f"pay {i}", "label": "Payroll"} for i in range(3)]
    rows += [{"text": f"salary {i}", "label": "payroll "} for i in range(3)]
    td = load_task_data(write_rows(tmp_path / "hr.tsv", rows))
    assert "Payroll" in td.label_names and "payroll " in td.label_names  # kept apart: the user decides
    warned = [r.getMessage() for r in caplog.records if "letter case, surrounding spaces" in r.getMessage()]
    assert len(warned) == 1 and "'Payroll' and 'payroll '" in warned[0] and "hr.tsv" in warned[0]
    caplog.clear()
    # the same word composed and decomposed (NFC 'café', NFD 'cafe' + combining accent): they look identical
    rows = own_rows(60) + [{"text": f"latte {i}", "label": "caf\u00e9"} for i in range(3)]
    rows += [{"text": f"espresso {i}", "label": "cafe\u0301"} for i in range(3)]
    load_task_data(write_rows(tmp_path / "menu.tsv", rows))
    assert sum("Unicode form" in r.getMessage() and "menu.tsv" in r.getMessage() for r in caplog.records) == 1
    caplog.clear()
    load_task_data(write_rows(tmp_path / "ok.tsv", own_rows(60)))
    assert not any("letter case" in r.getMessage() for r in caplog.records)


def test_in_memory_bad_rows_name_rows():
    texts = ["a", "", "c", None, "e", "f"]
    labels = ["x", "y", float("nan"), "y", 3, "y"]
    with pytest.raises(DataError) as err:
        load_task_data(pd.DataFrame({"text": texts, "label": labels}))
    msg = str(err.value)
    assert "of the DataFrame (rows are 0-based)" in msg
    for expected in (
        "row 1: 'text' is empty or whitespace-only: ''",
        "row 2: 'label' is missing\n",  # no ": None": a missing value has none to show
        "row 3: 'text' is missing\n",
        "row 4: 'label' is not a non-empty string: 3",
    ):
        assert expected in msg


# --- data.exclude_labels -------------------------------------------------------------------------------


def test_exclude_labels_by_name_moves_test_rows_to_ood(tmp_path):
    rows = own_rows(90)
    td = load_task_data(write_rows(tmp_path / "d.jsonl", rows), data=DataConfig(exclude_labels=["pets"]))
    assert td.label_names == ["money", "music"] and td.excluded_labels == ["pets"]
    assert td.splits["train"].features["label"] == datasets.ClassLabel(names=["money", "music"])
    full = load_task_data(write_rows(tmp_path / "d.jsonl", rows))
    for split in ("train", "validation"):
        assert _pairs(td, split) == [p for p in _pairs(full, split) if p[1] != "pets"]
    assert _pairs(td, "test") == [p for p in _pairs(full, "test") if p[1] != "pets"]
    assert sorted(zip(td.ood["text"], td.ood["label_text"])) == [
        p for p in _pairs(full, "test") if p[1] == "pets"
    ]


def test_exclude_labels_fraction_is_seeded(tmp_path):
    rows = [{"text": f"text {i}", "label": f"c{i % 8}"} for i in range(160)]
    path = write_rows(tmp_path / "d.csv", rows)
    picks = [
        load_task_data(path, data=DataConfig(exclude_labels=0.25), seed=s).excluded_labels for s in range(4)
    ]
    assert all(len(p) == 2 for p in picks)  # 25 % of 8 labels
    assert picks[0] == load_task_data(path, data=DataConfig(exclude_labels=0.25), seed=0).excluded_labels
    assert len({tuple(p) for p in picks}) > 1
    td = load_task_data(path, data=DataConfig(exclude_labels=0.25), seed=0)
    assert set(td.ood["label_text"]) == set(td.excluded_labels) and td.num_classes == 6


def test_exclude_labels_on_the_shared_layout(tmp_path):
    root = make_task(tmp_path, {"train": toy_rows("tr"), "test": toy_rows("te", 0.5)})
    td = load_classification(toy_task(), toy_data(root, exclude_labels=["bravo"]), seed=0)
    assert td.label_names == ["alpha", "charlie", "delta"]
    assert set(td.ood["label_text"]) == {"bravo"} and len(td.ood) == sum(
        r["label_text"] == "bravo" for r in toy_rows("te", 0.5)
    )


@pytest.mark.parametrize(
    "spec,match",
    [
        (["petz"], r"'petz' not among the 3 train labels \(money, music, pets\). Did you mean 'pets'"),
        (1.5, "must be a fraction in"),
        (["pets", "music"], "leaving 1; at least 2 must remain"),
        (3, "must be a list of label names"),
    ],
)
def test_exclude_labels_errors(tmp_path, spec, match):
    path = write_rows(tmp_path / "d.csv", own_rows(30))
    with pytest.raises(DataError, match=match):
        load_task_data(path, data=DataConfig(exclude_labels=spec))


# --- config ------------------------------------------------------------------------------------------------


def test_data_path_config_carries_no_default_task(tmp_path):
    path = write_rows(tmp_path / "my reviews.csv", own_rows(30))
    cfg = build_config([f"data.path={path}"])
    assert cfg.task.name == "my reviews"
    assert cfg.task.hf_path is None and cfg.task.instruction == "" and cfg.task.hf_revision is None
    assert cfg.data.path == str(path)
    named = build_config([f"data.path={path}", "task.name=reviews"])
    assert named.task.name == "reviews" and named.task.hf_path is None
    paper = build_config([f"data.path={path}", "task=Banking77Classification"])
    assert paper.task.name == "Banking77Classification" and paper.task.hf_path == "mteb/banking77"


def test_relative_data_path_is_made_absolute(tmp_path, monkeypatch):
    write_rows(tmp_path / "d.csv", own_rows(30))
    monkeypatch.chdir(tmp_path)
    cfg = build_config(["data.path=d.csv", "data.exclude_labels=[pets]"])
    assert cfg.data.path == str(tmp_path / "d.csv") and cfg.data.exclude_labels == ["pets"]
    assert build_config(["data.path=d.csv", "data.exclude_labels=0.25"]).data.exclude_labels == 0.25
    # data.root too: a run trained with data.root=../shared/data is evaluated from any folder
    (tmp_path / "tasks").mkdir()
    monkeypatch.chdir(tmp_path / "tasks")
    assert build_config(["data.root=..", "task=Banking77Classification"]).data.root == str(tmp_path)


def test_task_without_any_source_fails_clearly():
    with pytest.raises(DataError, match="has no data source: set data.path="):
        load_classification(TaskConfig(name="mine"), DataConfig(), seed=0)


def test_a_dataframe_categorical_keeps_its_label_order():
    # The order its user gave (low < mid < high), as a ClassLabel keeps its own; unused categories drop out.
    rows = own_rows(60)
    order = {name: i for i, name in enumerate(reversed(NAMES))}  # not the sorted order
    df = pd.DataFrame({"text": [r["text"] for r in rows], "label": [r["label"] for r in rows]})
    df["label"] = pd.Categorical(df["label"], categories=[*sorted(order, key=order.get), "unused"])
    td = load_task_data(df)
    assert td.label_names == list(reversed(NAMES))
    assert _all_pairs(td) == sorted((r["text"], r["label"]) for r in rows)
    plain = load_task_data(df.astype({"label": str}))  # the same rows as plain strings: sorted names
    assert plain.label_names == NAMES


def test_the_data_line_quotes_label_names(caplog):
    # "labels (Rückgabe / return, billing, refunds, café wifi)": four names read as five
    texts = [f"text {i}" for i in range(12)]
    labels = ["billing, refunds", "café wifi", "5"] * 4
    with caplog.at_level("INFO", logger="ucse.data.sources"):
        load_task_data((texts, labels))
    assert "3 labels ('5', 'billing, refunds', 'café wifi')" in caplog.text


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_lists_of_labels_fail_in_one_line_saying_multi_label(tmp_path, fmt):
    # each row was reported as "'label' is not a non-empty string", with dropping them offered as the fix
    rows = [{"text": f"text {i}", "label": ["billing", "refund"] if i % 3 else ["login"]} for i in range(30)]
    with pytest.raises(DataError) as err:
        load_task_data(write_rows(tmp_path / f"tags.{fmt}", rows))
    msg = str(err.value)
    assert "\n" not in msg and "multi-label" in msg and "30 of 30 rows" in msg
    # the first row with several labels shows what the file holds (row 0 has one)
    assert ("line 2" if fmt == "jsonl" else "row 1") in msg and "['billing', 'refund']" in msg
    with pytest.raises(DataError, match="multi-label"):  # in memory too
        load_task_data(([r["text"] for r in rows], [r["label"] for r in rows]))


@pytest.mark.parametrize("spelling", [str, json.dumps])
def test_lists_written_as_text_in_a_csv_fail_like_lists(tmp_path, caplog, spelling):
    # a multi-label export to CSV ("['billing', 'refund']") trained each combination as a label of its own
    tags = [["billing", "refund"], ["login"], ["refund"]]
    rows = [{"text": f"text {i}", "label": spelling(tags[i % 3])} for i in range(30)]
    with pytest.raises(DataError) as err:
        load_task_data(write_rows(tmp_path / "tags.csv", rows))
    msg = str(err.value)
    assert "\n" not in msg and "multi-label" in msg and "written as text" in msg and "30 of 30 rows" in msg
    assert "tags.csv line 2" in msg and repr(spelling(tags[0])) in msg
    # every list holds one label: the fix is to write it alone
    single = [{"text": r["text"], "label": spelling(tags[i % 3][:1])} for i, r in enumerate(rows)]
    with pytest.raises(DataError) as err:
        load_task_data(write_rows(tmp_path / "one.csv", single))
    msg = str(err.value)
    assert "one-item list written as text" in msg and "write the label alone ('billing')" in msg
    assert "multi-label" not in msg
    # empty lists (an export of rows without labels): said, not an IndexError
    empty = [{"text": r["text"], "label": spelling([])} for r in rows]
    with pytest.raises(DataError, match="holds empty lists of labels written as text"):
        load_task_data(write_rows(tmp_path / "none.csv", empty))
    # a few among plain labels: trained as they are, named in the joined-labels warning
    few = own_rows(60) + [{"text": f"both {i}", "label": spelling([NAMES[0], NAMES[1]])} for i in range(3)]
    few += [{"text": f"odd {i}", "label": "[draft]"} for i in range(3)]  # brackets, but no list
    td = load_task_data(write_rows(tmp_path / "few.csv", few))
    assert spelling([NAMES[0], NAMES[1]]) in td.label_names and "[draft]" in td.label_names
    warned = [r.getMessage() for r in caplog.records if "joined by a separator" in r.getMessage()]
    assert len(warned) == 1 and "1 label(s)" in warned[0] and "draft" not in warned[0]


def test_labels_that_join_other_labels_are_named_and_others_left_alone(tmp_path, caplog):
    rows = own_rows(60) + [{"text": f"both {i}", "label": f"{NAMES[0]}, {NAMES[1]}"} for i in range(3)]
    rows += [{"text": f"mixed {i}", "label": f"{NAMES[1]}|{NAMES[2].upper()}"} for i in range(3)]
    rows += [{"text": f"food {i}", "label": "Food, Drink"} for i in range(3)]  # parts that are no labels
    td = load_task_data(write_rows(tmp_path / "tickets.csv", rows))
    assert f"{NAMES[0]}, {NAMES[1]}" in td.label_names  # trained as it is: the user decides
    warned = [r.getMessage() for r in caplog.records if "joined by a separator" in r.getMessage()]
    assert len(warned) == 1 and "2 label(s)" in warned[0] and "tickets.csv" in warned[0]
    assert f"'{NAMES[0]}, {NAMES[1]}'" in warned[0] and "Food" not in warned[0]
    caplog.clear()
    load_task_data(write_rows(tmp_path / "plain.csv", own_rows(60) + rows[-3:]))
    assert not any("joined by a separator" in r.getMessage() for r in caplog.records)


def test_a_sheet_with_some_rows_still_to_label_is_one_line_saying_how_to_train(tmp_path):
    # it listed the unlabelled rows as problems, five of them, and "... and N more problem(s)"
    rows = own_rows(40)
    for i in (3, 10, 11, 30):
        rows[i]["label"] = "" if i % 2 else "   "
    path = write_rows(tmp_path / "sheet.csv", rows)
    with pytest.raises(DataError) as err:
        load_task_data(path)
    msg = str(err.value)
    assert "\n" not in msg and "4 of 40 rows have no value in 'label' (lines 5, 12, 13, 32)" in msg
    assert "data.drop_bad_rows=true to train on the 36 labelled rows" in msg and "ucse suggest" in msg
    td = load_task_data(path, data=DataConfig(drop_bad_rows=True))
    assert sum(td.splits[s].num_rows for s in ("train", "validation", "test")) == 36
    # another problem among them: every problem is listed as before
    rows[5]["text"] = ""
    with pytest.raises(DataError, match=r"5 bad row\(s\) of 40"):
        load_task_data(write_rows(tmp_path / "sheet2.csv", rows))


def test_merge_similar_labels_reads_case_and_space_variants_as_the_most_used_spelling(tmp_path, caplog):
    rows = own_rows(60)  # labels money / music / pets, 20 rows each
    for i, r in enumerate(rows[:9]):
        r["label"] = {0: r["label"].upper(), 1: r["label"] + " ", 2: r["label"].title()}[i % 3]
    test = [{"text": f"held {i}", "label": NAMES[i % 3].upper()} for i in range(6)]
    path = tmp_path / "sheet"
    write_rows(path / "train.csv", rows)
    write_rows(path / "test.csv", test)
    with pytest.raises(DataError):  # off (the default): variants are labels of their own, some of one row
        load_task_data(path)
    assert "data.merge_similar_labels=true" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="ucse.data.sources"):
        td = load_task_data(path, data=DataConfig(merge_similar_labels=True))
    assert td.label_names == NAMES  # the spelling most train rows use
    want = Counter(r["label"].strip().lower() for r in rows)
    got = Counter(td.label_names[y] for s in ("train", "validation") for y in td.splits[s]["label"])
    assert got == want
    assert [td.label_names[y] for y in td.splits["test"]["label"]] == [NAMES[i % 3] for i in range(6)]
    assert "data.merge_similar_labels read" in caplog.text and "letter case" not in caplog.text
    # a tie keeps the first spelling in sorted order; numbers and blanks are left alone
    from ucse.data.columns import respell, spellings

    canon = spellings(["b", "B", "a", "A ", "a"])
    assert canon == {"b": "B", "a": "a"}
    assert respell(["A", "b ", 3, "", None, "c"], canon)[0] == ["a", "B", 3, "", None, "c"]


def test_min_label_rows_leaves_out_a_long_tail_of_labels_with_their_rows(tmp_path, caplog):
    rows = own_rows(60) + [{"text": f"rare {i}", "label": f"tail{i}"} for i in range(5)]
    rows += [{"text": "twice a", "label": "pair"}, {"text": "twice b", "label": "pair"}]
    path = write_rows(tmp_path / "tickets.csv", rows)
    with pytest.raises(
        DataError, match=r"5 of 9 labels have a single row.*data.min_label_rows=2 leaves them out"
    ):
        load_task_data(path)
    td = load_task_data(path, data=DataConfig(min_label_rows=2))
    assert td.label_names == sorted([*NAMES, "pair"])  # a label of 2 rows stays
    assert sum(td.splits[s].num_rows for s in ("train", "validation", "test")) == 62
    warned = [r.getMessage() for r in caplog.records if "data.min_label_rows=2 leaves out" in r.getMessage()]
    assert (
        len(warned) == 1
        and "5 of 9 labels and their 5 train rows" in warned[0]
        and "'tail0' (1)" in warned[0]
    )
    # a given test file's rows of those labels go too (they were "not in the train split's label set")
    folder = tmp_path / "split"
    write_rows(folder / "train.csv", rows)
    write_rows(folder / "test.csv", [{"text": "rare test", "label": "tail3"}, *own_rows(9, seed=5)])
    td = load_task_data(folder, data=DataConfig(min_label_rows=2))
    assert td.splits["test"].num_rows == 9
    with pytest.raises(DataError, match="would leave 0 of 9 labels"):
        load_task_data(path, data=DataConfig(min_label_rows=21))
    with pytest.raises(Exception, match="data.min_label_rows"):
        build_config(["data.min_label_rows=-1"])


def test_rows_without_a_label_in_a_validation_file_or_parquet_are_said_as_such(tmp_path):
    # (a review) a validation file's message offered to "train on" its rows and `ucse suggest` on it
    folder = tmp_path / "split"
    write_rows(folder / "train.csv", own_rows(30))
    val = own_rows(8, seed=3)
    val[2]["label"] = val[5]["label"] = ""
    write_rows(folder / "validation.csv", val)
    with pytest.raises(
        DataError, match=r"2 of 8 rows .*\(lines 4, 7\).*drop_bad_rows=true to use the 6 labelled rows\.$"
    ):
        load_task_data(folder)
    rows = own_rows(30)
    rows[3]["label"] = rows[9]["label"] = None
    with pytest.raises(DataError, match=r"\(rows 3, 9, 0-based\)"):
        load_task_data(write_rows(tmp_path / "sheet.parquet", rows))
