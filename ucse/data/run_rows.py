"""A run's own copy of its rows (``rows.parquet``): commands that reread a run's data need no data file.

``ucse calibrate``, ``ucse review``, ``ucse eval`` and ``ucse suggest`` read a run's train / validation /
test rows again. Read from the training file, they broke as soon as the file moved or grew: a labelling loop
that keeps one sheet and labels a few more rows each round left every earlier run refused ("the train and
validation rows ... are not the ones this run was trained with"), and a moved file needed ``data_path=`` on
every command (a trial). So a run keeps the rows it was trained and tested on, as they were split, beside its
head; the commands use that copy where it is whole and its splits still hash to the fingerprints
``metrics.json`` records, and read the data again otherwise (a run written before the copy existed, or
``data_path=`` / ``data_root=`` given).

The file is read back as untrusted: Parquet through pyarrow (no code runs on read), its columns, types,
label names and every row's label checked, and the rebuilt splits compared with the recorded fingerprints, so
a damaged or edited copy is set aside (with a note) rather than used.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

from ucse import atomic, json_read
from ucse.config.run_layout import RunFolder, read_run_metrics
from ucse.data.tasks import SPLITS, TaskData, changed_splits, with_test_in_train

# Not under "ucse.data": commands that reread a run's data quiet that logger's notes (said at training),
# while a copy set aside is news.
log = logging.getLogger("ucse.run_rows")

OOD = "ood"
"""The ``split`` value of the test rows of labels held out by ``data.exclude_labels`` (``TaskData.ood``)."""
META_KEY = b"ucse"
"""The Parquet schema metadata key holding the task's name, label names and counts (JSON)."""
VERSION = 1


def save_rows(run: str | Path, data: TaskData) -> dict[str, Any]:
    """Write ``data``'s rows (every split, and the held-out labels' test rows) to ``<run>/rows.parquet``.

    Columns ``split``, ``text`` and ``label`` (the label's name); the task's name, label names, source,
    dropped counts and label kind go into the schema's metadata.

    Returns:
        ``{"sha256": the file's, "rows": its row count, "label_names": in id order}``, for ``metrics.json``
        (``data.rows``): what :func:`read_rows` checks the file against before it parses anything.
    """
    path = RunFolder(run).rows
    parts, texts, labels = [], [], []
    names = data.label_names
    for split in SPLITS:
        rows = data.texts(split)
        parts += [split] * len(rows)
        texts += rows
        labels += [names[y] for y in data.labels(split)]
    if data.ood is not None and len(data.ood):
        parts += [OOD] * len(data.ood)
        texts += data.ood["text"][:]
        labels += data.ood["label_text"][:]
    meta = {
        "version": VERSION,
        "name": data.name,
        "label_names": list(names),
        "source": data.source,
        "dropped": dict(data.dropped),
        "excluded_labels": list(data.excluded_labels),
        "integer_labels": bool(data.integer_labels),
        "carved": list(data.carved),
    }
    table = pa.table(
        {
            "split": pa.array(parts, pa.string()),
            "text": pa.array(texts, pa.string()),
            "label": pa.array(labels),
        },
        schema=pa.schema(
            [("split", pa.string()), ("text", pa.string()), ("label", pa.string())],
            metadata={META_KEY: atomic.dumps(meta).encode()},
        ),
    )
    with atomic.atomic_file(path, "wb") as f:
        pq.write_table(table, f)
    return {"sha256": atomic.sha256(path), "rows": len(parts), "label_names": list(names)}


def _rebuilt(table: pa.Table, meta: dict) -> TaskData:
    """The TaskData of a checked table and its metadata (raises ValueError where anything does not fit)."""
    names = meta.get("label_names")
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise ValueError("its label names are not a list of strings")
    if len(set(names)) != len(names):
        raise ValueError("its label names repeat")
    ids = {n: i for i, n in enumerate(names)}
    column = {c: table.column(c).to_pylist() for c in ("split", "text", "label")}
    if any(not isinstance(v, str) for c in column.values() for v in c):
        raise ValueError("a cell is empty or not a string")
    rows: dict[str, tuple[list[str], list[int]]] = {s: ([], []) for s in SPLITS}
    ood_texts, ood_labels = [], []
    for split, text, label in zip(column["split"], column["text"], column["label"]):
        if split == OOD:
            ood_texts.append(text)
            ood_labels.append(label)
        elif split in rows and label in ids:
            rows[split][0].append(text)
            rows[split][1].append(ids[label])
        else:
            raise ValueError(f"a row's split {split!r} or label {label!r} is not the run's")
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names)}
    )
    splits = datasets.DatasetDict(
        {
            s: datasets.Dataset.from_dict({"text": t, "label": y}, features=features)
            for s, (t, y) in rows.items()
        }
    )
    ood = None
    if ood_texts:
        ood_features = datasets.Features(
            {"text": datasets.Value("string"), "label_text": datasets.Value("string")}
        )
        ood = datasets.Dataset.from_dict({"text": ood_texts, "label_text": ood_labels}, features=ood_features)
    dropped = meta.get("dropped")
    excluded, carved = meta.get("excluded_labels"), meta.get("carved")
    return TaskData(
        name=str(meta.get("name") or "task"),
        splits=splits,
        label_names=names,
        source=str(meta.get("source") or ""),
        dropped={str(k): int(v) for k, v in dropped.items() if isinstance(v, int)}
        if isinstance(dropped, dict)
        else {},
        ood=ood,
        excluded_labels=[str(x) for x in excluded] if isinstance(excluded, list) else [],
        integer_labels=meta.get("integer_labels") is True,
        carved=[c for c in SPLITS if c in carved] if isinstance(carved, list) else [],
    )


def _recorded(run: str | Path) -> tuple[dict | None, dict | None]:
    """(``data.rows``, ``data.fingerprints``) of the run's ``metrics.json``, each ``None`` unless a dict."""
    info = read_run_metrics(Path(run), "its rows.parquet is not used").get("data")
    info = info if isinstance(info, dict) else {}
    rows, prints = info.get("rows"), info.get("fingerprints")
    return (rows if isinstance(rows, dict) else None), (prints if isinstance(prints, dict) else None)


def _mismatch(path: Path, rows: dict | None) -> str:
    """Why ``path`` is not the file the run recorded (``""``: it is), checked before anything is parsed.

    Its SHA-256 and row count are the ones ``metrics.json`` holds: an edited, damaged or other copy (label
    names reordered, rows added: a review had one calibrate a wrong profile) is set aside here. And a copy
    with more rows than the run wrote is never decoded (a crafted one of 25 kB took 1 GB to read).
    """
    if rows is None or not isinstance(rows.get("sha256"), str) or type(rows.get("rows")) is not int:
        return "the run recorded no hash of it"
    if atomic.sha256(path) != rows["sha256"]:
        return "its bytes are not the ones the run wrote"
    count = pq.ParquetFile(path).metadata.num_rows  # from the footer: nothing decoded yet
    if count != rows["rows"]:
        return f"it holds {count} rows, not the run's {rows['rows']}"
    return ""


def intact(run: str | Path) -> bool:
    """Whether the run's ``rows.parquet`` is the file it wrote (hash and row count), read or not.

    What decides whether messages offer ``ucse calibrate`` for a run trained on rows passed in memory.
    """
    path = RunFolder(run).rows
    try:
        return path.is_file() and not _mismatch(path, _recorded(run)[0])
    except (OSError, ValueError, pa.ArrowException):
        return False


def read_rows(run: str | Path) -> TaskData | None:
    """The run's own copy of its rows, or ``None`` (no copy, or one that is damaged or not the run's).

    Used only where the file is the one the run wrote (its SHA-256 and row count in ``metrics.json``) and
    every split still hashes to the fingerprints recorded beside them: a copy that cannot be checked or does
    not match is set aside with a note.
    """
    path = RunFolder(run).rows
    if not path.is_file():
        return None
    rows, recorded = _recorded(run)
    try:
        why = _mismatch(path, rows)
        if why:
            return _set_aside(path, why)
        table = pq.read_table(path)
        if table.schema.names != ["split", "text", "label"]:
            raise ValueError(f"its columns are {table.schema.names}")
        raw = (table.schema.metadata or {}).get(META_KEY)
        meta = json_read.loads(raw) if raw is not None else None
        if not isinstance(meta, dict) or type(meta.get("version")) is not int or meta["version"] != VERSION:
            raise ValueError("its metadata are not ucse's")
        if meta.get("label_names") != rows.get("label_names"):  # the id order too: no fingerprint sees it
            raise ValueError("its label names are not the ones the run recorded")
        data = _rebuilt(table, meta)
    except (OSError, ValueError, MemoryError, pa.ArrowException) as err:
        problem = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        log.warning("%s cannot be used (%s); the run's data are read again instead.", path, problem)
        return None
    changed = changed_splits(recorded, data)
    if changed is None or changed:
        return _set_aside(
            path,
            "the run recorded no fingerprints"
            if changed is None
            else f"its {', '.join(changed)} rows differ",
        )
    return data


def _set_aside(path: Path, why: str) -> None:
    log.warning("%s is not the run's copy of its rows (%s); the run's data are read again.", path, why)


def as_trained(run: str | Path, data: TaskData) -> TaskData:
    """``data`` as the run's shipped head trained on it: test rows in train where it refitted on them.

    ``data.refit_test`` records their count in ``metrics.json`` (``selection.refit_test``); with them in
    train, the held-out outputs (train, test, validation in that order) line up with train + validation as
    everywhere else. An unreadable record, or a count that is not the test split's, leaves ``data`` as is.
    """
    selection = read_run_metrics(Path(run), "the test rows are taken as held out").get("selection")
    count = selection.get("refit_test") if isinstance(selection, dict) else None
    if type(count) is int and count == len(data.labels("test")) > 0:
        return with_test_in_train(data)
    return data
