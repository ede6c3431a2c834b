"""Read the user's own data files through ``datasets``, failing with the file, the line and what was expected.

A ``data.path`` is one file (``.csv``, ``.tsv``, ``.jsonl``, ``.json``, ``.parquet``, ``.xlsx``), a folder
of split files (``train.*``, ``validation.*``/``dev.*``/``val.*``, ``test.*``) or a ``datasets.save_to_disk``
folder. Files are read by ``datasets.load_dataset`` (``csv``/``json``/``parquet``; ``.xlsx``, which it has
no builder for, by pandas: :mod:`ucse.data.excel`) or ``load_from_disk``,
never parsed by hand. Before reading, a text file is checked to be non-empty UTF-8; when ``datasets``
fails, the standard library's ``json``/``csv`` modules re-read the file only to find the line at fault,
because the Arrow and pandas errors name no line (or a chunk-relative one) and surface as tracebacks.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import pandas as pd

from ucse.config.checks import check_data_path
from ucse.data.csv_format import csv_delimiter, csv_field_problem, csv_lines, csv_problem
from ucse.data.excel import read_excel
from ucse.data.json_format import columns_as_written, is_json_array, json_problem, jsonl_lines, jsonl_problem
from ucse.data.tasks import DataError

FORMATS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".xlsx": "excel",
}
"""Accepted file suffixes and the ``datasets`` builder that reads each (``excel``: pandas, :mod:`.excel`)."""
SPLIT_FILES = {"train": ("train",), "validation": ("validation", "dev", "val", "valid"), "test": ("test",)}
"""File stems (and ``DatasetDict`` split names) recognised for each split."""
EXPECTED = {
    ".csv": 'a header row naming the columns (e.g. "text,label"; or ";", tab, "|"), then one row per example',
    ".tsv": "a tab-separated header row naming the columns (e.g. text<TAB>label), then one row per example",
    ".jsonl": 'one JSON object per line, e.g. {"text": "...", "label": "..."}',
    ".json": 'an array of objects [{"text": "...", "label": "..."}, ...] or one object per line',
    ".parquet": "a Parquet table with one row per example",
    ".xlsx": "an Excel workbook whose first sheet's first row names the columns, then one row per example",
}
"""What each format must hold, for messages."""


@dataclass
class RawSplit:
    """One split as read, before any check: its columns, where it came from and how its rows are named.

    Attributes:
        where: the file (or a description of an in-memory source), for messages.
        data: the rows: a ``datasets.Dataset``, or a mapping of column name -> list of Python values.
        typed: values carry their own types; ``False`` for CSV/TSV, where every cell is read as a string.
        line_map: returns the 1-based file line of each row, or ``None`` when rows have no line.
        categories: for mapping data, a column's label names in their own order (a pandas ``Categorical``'s
            categories), as a ``ClassLabel`` keeps its names.
    """

    where: str
    data: datasets.Dataset | dict[str, list]
    typed: bool = True
    line_map: Callable[[], list[int] | None] = field(default=lambda: None, repr=False)
    categories: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Nested JSON objects ({"message": {"body": ...}}) are struct columns: datasets' flatten makes each
        # field a column of its own ("message.body"), which data.text_column= can then name.
        if isinstance(self.data, datasets.Dataset) and any(
            isinstance(f, (dict, datasets.Features)) for f in self.data.features.values()
        ):
            self.data = self.data.flatten()
        elif not isinstance(self.data, datasets.Dataset):  # JSON of mixed kinds, read as written: the same
            self.data = _flatten_objects(self.data)

    @property
    def columns(self) -> list[str]:
        """Column names as read (a nested object's fields as ``object.field``)."""
        return list(self.data.column_names if isinstance(self.data, datasets.Dataset) else self.data)

    def __len__(self) -> int:
        if isinstance(self.data, datasets.Dataset):
            return len(self.data)
        return len(next(iter(self.data.values()), []))

    def class_names(self, column: str) -> list[str] | None:
        """The names of a ``ClassLabel`` column, in id order (``None`` for other columns)."""
        if isinstance(self.data, datasets.Dataset):
            feature = self.data.features[column]
            if isinstance(feature, datasets.ClassLabel):
                return list(feature.names)
            return None
        return self.categories.get(column)

    def values(self, column: str) -> list[Any]:
        """One Python value per row; ``ClassLabel`` ids come back as their names (``None`` when invalid)."""
        if not isinstance(self.data, datasets.Dataset):
            return list(self.data[column])
        raw = self.data[column][:]  # one Arrow read; indexing a Column row by row is slow
        names = self.class_names(column)
        if names is None:
            return raw
        return [names[v] if isinstance(v, int) and 0 <= v < len(names) else None for v in raw]

    def lines(self) -> list[int] | None:
        """1-based file line of each row, or ``None`` (rows are then named by 0-based index)."""
        lines = self.line_map()
        return lines if lines is not None and len(lines) == len(self) else None


def _flatten_objects(columns: dict[str, list]) -> dict[str, list]:
    """``{"message": [{"body": ..}, ..]}`` -> ``{"message.body": [..]}``, recursively, as ``Dataset.flatten``.

    Only a column whose present values are all objects is flattened (a field missing from a row is
    ``None``, as Arrow reads it); a column of objects and other values stays as it is, named by its checks.
    """
    out: dict[str, list] = {}
    for name, values in columns.items():
        present = [v for v in values if v is not None]
        if not present or not all(isinstance(v, dict) for v in present):
            out[name] = values
            continue
        keys = list(dict.fromkeys(k for v in present for k in v))
        inner = {k: [None if v is None else v.get(k) for v in values] for k in keys}
        out.update({f"{name}.{k}": v for k, v in _flatten_objects(inner).items()})
    return out


@contextlib.contextmanager
def quiet_datasets() -> Iterator[None]:
    """Silence ``datasets``' progress bars and its error log (our error names the file and the line)."""
    bars = datasets.is_progress_bar_enabled()
    level = datasets.utils.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity(datasets.utils.logging.CRITICAL)
    try:
        yield
    finally:
        datasets.utils.logging.set_verbosity(level)
        if bars:
            datasets.enable_progress_bars()


def _root_cause(err: BaseException) -> BaseException:
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return err


def decode_utf8(path: Path | str, raw: bytes) -> str:
    """UTF-8 text of a file (a leading BOM dropped); non-UTF-8 or NUL bytes fail naming line and column.

    ``path`` names the source in messages (a file, or e.g. ``stdin``).
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line, column = _position(raw, err.start)
        raise DataError(
            f"{path} line {line}: byte 0x{raw[err.start]:02x} at column {column} is not UTF-8. "
            "Save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)."
        ) from None
    nul = raw.find(b"\x00")
    if nul >= 0:  # binary data or UTF-16: the readers would fail without saying where
        line, column = _position(raw, nul)
        raise DataError(
            f"{path} line {line}: a NUL byte at column {column}; is it a binary or UTF-16 file? "
            "Save it as UTF-8 text."
        )
    return text


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a byte offset."""
    return raw[:offset].count(b"\n") + 1, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1


def load_in_memory(builder: str, path: Path, **kwargs: Any) -> datasets.Dataset:
    """``load_dataset(builder, data_files=path)`` into memory, with a throw-away Arrow cache."""
    with tempfile.TemporaryDirectory(prefix="ucse-read-") as cache, quiet_datasets():
        return datasets.load_dataset(
            builder, data_files=str(path), split="train", cache_dir=cache, keep_in_memory=True, **kwargs
        )


def read_file(path: Path) -> RawSplit:
    """Read one data file (format from its suffix) into a :class:`RawSplit`.

    Raises:
        DataError: naming the file, the 1-based line where there is one, and what the format must hold,
            for an unknown suffix, a 0-byte or blank-only file, non-UTF-8 bytes, a JSON syntax error, a
            line that is not an object, a ragged CSV row, a header-only file or an unreadable Parquet file.
    """
    suffix = path.suffix.lower()
    builder = FORMATS.get(suffix)
    if builder is None:
        raise DataError(f"{path}: unsupported file type '{suffix}'; use one of {', '.join(FORMATS)}.")
    expected = f"Expected {EXPECTED[suffix]}."
    if path.stat().st_size == 0:
        raise DataError(f"{path} is empty (0 bytes). {expected}")
    if builder == "excel":
        columns, rows = read_excel(path, expected)
        return RawSplit(str(path), columns, line_map=lambda: rows)
    if builder == "parquet":
        try:
            return RawSplit(str(path), load_in_memory("parquet", path))
        except Exception as err:  # Arrow/OS errors of a damaged or mislabelled file
            cause = _root_cause(err)
            raise DataError(f"{path} is not a readable Parquet file ({cause}). {expected}") from None
    text = decode_utf8(path, path.read_bytes())
    if not text.strip():
        raise DataError(f"{path} holds only blank lines. {expected}")
    if builder == "csv":
        delimiter = "\t" if suffix == ".tsv" else csv_delimiter(text)
        too_many = csv_field_problem(text, delimiter)
        if too_many:
            raise DataError(f"{path} {too_many}. {expected}")
        try:
            header = list(pd.read_csv(io.StringIO(text), sep=delimiter, nrows=0).columns)
            # Every column as a string: pandas would infer types per 10k-row chunk and read "NA"/"null"
            # labels as missing; only empty cells are missing. Integer labels are recognised later, once,
            # from the whole train split.
            features = datasets.Features({name: datasets.Value("string") for name in header})
            ds = load_in_memory(
                "csv", path, delimiter=delimiter, features=features, keep_default_na=False, na_values=[""]
            )
        except Exception as err:  # pandas ParserError / datasets errors
            cause = _root_cause(err)
            if isinstance(cause, ValueError) and "corresponds to no data" in str(cause):
                raise DataError(f"{path} has a header row but no data rows. {expected}") from None
            raise DataError(f"{path} {csv_problem(cause)}. {expected}") from None
        return RawSplit(str(path), ds, typed=False, line_map=lambda: csv_lines(text, delimiter))
    try:
        ds: datasets.Dataset | dict[str, list] = load_in_memory("json", path)
    except Exception as err:  # Arrow JSON errors name a chunk-relative row or none at all
        problem = json_problem(text) if suffix == ".json" or is_json_array(text) else None
        problem = problem or jsonl_problem(text)
        cause = _root_cause(err)
        if problem is None and "corresponds to no data" in str(cause):
            problem = "holds no rows (or only empty objects)"
        if problem:
            raise DataError(f"{path} {problem}. {expected}") from None
        # Every row is a JSON object, but Arrow cannot put a column of mixed kinds ("1" and 2, a text and a
        # list) in one table: the values as written, each checked where it is used (a stray label named).
        ds = columns_as_written(text)
    else:
        if any(type(feature).__name__ == "Json" for feature in ds.features.values()):
            # Where Arrow can, datasets keeps such a column as JSON and decodes its strings ("1" as 1) again.
            ds = columns_as_written(text)
    rows = RawSplit(str(path), ds, line_map=lambda: jsonl_lines(text))
    if len(rows) == 0 or not rows.columns:
        raise DataError(f"{path} holds no rows. {expected}")
    if (
        suffix == ".json"
        and len(rows) == 1
        and all(isinstance(rows.values(c)[0], list) for c in rows.columns)
    ):
        # One object of columns ({"text": [...], "label": [...]}) reads as a single row of lists.
        raise DataError(f"{path} holds one object of column lists, not rows. {expected}")
    return rows


def _split_role(name: str) -> str | None:
    return next((role for role, names in SPLIT_FILES.items() if name.lower() in names), None)


def read_saved(path: Path) -> dict[str, RawSplit]:
    """Read a ``save_to_disk`` folder: a ``DatasetDict`` (its splits by role) or one ``Dataset`` (train)."""
    try:
        with quiet_datasets():
            saved = datasets.load_from_disk(str(path), keep_in_memory=True)
    except Exception as err:  # damaged Arrow files or metadata
        cause = _root_cause(err)
        raise DataError(f"{path} is not a readable datasets save_to_disk folder ({cause}).") from None
    if isinstance(saved, datasets.Dataset):
        return {"train": RawSplit(f"{path} (saved Dataset)", saved)}
    found = {name: _split_role(name) for name in saved}
    roles = {role: name for name, role in found.items() if role}
    if "train" not in roles:
        if len(saved) == 1:  # a single split of any name holds all the data
            roles = {"train": next(iter(saved))}
        else:
            raise DataError(
                f"{path} holds splits {list(saved)} but none named train; name one 'train' (and optionally "
                f"'validation'/'dev'/'val' and 'test')."
            )
    return {role: RawSplit(f"{path} split '{name}'", saved[name]) for role, name in roles.items()}


def read_folder(path: Path) -> dict[str, RawSplit]:
    """Read a folder of split files (``train.csv``, ``dev.jsonl``, ``test.parquet``...), one per split."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in FORMATS)
    by_role: dict[str, list[Path]] = {}
    for p in files:
        role = _split_role(p.stem)
        if role:
            by_role.setdefault(role, []).append(p)
    for role, paths in by_role.items():
        if len(paths) > 1:
            raise DataError(
                f"{path} has several {role} files ({', '.join(p.name for p in paths)}); keep one."
            )
    if "train" not in by_role:
        present = ", ".join(p.name for p in sorted(path.iterdir())) or "(empty)"
        raise DataError(
            f"{path} has no train file. Expected train.<ext> (and optionally validation/dev/val.<ext> and "
            f"test.<ext>) with <ext> one of {', '.join(s[1:] for s in FORMATS)}, or a datasets save_to_disk "
            f"folder. Found: {present}."
        )
    return {role: read_file(paths[0]) for role, paths in by_role.items()}


def is_saved_dataset(path: Path) -> bool:
    """Whether ``path`` is a ``save_to_disk`` folder (a ``DatasetDict`` or a single ``Dataset``)."""
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


def read_path(path: Path) -> dict[str, RawSplit]:
    """Read ``data.path``: a file (one ``train`` pool), a split-file folder or a ``save_to_disk`` folder.

    Returns:
        The splits found, keyed ``train`` / ``validation`` / ``test``.

    Raises:
        FileNotFoundError: when the path does not exist.
        DataError: when it cannot be read (see :func:`read_file`).
    """
    check_data_path(path)
    if path.is_file():
        return {"train": read_file(path)}
    if is_saved_dataset(path):
        return read_saved(path)
    return read_folder(path)
