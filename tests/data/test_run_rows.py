"""A run's copy of its rows (``rows.parquet``): written whole, read back only where it is the run's."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from toy_tasks import OWN_CUES, own_rows

from ucse.atomic import sha256
from ucse.config import DataConfig
from ucse.data import load_task_data
from ucse.data.run_rows import META_KEY, intact, read_rows, save_rows


def _record(run, rows=None, data=None):
    """metrics.json as a run writes it: the splits' fingerprints, the copy's hash, rows and label names.

    Without ``rows``: those of the file as it is now, the label names as the run recorded them.
    """
    old = json.loads((run / "metrics.json").read_text())["data"] if (run / "metrics.json").exists() else {}
    rows = rows or {
        "sha256": sha256(run / "rows.parquet"),
        "rows": pq.ParquetFile(run / "rows.parquet").metadata.num_rows,
        "label_names": old["rows"]["label_names"],
    }
    prints = data.fingerprints() if data is not None else old["fingerprints"]
    (run / "metrics.json").write_text(json.dumps({"data": {"fingerprints": prints, "rows": rows}}))


def _run(tmp_path, data):
    run = tmp_path / "run"
    run.mkdir()
    _record(run, save_rows(run, data), data)
    return run


@pytest.mark.parametrize("integers", [False, True])
def test_the_copy_gives_back_every_split_the_held_out_labels_and_the_label_kind(tmp_path, integers):
    rows = own_rows(150)
    if integers:
        names = sorted(OWN_CUES)
        rows = [{"text": r["text"], "label": names.index(r["label"])} for r in rows]
    held = 0 if integers else sorted(OWN_CUES)[0]
    data = load_task_data(pd.DataFrame(rows), data=DataConfig(exclude_labels=[held]), seed=3)
    run = _run(tmp_path, data)
    back = read_rows(run)
    assert back is not None and intact(run)
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


def _rewrite(path, columns=None, metadata=None, texts=None, rows=None):
    table = pq.read_table(path)
    meta = table.schema.metadata if metadata is None else metadata
    if rows is not None:
        table = pa.concat_tables(
            [table, pa.table({n: rows[n] for n in table.schema.names}, schema=table.schema)]
        )
    if texts is not None:
        table = table.set_column(1, "text", pa.array(texts, pa.string()))
    if columns is not None:
        table = table.rename_columns(columns)
    pq.write_table(table.replace_schema_metadata(meta), path)


def _meta(path, **change):
    return {META_KEY: json.dumps(json.loads(pq.read_table(path).schema.metadata[META_KEY]) | change).encode()}


def _names(path):
    return json.loads(pq.read_table(path).schema.metadata[META_KEY])["label_names"]


DAMAGE = {
    "not parquet": lambda p: p.write_bytes(b"PAR1 not parquet"),
    "a text edited": lambda p: _rewrite(
        p, texts=["edited"] + pq.read_table(p).column("text").to_pylist()[1:]
    ),
    # a review: with the label names reordered, calibrate fitted and saved a wrong profile (exit 0)
    "label names reordered": lambda p: _rewrite(p, metadata=_meta(p, label_names=_names(p)[::-1])),
    "a label name added": lambda p: _rewrite(p, metadata=_meta(p, label_names=[*_names(p), "zzz"])),
    "an ood row added": lambda p: _rewrite(p, rows={"split": ["ood"], "text": ["new"], "label": ["x"]}),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_copy_that_is_not_the_file_the_run_wrote_is_set_aside_before_it_is_parsed(tmp_path, caplog, damage):
    data = load_task_data(pd.DataFrame(own_rows(90)))
    run = _run(tmp_path, data)
    DAMAGE[damage](run / "rows.parquet")
    assert read_rows(run) is None and not intact(run)
    said = "is not the run's copy of its rows (its bytes are not the ones the run wrote)"
    assert said in caplog.text or "holds" in caplog.text


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda p: p.write_bytes(b"PAR1 not parquet"), "cannot be used"),
        (lambda p: _rewrite(p, columns=["split", "body", "label"]), "its columns are"),
        (lambda p: _rewrite(p, metadata={}), "its metadata are not ucse's"),
        (lambda p: _rewrite(p, metadata=_meta(p, version=True)), "its metadata are not ucse's"),
        (lambda p: _rewrite(p, metadata={META_KEY: b"[" * 5000}), "cannot be used"),
        (lambda p: _rewrite(p, metadata=_meta(p, label_names=3)), "not the ones the run recorded"),
        (lambda p: _rewrite(p, metadata=_meta(p, label_names=["a", "a"])), "not the ones the run recorded"),
        # the fingerprints hash (name, text) pairs, blind to the ids' order: the recorded names are not
        (
            lambda p: _rewrite(p, metadata=_meta(p, label_names=_names(p)[::-1])),
            "not the ones the run recorded",
        ),
        (
            lambda p: _rewrite(p, texts=["edited"] + pq.read_table(p).column("text").to_pylist()[1:]),
            "rows differ",
        ),
    ],
)
def test_a_crafted_copy_whose_hash_was_recorded_too_is_still_checked(tmp_path, caplog, damage, said):
    # metrics.json is read back from disk as well: a pair edited together still meets the rows' checks
    data = load_task_data(pd.DataFrame(own_rows(90)))
    run = _run(tmp_path, data)
    damage(run / "rows.parquet")
    if said != "cannot be used" or (run / "rows.parquet").read_bytes().endswith(b"PAR1"):
        _record(run)  # the damaged file's own hash and row count recorded
    else:
        _record(run, {"sha256": sha256(run / "rows.parquet"), "rows": 0})
    assert read_rows(run) is None
    assert said in caplog.text and "rows.parquet" in caplog.text


def test_a_copy_with_more_rows_than_the_run_wrote_is_never_decoded(tmp_path, caplog, monkeypatch):
    # a review: 3,000,000 rows of one short text made a 25 kB file that took 1 GB to read
    data = load_task_data(pd.DataFrame(own_rows(90)))
    run = _run(tmp_path, data)
    n = 300_000
    table = pq.read_table(run / "rows.parquet")
    big = pa.table(
        {"split": ["train"] * n, "text": ["x"] * n, "label": [data.label_names[0]] * n}, schema=table.schema
    )
    pq.write_table(big.replace_schema_metadata(table.schema.metadata), run / "rows.parquet")
    recorded = json.loads((run / "metrics.json").read_text())["data"]["rows"]
    _record(run, recorded | {"sha256": sha256(run / "rows.parquet")})  # the hash recorded, not the count
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: pytest.fail("decoded"))
    assert read_rows(run) is None and f"it holds {n} rows, not the run's {recorded['rows']}" in caplog.text


def test_a_copy_is_used_only_against_what_the_run_recorded(tmp_path, caplog):
    data = load_task_data(pd.DataFrame(own_rows(90)))
    run = _run(tmp_path, data)
    (run / "metrics.json").write_text(json.dumps({"data": ["not", "a", "record"]}))  # untrusted
    assert read_rows(run) is None and not intact(run) and "recorded no hash of it" in caplog.text
    (run / "rows.parquet").unlink()
    caplog.clear()
    assert read_rows(run) is None and caplog.text == ""  # no copy: nothing to say


@pytest.mark.parametrize(
    ("names", "said"),
    [(3, "not a list of strings"), (["a", "a"], "repeat"), (["a", "b"], "is not the run's")],
)
def test_label_names_that_cannot_be_the_runs_are_refused_when_rebuilt(names, said):
    # what read_rows meets where metrics.json's record was crafted along with the copy
    from ucse.data.run_rows import _rebuilt

    table = pa.table({"split": ["train"], "text": ["hello"], "label": ["c"]})
    with pytest.raises(ValueError, match=said):
        _rebuilt(table, {"label_names": names})
