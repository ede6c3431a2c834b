"""JSON data files read as written: a column of mixed JSON kinds keeps its strings (json_format.py)."""

import json

import pytest

from ucse.config import DataConfig
from ucse.data import DataError, load_task_data
from ucse.data.files import read_file
from ucse.data.json_format import columns_as_written

# strings that are themselves valid JSON, beside values of other kinds in the same column
ROWS = [
    {"text": "hello there", "label": "1"},
    {"text": "3.50", "label": 2},
    {"text": "null", "label": "true"},
    {"text": "[1, 2]", "label": "[1,2]"},
    {"text": 7, "label": None},
    {"label": "x"},
]


@pytest.mark.parametrize("form", ["jsonl", "json"])
def test_mixed_kind_columns_come_back_as_written(tmp_path, form):
    path = tmp_path / f"d.{form}"
    if form == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    else:
        path.write_text(json.dumps(ROWS))
    raw = read_file(path)
    # the reference: Python's own reader, row by row (a missing key is None)
    assert raw.columns == ["text", "label"]
    for column in raw.columns:
        assert raw.values(column) == [r.get(column) for r in ROWS]
    assert [type(v) for v in raw.values("label")] == [type(r.get("label")) for r in ROWS]
    assert raw.lines() == (list(range(1, 7)) if form == "jsonl" else None)


def test_columns_as_written_matches_json_per_line():
    text = '{"a": "1", "b": {"c": [1]}}\n\n{"b": "x"}\n{"a": 2, "d": "false"}\n'
    assert columns_as_written(text) == {
        "a": ["1", None, 2],
        "b": [{"c": [1]}, "x", None],
        "d": [None, None, "false"],
    }


def test_a_stray_label_of_another_kind_is_the_one_named(tmp_path):
    # string labels "1"/"2" with one number: the number is the bad row (before, datasets decoded every
    # string label to a number and named line 8's string "true" as "not an integer: True")
    rows = [{"text": f"text number {i}", "label": ["1", "2"][i % 2]} for i in range(40)]
    rows[5]["label"], rows[7]["label"] = 2, "true"
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        DataError, match=r"d\.jsonl line 6: 'label' is not a non-empty string: 2 \(the one bad row"
    ):
        load_task_data(path)


NESTED = [
    {
        "id": "T1",
        "message": {"body": "bike will not unlock", "meta": {"channel": "app"}},
        "ann": {"intent": "unlock"},
    },
    {
        "id": "T2",
        "message": {"body": "refund for my ride", "meta": {"channel": "web"}},
        "ann": {"intent": "refund"},
    },
    {"id": "T3", "message": {"body": "where is a dock"}, "ann": {"intent": "station"}},
    {
        "id": "T4",
        "message": {"body": "card charged twice", "meta": {"channel": "app"}},
        "ann": {"intent": "refund"},
    },
]


@pytest.mark.parametrize("mixed", [False, True], ids=["arrow", "as-written"])
def test_nested_objects_are_read_as_dotted_columns(tmp_path, mixed):
    # A help-desk export of nested objects: the columns were 'message' and 'ann' (objects), and the guess
    # offered the ticket id as the text and an object column as the label.
    rows = [{**r, "id": f"{r['id']}-{i}"} for i in range(3) for r in NESTED]
    if mixed:  # a column of two JSON kinds sends the file through the as-written reader
        rows[0]["id"] = 1
    path = tmp_path / "tickets.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    raw = read_file(path)
    assert raw.columns == ["id", "message.body", "message.meta.channel", "ann.intent"]

    def field(row, dotted):  # the reference: walk Python's own parse
        for key in dotted.split("."):
            row = row.get(key) if isinstance(row, dict) else None
        return row

    for column in raw.columns:
        assert raw.values(column) == [field(r, column) for r in rows]
    with pytest.raises(
        DataError, match="looks like data.text_column=message.body data.label_column=ann.intent"
    ):
        load_task_data(path)
    td = load_task_data(path, data=DataConfig(text_column="message.body", label_column="ann.intent"))
    assert sorted(td.label_names) == ["refund", "station", "unlock"]
