import logging
import random

import datasets
import pytest
from toy_tasks import make_task, toy_data, toy_rows, toy_task, write_jsonl

from ucse.data import DataError, label_problems, load_classification, text_problems

BAD_TEXTS = [
    ("empty", ""),
    ("whitespace", " \t\u3000 "),
    ("null", None),
    ("number", 123),
    ("list", ["a"]),
]


def _with_bad(rows, index, **fields):
    rows = [dict(r) for r in rows]
    for key, value in fields.items():
        if value is _MISSING:
            rows[index].pop(key)
        else:
            rows[index][key] = value
    return rows


_MISSING = object()


@pytest.mark.parametrize("kind,value", BAD_TEXTS + [("missing", _MISSING)])
@pytest.mark.parametrize("split", ["train", "test"])
def test_bad_text_fails_naming_row_file_and_fix(tmp_path, kind, value, split):
    splits = {"train": toy_rows("tr"), "test": toy_rows("te")}
    splits[split] = _with_bad(splits[split], 5, text=value)
    root = make_task(tmp_path, splits)
    with pytest.raises(DataError) as err:
        load_classification(toy_task(), toy_data(root), seed=0)
    msg = str(err.value)
    assert f"split '{split}'" in msg
    assert str(root / "ToyClassification" / f"{split}.jsonl") in msg
    assert "row 5:" in msg and "'text'" in msg
    if value is None or value is _MISSING:  # the problem alone: a missing value has nothing to show
        assert "'text' is missing (the one bad row" in msg
    else:
        assert repr(value) in msg
    assert "data.drop_bad_rows=true" in msg
    assert "\n" not in msg  # one bad row: one line


def test_several_bad_rows_are_listed_one_per_line(tmp_path):
    rows = _with_bad(_with_bad(toy_rows("tr"), 2, text=""), 7, text=None)
    root = make_task(tmp_path, {"train": rows, "test": toy_rows("te")})
    with pytest.raises(DataError) as err:
        load_classification(toy_task(), toy_data(root), seed=0)
    lines = str(err.value).splitlines()
    assert "2 bad row(s)" in lines[0] and lines[1].startswith("  row 2:") and lines[2].startswith("  row 7:")
    assert "data.drop_bad_rows=true" in lines[-1]


@pytest.mark.parametrize(
    "fields,problem",
    [
        ({"label_text": None}, "'label_text' is missing"),
        ({"label_text": _MISSING}, "'label_text' is missing"),
        ({"label_text": "zulu"}, "'label_text' is not in the train split's label set: 'zulu'"),
    ],
)
def test_bad_test_label_fails(tmp_path, fields, problem):
    root = make_task(tmp_path, {"train": toy_rows("tr"), "test": _with_bad(toy_rows("te"), 3, **fields)})
    with pytest.raises(DataError, match="row 3: " + problem):
        load_classification(toy_task(), toy_data(root), seed=0)


def test_int_label_absent_from_train_fails(tmp_path):
    train = [{"text": f"t{i}", "label": i % 3} for i in range(30)]
    test = [{"text": f"u{i}", "label": i % 3} for i in range(10)] + [{"text": "odd", "label": 3}]
    root = make_task(tmp_path, {"train": train, "test": test})
    with pytest.raises(DataError, match=r"row 10: 'label' is not in the train split's label set: 3"):
        load_classification(toy_task(), toy_data(root), seed=0)
    bad_type = test[:10] + [{"text": "odd", "label": "one"}, {"text": "frac", "label": 1.5}]
    write_jsonl(root / "ToyClassification" / "test.jsonl", bad_type)
    with pytest.raises(DataError, match=r"(?s)row 10: 'label' is not an integer: 'one'.*row 11: .*1\.5"):
        load_classification(toy_task(), toy_data(root), seed=0)


def test_long_bad_value_is_truncated(tmp_path):
    long_name = "z" * 500
    root = make_task(
        tmp_path, {"train": toy_rows("tr"), "test": _with_bad(toy_rows("te"), 0, label_text=long_name)}
    )
    with pytest.raises(DataError) as err:
        load_classification(toy_task(), toy_data(root), seed=0)
    assert "zzz..." in str(err.value) and long_name not in str(err.value)


def test_drop_mode_drops_counts_and_logs(tmp_path, caplog):
    train = toy_rows("tr")
    train = _with_bad(_with_bad(_with_bad(train, 0, text="  "), 1, text=None), 2, label_text=None)
    test = _with_bad(_with_bad(toy_rows("te"), 4, label_text="zulu"), 4, text="")  # two problems, one row
    root = make_task(tmp_path, {"train": train, "test": test})
    with caplog.at_level(logging.WARNING):
        td = load_classification(toy_task(), toy_data(root, drop_bad_rows=True), seed=0)
    assert td.dropped == {"train": 3, "validation": 0, "test": 1}
    assert len(td.splits["train"]) + len(td.splits["validation"]) == len(train) - 3
    assert len(td.splits["test"]) == len(test) - 1
    assert test[4]["text"] not in td.splits["test"]["text"]
    assert "Dropping 3 bad row(s)" in caplog.text and "Dropping 1 bad row(s)" in caplog.text


def test_rows_left_unlabelled_are_left_out_in_one_line_without_a_bad_row_alarm(tmp_path, caplog):
    # one sheet, some rows labelled and the rest to label (the README's loop): "Dropping 130 bad row(s)" and
    # a list of lines alarmed a trial's user about rows left blank on purpose
    train = toy_rows("tr")
    for i in range(0, 24, 2):
        train = _with_bad(train, i, label_text=None)
    root = make_task(tmp_path, {"train": train, "test": toy_rows("te")})
    with caplog.at_level(logging.WARNING):
        td = load_classification(toy_task(), toy_data(root, drop_bad_rows=True), seed=0)
    assert td.dropped["train"] == 12
    (said,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert "12 of " in said
    assert "have no value in 'label_text' and are left out (data.drop_bad_rows=true)" in said
    assert said.endswith(": row 0, row 2, row 4, row 6, row 8, ...")  # the first few named
    assert "Dropping" not in caplog.text and "bad row" not in caplog.text


def test_drop_mode_with_mixed_type_text_column(tmp_path):
    train = _with_bad(toy_rows("tr"), 7, text=42)
    root = make_task(tmp_path, {"train": train, "test": toy_rows("te")})
    td = load_classification(toy_task(), toy_data(root, drop_bad_rows=True), seed=0)
    assert td.dropped["train"] == 1
    assert td.splits["train"].features["text"] == datasets.Value("string")


def test_text_problems_match_python_reference():
    rng = random.Random(0)
    pool = ["ok", "", " ", "\t\n", "\xa0", "a b", "  x  ", None, "\u200b"]
    values = [rng.choice(pool) for _ in range(2000)]
    ds = datasets.Dataset.from_dict(
        {"text": values}, features=datasets.Features(text=datasets.Value("string"))
    )
    blank = {"", " ", "\t\n", "\xa0", "\u200b"}  # whitespace, and a zero-width space: no visible character
    expected = [i for i, v in enumerate(values) if v is None or v in blank]
    assert [b.index for b in text_problems(ds, "text")] == expected


def test_label_problems_reference():
    labels = [0, 1, None, 2.0, 2.5, True, "1", 7]
    bad = label_problems(labels, "label", by_name=False, allowed={0, 1, 2})
    assert [b.index for b in bad] == [2, 4, 5, 6, 7]
    assert label_problems(labels, "label", by_name=False, allowed=None)[-1].index == 6


def test_drop_mode_counts_own_validation_split(tmp_path):
    val = _with_bad(toy_rows("va"), 2, text="")
    root = make_task(tmp_path, {"train": toy_rows("tr"), "validation": val, "test": toy_rows("te")})
    task = toy_task(validation_split="validation")
    td = load_classification(task, toy_data(root, drop_bad_rows=True), seed=0)
    assert td.dropped == {"train": 0, "validation": 1, "test": 0}
    assert len(td.splits["validation"]) == len(val) - 1
