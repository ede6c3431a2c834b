"""Excel workbooks (``.xlsx``) as data files: the first sheet, its first row naming the columns.

``datasets`` has no Excel builder, so the sheet is read by pandas' ``read_excel`` through openpyxl (the engine
pandas uses for ``.xlsx``). Cells keep their types, as JSON values do (a label column of whole numbers is read
as ids). A row's line in messages is its row number in the sheet (the header is row 1); fully empty rows,
which a spreadsheet shows as gaps, are skipped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from ucse.data.checks import none_if_na
from ucse.data.tasks import DataError

logger = logging.getLogger(__name__)


def _cell(value: Any) -> Any:
    """A cell as a Python value: an empty cell (NaN, NaT) as ``None``, a whole float as its int.

    Excel stores every number as a float: ``3.0`` in a label column is the id 3.
    """
    value = none_if_na(value)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def read_excel(path: Path, expected: str) -> tuple[dict[str, list], list[int]]:
    """Columns of the workbook's first sheet (name -> one value per row) and each row's sheet row number.

    Raises:
        DataError: naming the file, when it is not a readable workbook (openpyxl, a dependency, missing
            included), or the sheet has no header or no data rows.
    """
    try:
        with pd.ExcelFile(path, engine="openpyxl") as book:
            sheets = book.sheet_names
            frame = book.parse(sheets[0], header=0, dtype=object)
    except Exception as err:  # zip / XML / openpyxl errors of a damaged or mislabelled file
        raise DataError(
            f"{path} is not a readable Excel workbook ({type(err).__name__}: {err}). {expected}"
        ) from None
    if len(sheets) > 1:
        logger.info("%s: reading its first sheet, %r (of %d sheets)", path, sheets[0], len(sheets))
    if frame.columns.empty:
        raise DataError(f"{path}: sheet {sheets[0]!r} is empty. {expected}")
    # header cells left empty (pandas names them "Unnamed: i"): half or more is a report's title row above
    # the header, not a header (an index column's one empty top-left cell is not)
    blank = [str(c) for c in frame.columns if str(c).startswith("Unnamed: ")]
    if len(frame.columns) > 1 and len(blank) >= len(frame.columns) / 2:
        named = [str(c) for c in frame.columns if str(c) not in blank]
        names = (
            f"only {len(named)} of its {len(frame.columns)} columns ({named})"
            if named
            else "none of its columns"
        )
        raise DataError(
            f"{path}: row 1 of sheet {sheets[0]!r} names {names}; the first row must name the columns: "
            "delete any rows above the header (a title, blank rows)."
        )
    filled = ~frame.isna().all(axis=1)  # (N,) rows with at least one cell
    frame = frame[filled]
    if frame.empty:
        raise DataError(f"{path}: sheet {sheets[0]!r} has a header row but no data rows. {expected}")
    rows = [int(i) + 2 for i in frame.index]  # 0-based data index -> sheet row (header = row 1)
    columns = {str(c): [_cell(v) for v in frame[c].tolist()] for c in frame.columns}
    return columns, rows
