import json
from collections import Counter

import datasets
import pytest
from toy_tasks import write_jsonl

from ucse.config import DataConfig, TaskConfig, TaskType
from ucse.data import (
    DataError,
    label_positive_pairs,
    load_retrieval,
    load_sts,
    retrieval_positive_pairs,
    sts_positive_pairs,
)


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("split,count", [("train", 5749), ("validation", 1500), ("test", 1379)])
def test_sts_benchmark(real_root, split, count, capfd):
    ds = load_sts(real_root / "STSBenchmark", split)
    assert "Flattening" not in capfd.readouterr().err  # datasets' bars: four a split, on every evaluation
    assert len(ds) == count and ds.column_names == ["sentence1", "sentence2", "score"]
    assert ds.features["score"] == datasets.Value("float64")
    assert 0.0 <= min(ds["score"]) and max(ds["score"]) <= 5.0
    rows = _jsonl(real_root / "STSBenchmark" / f"{split}.jsonl")
    pairs = sts_positive_pairs(ds)
    assert pairs == [(r["sentence1"], r["sentence2"]) for r in rows if r["score"] >= 4.0]
    assert len(sts_positive_pairs(ds, threshold=5.0)) == sum(r["score"] >= 5.0 for r in rows)


@pytest.mark.slow
def test_sts_via_task_config(real_root):
    task = TaskConfig(name="STSBenchmark", type=TaskType.sts, hf_path="mteb/stsbenchmark-sts")
    assert len(load_sts(task, "test", DataConfig(root=str(real_root)))) == 1379


@pytest.mark.slow
@pytest.mark.parametrize("split,queries,judgements", [("test", 300, 339), ("train", 809, 919)])
def test_scifact(real_root, split, queries, judgements):
    data = load_retrieval(real_root / "SciFact", split)
    assert len(data.corpus) == 5183
    assert len(data.queries) == queries
    assert sum(len(d) for d in data.qrels.values()) == judgements
    assert set(data.queries) == set(data.qrels)
    pairs = retrieval_positive_pairs(data)
    assert len(pairs) == judgements
    docs = {r["_id"]: r for r in _jsonl(real_root / "SciFact" / "corpus.jsonl")}
    queries_file = {r["_id"]: r["text"] for r in _jsonl(real_root / "SciFact" / "queries.jsonl")}
    qid, did = next((q, d) for q, ds in data.qrels.items() for d in ds)
    assert (queries_file[qid], f"{docs[did]['title']} {docs[did]['text']}") in pairs


def test_retrieval_qrels_with_unknown_doc_fail(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "007", "title": "", "text": "doc"}])
    write_jsonl(tmp_path / "queries.jsonl", [{"_id": "1", "text": "q1"}, {"_id": "2", "text": "q2"}])
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t007\t1\n")
    data = load_retrieval(tmp_path, "test")
    assert data.queries == {"1": "q1"} and data.qrels == {"1": {"007": 1}}  # ids stay strings
    assert retrieval_positive_pairs(data) == [("q1", "doc")]
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t8\t1\n")
    with pytest.raises(DataError, match=r"1 unknown doc id\(s\) \['8'\]"):
        load_retrieval(tmp_path, "test")
    with pytest.raises(DataError, match="Missing .*train.tsv"):
        load_retrieval(tmp_path, "train")


def test_sts_bad_rows(tmp_path):
    rows = [
        {"sentence1": "a", "sentence2": "b", "score": 4.5},
        {"sentence1": "c", "sentence2": " ", "score": 1},
    ]
    write_jsonl(tmp_path / "test.jsonl", rows + [{"sentence1": "d", "sentence2": "e", "score": None}])
    with pytest.raises(DataError, match=r"(?s)row 1: 'sentence2' is empty.*row 2: 'score'"):
        load_sts(tmp_path, "test")
    ds = load_sts(tmp_path, "test", DataConfig(drop_bad_rows=True))
    assert ds.to_list() == [rows[0]]


def test_sts_hub_offline_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    task = TaskConfig(name="STSBenchmark", type=TaskType.sts, hf_path="ucse-tests/never-cached-sts")
    with pytest.raises(DataError, match="UCSE_DATA_DIR"):
        load_sts(task, "test", DataConfig())


def test_label_positive_pairs():
    texts = [f"t{i}" for i in range(23)]
    labels = [i % 4 for i in range(22)] + [9]  # label 9 has a single row: no partner
    ds = datasets.Dataset.from_dict({"text": texts, "label": labels})
    label_of = dict(zip(texts, labels))
    pairs = label_positive_pairs(ds, seed=0)
    assert len(pairs) == 22
    assert Counter(a for a, _ in pairs) == Counter(texts[:22])  # one partner per row
    assert all(a != b and label_of[a] == label_of[b] for a, b in pairs)
    assert label_positive_pairs(ds, seed=0) == pairs
    assert label_positive_pairs(ds, seed=1) != pairs
    capped = label_positive_pairs(ds, seed=0, max_pairs=5)
    assert len(capped) == 5 and set(capped) <= set(pairs)
