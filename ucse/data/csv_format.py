"""The dialect of a user's CSV file: its separator, where each row starts, and pandas' errors as one line.

The file is parsed by ``datasets``/pandas (:mod:`ucse.data.files`); the standard library's ``csv`` module only
reads the header to find the separator and recounts rows for line numbers, which pandas does not give.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from collections.abc import Iterator

logger = logging.getLogger(__name__)

CSV_DELIMITERS = (",", ";", "\t", "|")
"""Separators a ``.csv`` file may use, by preference (Excel writes ';' where ',' is the decimal mark)."""


def csv_delimiter(text: str) -> str:
    """The separator of a ``.csv`` text: ',' unless its header row splits into columns only on another one.

    Only the header decides (a comma inside a later text must not), and ',' wins whenever it splits the
    header at all, so a comma-separated file is read exactly as before.
    """
    # newline=None: a file with CR-only line ends (old Mac exports) is read line by line too
    header = next((line for line in io.StringIO(text, newline=None) if line.strip()), "").rstrip("\r\n")
    for delimiter in CSV_DELIMITERS:
        if len(next(csv.reader([header], delimiter=delimiter), [])) > 1:
            if delimiter != ",":
                logger.info("the header's columns are separated by %r: reading the file that way", delimiter)
            return delimiter
    return ","


class _QuoteError(ValueError):
    """A quoted cell never closed, or text after the quote that closes one (the message says where)."""


def _rows(text: str, delimiter: str, strict: bool = False) -> Iterator[tuple[int, list[str]]]:
    """(1-based line where it starts, fields) of every non-blank record of ``text``, header included.

    Blank lines are skipped as pandas skips them; quoted newlines stay inside their field. The standard
    library's 131,072-character field limit is lifted: pandas reads fields of any length, and a long document
    in one cell must not fail only here (the limit is process-wide: it is raised, never lowered).
    ``strict`` raises :class:`_QuoteError` where a quoted cell is never closed or text follows its closing
    quote (``"hi" she said``), which pandas reads without a word.
    """
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=strict)
    previous = 0
    try:
        for record in reader:
            start, previous = previous + 1, reader.line_num
            if record and not (len(record) == 1 and not record[0].strip()):
                yield start, record
    except csv.Error as err:
        start, end = previous + 1, reader.line_num
        if "unexpected end of data" in str(err):
            raise _QuoteError(f"line {start}: a quoted field is never closed") from None
        fix = 'put a text that holds quotes in quotes and double its own: """hi"" she said"'
        if end == start:
            raise _QuoteError(
                f"line {start}: text follows the quote that closes a quoted cell ({fix})"
            ) from None
        raise _QuoteError(
            f"line {start}: a quote opens a cell that runs to line {end}, taking in the rows between ({fix})"
        ) from None


def csv_field_problem(text: str, delimiter: str) -> str | None:
    """The first data row with more fields than the header, or misplaced quotes, described; else ``None``.

    pandas reads a first data row with one field too many as a row label and shifts every column one to the
    left (texts read as labels, labels as the next column), and cuts such fields off further down; neither
    is an error there. Nor is a text that starts with a quote: pandas drops the quote and its partner, and
    where that partner is rows further down, reads every row in between into the one cell.
    """
    rows = _rows(text, delimiter, strict=True)
    try:
        _, header = next(rows, (0, []))
        for start, record in rows:
            if len(record) > len(header):
                extra = record[len(header) :]
                fix = (
                    "remove the delimiter at the end of each line"
                    if not any(f.strip() for f in extra)
                    else "quote fields that hold the delimiter"
                )
                return f"line {start}: {len(record)} fields where the header has {len(header)} ({fix})"
    except _QuoteError as err:
        return str(err)
    return None


def csv_lines(text: str, delimiter: str) -> list[int]:
    """1-based line where each data row starts, skipping blank lines as pandas does (quoted newlines kept)."""
    return [start for start, _ in _rows(text, delimiter)][1:]  # the first record is the header


def csv_problem(err: BaseException) -> str:
    """Pandas' parse error as one line naming the file line (its messages count rows differently)."""
    message = str(err).strip().replace("Error tokenizing data. C error: ", "")
    fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message)
    if fields:
        want, line, saw = fields.groups()
        return f"line {line}: {saw} fields where the header has {want} (quote fields that hold the delimiter)"
    quote = re.search(r"EOF inside string starting at row (\d+)", message)
    if quote:  # pandas counts rows from 0, header included
        return f"line {int(quote.group(1)) + 1}: a quoted field is never closed"
    return f"not valid CSV: {message}"
