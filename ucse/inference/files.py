"""Texts in and prediction rows out for ``ucse predict``: which files, which columns, in input order.

Tables (``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``) are read by :func:`ucse.data.files.read_file`
(``datasets`` underneath, errors naming the file and line); a ``.txt`` file or stdin is one text per line.
Predictions are written as JSON lines, CSV or Parquet (``probs`` and ``set`` as JSON inside the cell),
atomically.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ucse import atomic
from ucse.data.tasks import DataError
from ucse.data.texts import INPUT_SUFFIXES as INPUT_SUFFIXES  # re-exported: predict's readable inputs
from ucse.data.texts import STDIO
from ucse.data.texts import read_texts as read_texts  # re-exported (it lives in the data layer)
from ucse.data.texts import read_texts_and_ids as read_texts_and_ids  # re-exported, as read_texts

OUTPUT_SUFFIXES = (".jsonl", ".csv", ".parquet")


def check_output(out: str, overwrite: bool = False) -> None:
    """Fail before any work unless ``out`` is ``-`` or a new ``.jsonl``/``.csv`` path in an existing folder.

    An existing file is refused unless ``overwrite``: nothing the user did not ask to replace is replaced.
    The folder must be writable, checked here so that a read-only destination fails before the model is
    loaded and the texts are run.
    """
    if out == STDIO:
        _require_stdout()
        return
    path = Path(out).expanduser()
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DataError(
            f"out={out}: unsupported output type '{path.suffix}'; use a .jsonl, .csv or .parquet path, or - "
            "for stdout."
        )
    if path.is_dir():
        raise DataError(f"out={out} is a folder; give a file path ending in .jsonl, .csv or .parquet.")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"out={out}: folder {path.parent} does not exist; create it first.")
    if (path.exists() or path.is_symlink()) and not overwrite:  # a link to nowhere is there too
        raise DataError(f"out={out} already exists; nothing was written. Pass overwrite=true to replace it.")
    try:  # an unnamed temporary file (O_TMPFILE where supported): the truest test of writability
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise DataError(
            f"out={out}: folder {path.parent} is not writable ({err.strerror}); nothing was done. "
            "Choose a writable folder."
        ) from None


def _require_stdout() -> None:
    if sys.stdout is None:  # started with stdout closed (`>&-`): before, an AttributeError traceback
        raise DataError("out=-: standard output is closed; give out=<file>.jsonl or .csv.")


def _csv_cell(value: Any) -> Any:
    # as written, like the label column beside it (not \\u escapes of every non-ASCII label)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value


def _render(blocks: Iterable[list[dict]], fmt: str) -> Iterable[str]:
    """Text of the rows, block by block (a CSV header before the first row only)."""
    fields: list[str] | None = None
    for rows in blocks:
        if not rows:  # an empty block (or no rows at all): nothing to write, no header to take from a row
            continue
        if fmt == ".jsonl":
            yield "".join(atomic.dumps(row, ensure_ascii=False) + "\n" for row in rows)  # NaN -> null
            continue
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields or list(rows[0]), lineterminator="\n")
        if fields is None:
            writer.writeheader()
            fields = list(rows[0])
        for row in rows:
            writer.writerow({k: _csv_cell(v) for k, v in row.items()})
        yield buf.getvalue()


def write_predictions(rows: list[dict] | Iterable[list[dict]], out: str, overwrite: bool = False) -> None:
    """Write prediction rows to ``out`` (``.jsonl``, ``.csv``, or ``-``: JSON lines on stdout), atomically.

    ``rows`` is a list of rows, or an iterable of lists of rows (blocks, written as they come: see
    :mod:`ucse.inference.blocks`).

    Without ``overwrite`` a file that appeared at ``out`` since :func:`check_output` (another process) is
    never replaced: the write fails with ``FileExistsError`` instead.

    Raises:
        DataError: when the file cannot be written (no space, no permission); ``out`` is then unchanged.
    """
    blocks = [rows] if isinstance(rows, list) and (not rows or isinstance(rows[0], dict)) else rows
    if out == STDIO:
        _require_stdout()
        try:
            for chunk in _render(blocks, ".jsonl"):
                sys.stdout.write(chunk)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader stopped early (`| head`): what it read is what it wanted
            # Python would report the pipe again while flushing at exit: point stdout at /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return
    path = Path(out).expanduser()
    parquet = path.suffix.lower() == ".parquet"
    try:
        with atomic.atomic_file(path, "wb" if parquet else "w", replace=overwrite) as fh:
            if parquet:  # pyarrow: imported with the format that needs it
                from ucse.inference.parquet_out import write_parquet

                write_parquet(blocks, fh, out)
            else:
                for chunk in _render(blocks, path.suffix.lower()):
                    fh.write(chunk)
    except FileExistsError:
        raise  # another process wrote out= meanwhile: run_cli says so (not a disk problem)
    except OSError as err:  # a full disk or a folder that became read-only: the temporary file is gone
        raise DataError(
            f"out={out}: could not write the predictions ({err.strerror or err}); nothing was written. "
            "Free disk space or choose another out=."
        ) from None
