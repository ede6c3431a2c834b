"""The dialect of a user's CSV file: its separator, where each row starts, and pandas' errors as one line.

The file is parsed by ``datasets``/pandas (:mod:`ucse.data.files`); the standard library's ``csv`` module only
reads the header to find the separator and recounts rows for line numbers, which pandas does not give.
"""

from __future__ import annotations

import csv
import io
import logging
import re

logger = logging.getLogger(__name__)

CSV_DELIMITERS = (",", ";", "\t", "|")
"""Separators a ``.csv`` file may use, by preference (Excel writes ';' where ',' is the decimal mark)."""


def csv_delimiter(text: str) -> str:
    """The separator of a ``.csv`` text: ',' unless its header row splits into columns only on another one.

    Only the header decides (a comma inside a later text must not), and ',' wins whenever it splits the
    header at all, so a comma-separated file is read exactly as before.
    """
    header = next((line for line in io.StringIO(text) if line.strip()), "").rstrip("\r\n")
    for delimiter in CSV_DELIMITERS:
        if len(next(csv.reader([header], delimiter=delimiter), [])) > 1:
            if delimiter != ",":
                logger.info("the header's columns are separated by %r: reading the file that way", delimiter)
            return delimiter
    return ","


def csv_lines(text: str, delimiter: str) -> list[int]:
    """1-based line where each data row starts, skipping blank lines as pandas does (quoted newlines kept)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    starts, previous = [], 0
    for record in reader:
        if record and not (len(record) == 1 and not record[0].strip()):
            starts.append(previous + 1)
        previous = reader.line_num
    return starts[1:]  # the first record is the header


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
