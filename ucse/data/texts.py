"""Unlabelled texts from a file or stdin, in input order: ``ucse predict``'s input, out-of-scope examples.

Tables (``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``/``.xlsx``) are read by
:func:`ucse.data.files.read_file` (errors name the file and line); a ``.txt`` file or stdin: a text per line.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ucse.blank_text import blank_problem, is_blank
from ucse.data.checks import text_value_problems
from ucse.data.files import FORMATS, decode_utf8, read_file
from ucse.data.tasks import DataError

logger = logging.getLogger(__name__)
INPUT_SUFFIXES = (".txt", *FORMATS)
_OFFER = ", or pass drop_bad_rows=true to leave such rows out"
STDIO = "-"


def _warn_header(lines: list[str], where: str, text_column: str) -> list[str]:
    """``lines``, with a warning where the first is a column name: a header a text file cannot have.

    A spreadsheet's column exported as text keeps its header (a trial: ``msg``, the run's text column,
    answered as a message and offered for labelling). It stays a text, since a text may be that word.
    """
    if lines and lines[0].strip().casefold() in {text_column.casefold(), "text"}:
        logger.warning(
            "%s: line 1 is %r, the name of a text column: a header? One text per line is read, so it is "
            "answered as a text too; remove that line, or give the table itself (.csv).",
            where,
            lines[0],
        )
    return lines


def _lines(text: str, where: str, drop_bad: bool | None = None) -> list[str]:
    r"""One text per line; a blank line between texts fails naming it (every input line must get its row).

    Lines end at ``\n`` (or ``\r\n``) only: ``str.splitlines`` also splits at ``\f``, ``\v``, a bare
    ``\r``, U+0085, U+2028 and U+2029, which would give one input line several output rows. ``drop_bad``:
    blank lines are left out instead, with a warning naming them (``False``: the error offers that).
    """
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    # The newline that ends the last line starts no new one; blank lines after the last text (an editor's
    # or a script's trailing newlines) are no texts either. A blank line between texts is still refused.
    trailing = []
    while lines and is_blank(lines[-1]):  # a DOS end-of-file mark (\x1a) too
        trailing.append(lines.pop())
    spaces = [line for line in trailing if line and line != "\x1a"]  # not an editor's newline: said
    if spaces and lines:  # a trial's last line "  " gave no row and no word (one inside the file fails)
        logger.warning(
            "%s: what follows the last text holds only spaces or invisible characters: no row is written for "
            "it (such a line between texts is refused).",
            where,
        )
    if drop_bad:
        bad = [number for number, line in enumerate(lines, 1) if is_blank(line)]
        _tell_dropped(where, "line", bad, len(lines), table=False)
        lines = [line for line in lines if not is_blank(line)]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise DataError(
                f"{where} line {number} is blank; every line must hold one text (remove blank lines"
                f"{_OFFER if drop_bad is False else ''})."
            )
        if is_blank(line):
            raise DataError(
                f"{where} line {number} holds {blank_problem(line)}, no word to read; every line must hold "
                f"one text (fix or remove it{_OFFER if drop_bad is False else ''})."
            )
    if not lines:
        raise DataError(f"{where} holds no texts; expected one text per line.")
    return lines


def _tell_dropped(where: str, unit: str, bad: list[int], n: int, table: bool) -> None:
    """Warn of the rows ``drop_bad_rows=true`` leaves out, by ``unit`` (``line``, or 0-based ``row``)."""
    if not bad:
        return
    shown = ", ".join(str(b) for b in bad[:10]) + (", ..." if len(bad) > 10 else "")
    named = f"{unit}{'s' if len(bad) > 1 else ''} {shown}{', 0-based' if unit == 'row' else ''}"
    logger.warning(
        "%s: %d of %d rows have no text to read (%s) and are left out (drop_bad_rows=true): the output has "
        "no row for them; the others keep their order%s.",
        where,
        len(bad),
        n,
        named,
        ", and id_column= keeps each row's id beside it" if table else "",
    )


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


def read_texts(
    source: str,
    text_column: str = "text",
    option: str = "input",
    column_option: str = "text_column",
    sole_column: bool = False,
) -> list[str]:
    """The texts of an unlabelled input (``ucse predict``'s, out-of-scope examples), in input order.

    Args:
        source: a ``.txt`` file (one text per line), a table file, or ``-`` (stdin, one text per line).
        text_column: the text column of a table file.
        option: the setting that named ``source``, for messages (``input``, ``data.ood_path``).
        column_option: the setting that names the column, for messages.
        sole_column: a table of one column lacking ``text_column`` is read from that column (for a
            ``text_column`` the user did not set: predict's default is the column the run trained on).

    Returns:
        The texts.

    Raises:
        DataError: unknown suffix, unreadable file, missing column (listing the columns found), or a
            missing/empty text (naming the file and its line, or the 0-based row for Parquet).
        FileNotFoundError: when the file does not exist.
    """
    return read_texts_and_ids(source, text_column, None, option, column_option, sole_column)[0]


def read_texts_and_ids(
    source: str,
    text_column: str,
    id_column: str | None,
    option: str = "input",
    column_option: str = "text_column",
    sole_column: bool = False,
    drop_bad: bool | None = None,
) -> tuple[list[str], list[Any] | None]:
    """:func:`read_texts`, and the values of ``id_column`` of a table input from the same read.

    ``drop_bad`` (``ucse predict drop_bad_rows=true``): rows without a text to read (missing, empty, blank
    or invisible) are left out with their ids, and a warning names them, instead of failing the input;
    ``False``: such a row fails, offering ``drop_bad_rows=true``; ``None``: not offered (other commands).

    The ids (``ucse predict id_column=``) are JSON values, one per row: a value JSON cannot hold (a Parquet
    date, bytes) as its ``str``, a missing cell ``None``; ``None`` without ``id_column``. A ``.txt`` file or
    stdin has no columns: the caller refuses ``id_column`` there first (a ``ValueError`` here).

    Raises:
        DataError: as :func:`read_texts`, and a table without ``id_column`` (listing its columns).
    """
    if id_column is not None and (source == STDIO or Path(source).suffix.lower() == ".txt"):
        raise ValueError(f"id_column={id_column}: {option}={source} is one text per line, with no columns.")
    if source == STDIO:
        return _warn_header(
            _lines(decode_utf8("stdin", _read_stdin()), "stdin", drop_bad), "stdin", text_column
        ), None
    path = Path(source).expanduser()
    if not path.is_file():
        what = "a folder, not a file: name a file in it" if path.is_dir() else "no such file"
        raise FileNotFoundError(f"{option}={source}: {what}.")
    suffix = path.suffix.lower()
    if suffix not in INPUT_SUFFIXES:
        raise DataError(
            f"{option}={source}: unsupported file type '{suffix}'; use one of {', '.join(INPUT_SUFFIXES)}."
        )
    if suffix == ".txt":  # bytes, decoded here: read_text would turn every bare \r into a line break
        return _warn_header(
            _lines(decode_utf8(path, path.read_bytes()), str(path), drop_bad), str(path), text_column
        ), None
    raw = read_file(path)
    if text_column not in raw.columns and sole_column and len(raw.columns) == 1:
        logger.info("%s: reading its only column, %r (no column %r)", path, raw.columns[0], text_column)
        text_column = raw.columns[0]
    for column, setting in ((text_column, column_option), (id_column, "id_column")):
        if column is not None and column not in raw.columns:
            raise DataError(
                f"{path} has no column '{column}'; its columns are {raw.columns}. Set {setting}=<column>."
            )
    texts = raw.values(text_column)
    bad = text_value_problems(texts, text_column)
    lines = raw.lines()
    keep = None
    if bad and drop_bad and len(bad) < len(texts):
        gone = {b.index for b in bad}
        _tell_dropped(
            str(path),
            "line" if lines else "row",
            [lines[i] if lines else i for i in sorted(gone)],
            len(texts),
            table=True,
        )
        keep = [i for i in range(len(texts)) if i not in gone]
        texts, bad = [texts[i] for i in keep], []
    if bad:  # one line naming the file and the first bad line (the 0-based row for Parquet)
        at = f"line {lines[bad[0].index]}" if lines else f"row {bad[0].index} (0-based)"
        more = f" ({len(bad)} such rows)" if len(bad) > 1 else ""
        offer = _OFFER if drop_bad is False and len(bad) < len(texts) else ""
        raise DataError(
            f"{path} {at}: {bad[0].problem}{more}; every row needs a text: fix or remove it{offer}."
        )
    if id_column is None:
        return texts, None
    plain = (str, int, float, bool, type(None))
    values = [v.item() if isinstance(v, np.generic) else v for v in raw.values(id_column)]
    values = values if keep is None else [values[i] for i in keep]
    return texts, [v if isinstance(v, plain) else str(v) for v in values]


def labelled_rows(source: str, label_column: str) -> np.ndarray | None:
    """(N,) whether each row of a table input already holds a value in ``label_column``; ``None`` without one.

    For ``ucse suggest`` on a file where some rows are labelled and the rest are not (one spreadsheet for
    both): the labelled rows are no candidates. A ``.txt`` file, stdin, or a table without that column:
    ``None``. Empty and blank cells (and pandas' missing markers) are unlabelled.
    """
    if source == STDIO or Path(source).suffix.lower() == ".txt":
        return None
    raw = read_file(Path(source).expanduser())
    if label_column not in raw.columns:
        return None
    if {"confidence", "uncertainty", "abstain"} <= set(raw.columns):
        # ``ucse predict``'s own output: its label column holds the model's answers, not labels
        logger.info("%s: read as predictions (its %r column is the model's answer)", source, label_column)
        return None
    from ucse.data.checks import none_if_na  # pandas: imported here

    values = [none_if_na(v) for v in raw.values(label_column)]
    return np.asarray([v is not None and not (isinstance(v, str) and not v.strip()) for v in values])
