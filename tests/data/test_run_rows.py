"""A run's copy of its rows (``rows.parquet``): written whole, read back only where it is the run's."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from toy_tasks import OWN_CUES, own_rows

from ucse.config import DataConfig
from ucse.data import load_task_data
from ucse.data.run_rows import META_KEY, read_rows, save_rows


def _run(tmp_path, data):
    """A folder with the metrics.json fingerprints a run records, and the copy of ``data``'s rows."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"data": {"fingerprints": data.fingerprints()}}))
    save_rows(run, data)
    return run


@pytest.mark.parametrize("integers", [False, True])
def test_the_copy_gives_back_every_split_the_held_out_labels_and_the_label_kind(tmp_path, integers):
    rows = own_rows(150)
    if integers:
        names = sorted(OWN_CUES)
        rows = [{"text": r["text"], "label": names.index(r["label"])} for r in rows]
    held = 0 if integers else sorted(OWN_CUES)[0]
    data = load_task_data(pd.DataFrame(rows), data=DataConfig(exclude_labels=[held]), seed=3)
    back = read_rows(_run(tmp_path, data))
    assert back is not None
    assert back.label_names == data.label_names and back.integer_labels is data.integer_labels
    assert back.label_values == data.label_values
    for split in ("train", "validation", "test"):  # the same rows in the same order, the same label ids
        assert back.texts(split) == data.texts(split)
        assert back.labels(split).tolist() == data.labels(split).tolist()
    assert back.splits["train"].features == data.splits["train"].features
    assert (
        back.ood["text"][:] == data.ood["text"][:] and back.ood["label_text"][:] == data.ood["label_text"][:]
    )
    assert back.excluded_labels == data.excluded_labels and back.dropped == data.dropped
    assert back.name == data.name and back.source == data.source


def _rewrite(path, columns=None, metadata=None, texts=None):
    table = pq.read_table(path)
    meta = table.schema.metadata if metadata is None else metadata
    if texts is not None:
        table = table.set_column(1, "text", pa.array(texts, pa.string()))
    if columns is not None:
        table = table.rename_columns(columns)
    pq.write_table(table.replace_schema_metadata(meta), path)


def _meta(path):
    return json.loads(pq.read_table(path).schema.metadata[META_KEY])


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda p: p.write_bytes(b"not parquet"), "cannot be used"),
        (lambda p: _rewrite(p, columns=["split", "body", "label"]), "its columns are"),
        (lambda p: _rewrite(p, metadata={}), "its metadata are not ucse's"),
        (lambda p: _rewrite(p, metadata={META_KEY: b"[" * 5000}), "cannot be used"),
        (
            lambda p: _rewrite(p, metadata={META_KEY: json.dumps({**_meta(p), "label_names": 3}).encode()}),
            "label",
        ),
        (
            lambda p: _rewrite(
                p, metadata={META_KEY: json.dumps({**_meta(p), "label_names": ["a", "a"]}).encode()}
            ),
            "repeat",
        ),
        (
            lambda p: _rewrite(p, texts=["edited"] + pq.read_table(p).column("text").to_pylist()[1:]),
            "rows differ",
        ),
    ],
)
def test_a_damaged_or_edited_copy_is_set_aside_with_a_note(tmp_path, caplog, damage, said):
    data = load_task_data(pd.DataFrame(own_rows(90)))
    run = _run(tmp_path, data)
    damage(run / "rows.parquet")
    assert read_rows(run) is None
    assert said in caplog.text and "rows.parquet" in caplog.text


def test_a_copy_is_used_only_against_the_runs_recorded_fingerprints(tmp_path, caplog):
    data = load_task_data(pd.DataFrame(own_rows(90)))
    run = _run(tmp_path, data)
    (run / "metrics.json").write_text(json.dumps({"data": ["not", "a", "record"]}))  # untrusted
    assert read_rows(run) is None and "recorded no fingerprints" in caplog.text
    (run / "rows.parquet").unlink()
    caplog.clear()
    assert read_rows(run) is None and caplog.text == ""  # no copy: nothing to say
