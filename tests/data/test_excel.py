"""Excel workbooks as data: the first sheet, typed cells, gaps skipped, bad cells named by their sheet row."""

from __future__ import annotations

import logging

import openpyxl
import pytest

from ucse.config import DataConfig
from ucse.data import DataError, load_task_data
from ucse.data.texts import read_texts


def _book(path, sheets: dict[str, list[list]]):
    """Write ``sheets`` (name -> rows, the first row the header) as an .xlsx with openpyxl directly."""
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    book.save(path)
    return path


COLUMNS = DataConfig(text_column="Description", label_column="Category")
TICKETS = [["Description", "Category"]] + [
    [f"{topic} problem number {i}", topic] for i in range(6) for topic in ("printer", "vpn", "payroll")
]


def test_first_sheet_read_with_gaps_skipped_and_other_sheets_named(tmp_path, caplog):
    rows = TICKETS[:4] + [[None, None]] + TICKETS[4:]  # a blank row, as spreadsheets leave them
    path = _book(tmp_path / "tickets.xlsx", {"Export": rows, "Notes": [["who", "when"], ["me", "today"]]})
    with caplog.at_level(logging.INFO, logger="ucse.data.excel"):
        td = load_task_data(path, data=COLUMNS)
    assert td.label_names == ["payroll", "printer", "vpn"]
    loaded = sorted(t for s in ("train", "validation", "test") for t in td.splits[s]["text"])
    assert loaded == sorted(r[0] for r in TICKETS[1:])
    assert "reading its first sheet, 'Export' (of 2 sheets)" in caplog.text


def test_a_missing_cell_is_named_by_its_sheet_row(tmp_path):
    rows = [list(r) for r in TICKETS]
    rows[5][0] = None  # sheet row 6 (the header is row 1)
    path = _book(tmp_path / "tickets.xlsx", {"Export": [*rows[:3], [None, None], *rows[3:]]})  # row 7 now
    with pytest.raises(DataError, match=r"(?s)tickets.xlsx.*line 7: 'Description' is missing"):
        load_task_data(path, data=COLUMNS)


def test_number_cells_are_label_ids_and_whole_floats_count_as_ints(tmp_path):
    rows = [["text", "label"]] + [
        [f"row {i} of kind {i % 3}", float(i % 3) if i % 2 else i % 3] for i in range(18)
    ]
    td = load_task_data(_book(tmp_path / "ids.xlsx", {"S": rows}))
    assert td.label_names == ["0", "1", "2"]  # ids sorted numerically, named by their decimal form


@pytest.mark.parametrize(
    ("sheets", "expected"),
    [
        ({"S": [["text", "label"]]}, "has a header row but no data rows"),
        ({"S": []}, "sheet 'S' is empty"),
    ],
)
def test_empty_sheets_fail_naming_the_file(tmp_path, sheets, expected):
    path = _book(tmp_path / "d.xlsx", sheets)
    with pytest.raises(DataError, match=expected) as err:
        load_task_data(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_title_row_above_the_header_is_named(tmp_path):
    rows = [["Ticket export, November"], [None], *TICKETS]
    path = _book(tmp_path / "report.xlsx", {"Export": rows})
    with pytest.raises(DataError, match=r"row 1 of sheet 'Export' names only 1 of its 2 columns .*title"):
        load_task_data(path, data=COLUMNS)
    _book(path, {"Export": [[None, None], *TICKETS]})  # a blank first row
    with pytest.raises(DataError, match=r"row 1 of sheet 'Export' names none of its columns; .*blank rows"):
        load_task_data(path, data=COLUMNS)
    # an index column's empty top-left cell (pandas' to_excel default) is not a title row
    _book(path, {"Export": [[None, *TICKETS[0]]] + [[i, *r] for i, r in enumerate(TICKETS[1:])]})
    assert load_task_data(path, data=COLUMNS).label_names == ["payroll", "printer", "vpn"]


def test_a_file_that_is_not_a_workbook_fails_in_one_line(tmp_path):
    path = tmp_path / "d.xlsx"
    path.write_bytes(b"text,label\nnot really a workbook,x\n")
    with pytest.raises(
        DataError, match=r"d.xlsx is not a readable Excel workbook .*Expected an Excel workbook"
    ):
        load_task_data(path)


def test_predict_input_can_be_a_workbook(tmp_path):
    path = _book(tmp_path / "new.xlsx", {"S": [["text"], ["the printer jams"], [None], ["vpn drops"]]})
    assert read_texts(path) == ["the printer jams", "vpn drops"]
    # a run trained on another column name: its only column is read unless a column was asked for
    assert read_texts(path, "Description", sole_column=True) == ["the printer jams", "vpn drops"]
    with pytest.raises(DataError, match=r"has no column 'Description'; its columns are \['text'\]"):
        read_texts(path, "Description")
