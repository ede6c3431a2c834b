"""Texts in and prediction rows out for ``ucse predict``: which files, which columns, in input order.

Tables (``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``) are read by :func:`ucse.data.files.read_file`
(``datasets`` underneath, errors naming the file and line); a ``.txt`` file or stdin is one text per line.
Predictions are written as JSON lines or CSV (``probs`` and ``set`` as JSON inside the cell), atomically.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ucse import atomic
from ucse.data.checks import text_value_problems
from ucse.data.files import FORMATS, decode_utf8, read_file
from ucse.data.tasks import DataError

INPUT_SUFFIXES = (".txt", *FORMATS)
OUTPUT_SUFFIXES = (".jsonl", ".csv")
STDIO = "-"


def check_output(out: str, overwrite: bool = False) -> None:
    """Fail before any work unless ``out`` is ``-`` or a new ``.jsonl``/``.csv`` path in an existing folder.

    An existing file is refused unless ``overwrite``: nothing the user did not ask to replace is replaced.
    The folder must be writable, checked here so that a read-only destination fails before the model is
    loaded and the texts are run.
    """
    if out == STDIO:
        return
    path = Path(out).expanduser()
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DataError(
            f"out={out}: unsupported output type '{path.suffix}'; use a .jsonl or .csv path, or - for stdout."
        )
    if path.is_dir():
        raise DataError(f"out={out} is a folder; give a file path ending in .jsonl or .csv.")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"out={out}: folder {path.parent} does not exist; create it first.")
    if path.exists() and not overwrite:
        raise DataError(f"out={out} already exists; nothing was written. Pass overwrite=true to replace it.")
    try:  # an unnamed temporary file (O_TMPFILE where supported): the truest test of writability
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise DataError(
            f"out={out}: folder {path.parent} is not writable ({err.strerror}); nothing was done. "
            "Choose a writable folder."
        ) from None


def _lines(text: str, where: str) -> list[str]:
    r"""One text per line; a blank line fails naming it (every input line must get its output row).

    Lines end at ``\n`` (or ``\r\n``) only: ``str.splitlines`` also splits at ``\f``, ``\v``, a bare
    ``\r``, U+0085, U+2028 and U+2029, which would give one input line several output rows.
    """
    lines = text.split("\n")
    if lines[-1] == "":  # the newline that ends the last line starts no new one
        lines.pop()
    lines = [line.removesuffix("\r") for line in lines]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise DataError(
                f"{where} line {number} is blank; every line must hold one text (remove blank lines)."
            )
    if not lines:
        raise DataError(f"{where} holds no texts; expected one text per line.")
    return lines


def _read_stdin() -> bytes:
    """All of stdin as bytes (no newline translation), or a clear error when there is no stdin to read."""
    stream = sys.stdin
    if stream is None or stream.closed:
        raise DataError("input=-: stdin is closed; pipe the texts in (cat texts.txt | ucse predict ...).")
    buffer = getattr(stream, "buffer", None)  # a text stream without bytes (a test's StringIO) is read as is
    try:
        return buffer.read() if buffer is not None else stream.read().encode("utf-8", "surrogateescape")
    except (OSError, ValueError) as err:  # EBADF on a closed descriptor; ValueError on a closed file
        raise DataError(
            f"input=-: stdin cannot be read ({err}); pipe the texts in or pass input=<file>."
        ) from None


def read_texts(source: str, text_column: str = "text") -> list[str]:
    """The texts of a predict input, in input order.

    Args:
        source: a ``.txt`` file (one text per line), a table file, or ``-`` (stdin, one text per line).
        text_column: the text column of a table file.

    Returns:
        The texts.

    Raises:
        DataError: unknown suffix, unreadable file, missing column (listing the columns found), or a
            missing/empty text (naming the file and its line, or the 0-based row for Parquet).
        FileNotFoundError: when the file does not exist.
    """
    if source == STDIO:
        return _lines(decode_utf8("stdin", _read_stdin()), "stdin")
    path = Path(source).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"input={source}: no such file.")
    suffix = path.suffix.lower()
    if suffix not in INPUT_SUFFIXES:
        raise DataError(
            f"input={source}: unsupported file type '{suffix}'; use one of {', '.join(INPUT_SUFFIXES)}."
        )
    if suffix == ".txt":  # bytes, decoded here: read_text would turn every bare \r into a line break
        return _lines(decode_utf8(path, path.read_bytes()), str(path))
    raw = read_file(path)
    if text_column not in raw.columns:
        raise DataError(
            f"{path} has no column '{text_column}'; its columns are {raw.columns}. Set text_column=<column>."
        )
    texts = raw.values(text_column)
    bad = text_value_problems(texts, text_column)
    if bad:  # one line naming the file and the first bad line (the 0-based row for Parquet)
        lines = raw.lines()
        at = f"line {lines[bad[0].index]}" if lines else f"row {bad[0].index}"
        more = f" ({len(bad)} such rows)" if len(bad) > 1 else ""
        raise DataError(f"{path} {at}: {bad[0].problem}{more}; every row needs a text: fix or remove it.")
    return texts


def _csv_cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def _render(rows: list[dict], fmt: str) -> Iterable[str]:
    if fmt == ".jsonl":
        for row in rows:
            yield atomic.dumps(row, ensure_ascii=False) + "\n"  # strict JSON: NaN -> null
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_cell(v) for k, v in row.items()})
    yield buf.getvalue()


def write_predictions(rows: list[dict], out: str, overwrite: bool = False) -> None:
    """Write prediction rows to ``out`` (``.jsonl``, ``.csv``, or ``-``: JSON lines on stdout), atomically.

    Without ``overwrite`` a file that appeared at ``out`` since :func:`check_output` (another process) is
    never replaced: the write fails with ``FileExistsError`` instead.

    Raises:
        DataError: when the file cannot be written (no space, no permission); ``out`` is then unchanged.
    """
    if out == STDIO:
        for chunk in _render(rows, ".jsonl"):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return
    path = Path(out).expanduser()
    try:
        with atomic.atomic_file(path, replace=overwrite) as fh:
            for chunk in _render(rows, path.suffix.lower()):
                fh.write(chunk)
    except FileExistsError:
        raise  # another process wrote out= meanwhile: run_cli says so (not a disk problem)
    except OSError as err:  # a full disk or a folder that became read-only: the temporary file is gone
        raise DataError(
            f"out={out}: could not write the predictions ({err.strerror or err}); nothing was written. "
            "Free disk space or choose another out=."
        ) from None
