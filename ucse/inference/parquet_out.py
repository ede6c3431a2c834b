"""Prediction rows as a Parquet file, block by block (``ucse predict out=predictions.parquet``).

A warehouse job loads Parquet with its types: ``label`` as the run's labels (text, or integers for a run of
integer labels), ``confidence`` / ``uncertainty`` / ``ood_score`` as float64, ``abstain`` / ``ood`` as
booleans, ``probs`` and ``set`` as JSON text (as in the CSV), an ``id_column`` as its first block gives it.
The schema is fixed from the first block and every block is written against it (pyarrow's ``ParquetWriter``,
one row group per block), so memory stays flat on a long input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ucse.data.tasks import DataError

_FLOATS = ("confidence", "uncertainty", "ood_score")
_BOOLS = ("abstain", "ood")
_JSON = ("probs", "set")  # a mapping and a list: JSON text, as in the CSV


def _schema(first: list[dict[str, Any]]) -> pa.Schema:
    """The file's columns from the first block: the row fields' own types, the others as pyarrow infers."""
    inferred = pa.Table.from_pylist(first).schema
    fields = []
    for field in inferred:
        if field.name in _FLOATS:
            kind = pa.float64()
        elif field.name in _BOOLS:
            kind = pa.bool_()
        elif field.name in _JSON or field.name == "text" or pa.types.is_null(field.type):
            kind = pa.string()  # an id column empty in the first block: text
        else:
            kind = field.type  # label (text or int64) and an id column
        fields.append(pa.field(field.name, kind))
    return pa.schema(fields)


def _cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: json.dumps(v, ensure_ascii=False) if k in _JSON else v for k, v in r.items()} for r in rows]


def write_parquet(blocks: Iterable[list[dict[str, Any]]], fh: IO[bytes], where: str) -> None:
    """Write ``blocks`` of prediction rows to the binary handle ``fh`` (the atomic file of ``where``).

    Raises:
        DataError: a value that does not fit its column's type in a later block (an id column of numbers
            that turns to text), naming the column.
    """
    writer, schema = None, None
    try:
        for rows in blocks:
            if not rows:
                continue
            cells = _cells(rows)
            if writer is None:
                schema = _schema(cells)
                writer = pq.ParquetWriter(fh, schema)
            try:
                writer.write_table(pa.Table.from_pylist(cells, schema=schema))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
                said = str(err).splitlines()[0][:200]
                raise DataError(
                    f"out={where}: a value does not fit its Parquet column ({said}); write .jsonl or .csv "
                    "instead, or give the id column one type."
                ) from None
        if writer is None:  # no rows: an empty file still has the columns a reader expects
            pq.write_table(pa.table({"text": pa.array([], pa.string())}), fh)
    finally:
        if writer is not None:
            writer.close()
