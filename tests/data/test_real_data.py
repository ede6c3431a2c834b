"""Loaders on the real shared task copies, against the counts in their README / PROVENANCE.txt."""

import json
import math
from collections import Counter

import pytest

from ucse.config import build_config
from ucse.data import load_classification
from ucse.data.duplicates import text_key

pytestmark = pytest.mark.slow


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _load(name, root, *overrides):
    cfg = build_config([f"task={name}", f"data.root={root}", *overrides])
    return load_classification(cfg.task, cfg.data, cfg.seed)


def test_banking77(real_root):
    folder = real_root / "Banking77Classification"
    before = sorted(p.name for p in folder.iterdir())
    td = _load("Banking77Classification", real_root)
    assert td.num_classes == 77
    # the carved validation is 10 % of train's 9,972 distinct texts (31 pairs of copies up to case and
    # punctuation), each with its copies; the paper's recipe carves 10 % of the 10,003 rows
    keys = {s: [text_key(t) for t in td.texts(s)] for s in ("train", "validation")}
    assert not set(keys["train"]) & set(keys["validation"])
    assert len(set(keys["validation"])) == math.ceil(0.1 * 9972)
    assert len(td.splits["train"]) + len(td.splits["validation"]) == 10003 and len(td.splits["test"]) == 3080
    paper = _load("Banking77Classification", real_root, "recipe=paper")
    n_val = math.ceil(0.1 * 10003)
    assert [len(paper.splits[s]) for s in ("train", "validation")] == [10003 - n_val, n_val]
    assert td.dropped == {"train": 0, "validation": 0, "test": 0}
    # The file's ids are kept: label_names[id] is the row's label_text for every test row.
    rows = _jsonl(folder / "test.jsonl")
    assert list(td.splits["test"]["label"]) == [r["label"] for r in rows]
    assert [td.label_names[r["label"]] for r in rows] == [r["label_text"] for r in rows]
    assert td.label_names == sorted(td.label_names)
    assert sorted(p.name for p in folder.iterdir()) == before


def test_amazon_counterfactual_uses_its_validation_split(real_root):
    td = _load("AmazonCounterfactualClassification", real_root)
    assert td.num_classes == 2
    assert [len(td.splits[s]) for s in ("train", "validation", "test")] == [4018, 335, 670]
    # PROVENANCE: train 0:3253, 1:765 ; valid 0:277, 1:58 ; test 0:539, 1:131 ; 0 = not counterfactual.
    assert Counter(td.splits["train"]["label"]) == {0: 3253, 1: 765}
    assert Counter(td.splits["validation"]["label"]) == {0: 277, 1: 58}
    assert Counter(td.splits["test"]["label"]) == {0: 539, 1: 131}
    assert td.label_names == ["not-counterfactual", "counterfactual"]


def test_massive_intent(real_root):
    td = _load("MassiveIntentClassification", real_root)
    assert td.num_classes == 60
    assert [len(td.splits[s]) for s in ("train", "validation", "test")] == [11514, 2033, 2974]
    assert len(set(td.splits["test"]["label"])) == 59
    assert "cooking_query" not in {td.label_names[y] for y in td.splits["test"]["label"]}


def test_quick_run_subsample(real_root):
    td = _load(
        "Banking77Classification", real_root, "data.max_train_samples=770", "data.max_eval_samples=154"
    )
    assert [len(td.splits[s]) for s in ("train", "validation", "test")] == [770, 154, 154]
    counts = Counter(td.splits["train"]["label"])
    assert len(counts) == 77 and max(counts.values()) - min(counts.values()) <= 12
