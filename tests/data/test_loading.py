import json
import math
from collections import Counter

import datasets
import pytest
from toy_tasks import TOY_COUNTS, TOY_NAMES, make_task, toy_data, toy_rows, toy_task, write_jsonl

from ucse.config import DataConfig, TaskType
from ucse.data import DataError, load_classification


def _pairs(ds: datasets.Dataset, names: list[str]) -> list[tuple[str, str]]:
    return [(t, names[y]) for t, y in zip(ds["text"], ds["label"])]


def test_local_task_loads_standard_splits(tmp_path):
    train, test = toy_rows("tr"), toy_rows("te", 0.5)
    root = make_task(tmp_path, {"train": train, "test": test})
    before = sorted(p.name for p in (root / "ToyClassification").iterdir())
    td = load_classification(toy_task(), toy_data(root), seed=0)

    assert set(td.splits) == {"train", "validation", "test"}
    assert td.label_names == TOY_NAMES and td.num_classes == 4
    assert td.source == str(root / "ToyClassification")
    assert td.dropped == {"train": 0, "validation": 0, "test": 0}
    for ds in td.splits.values():
        assert ds.column_names == ["text", "label"]
        assert ds.features["label"] == datasets.ClassLabel(names=TOY_NAMES)
        assert ds.features["text"] == datasets.Value("string")
    # Every row keeps its own label name (reference: the file's label_text).
    assert sorted(_pairs(td.splits["test"], td.label_names)) == sorted(
        (r["text"], r["label_text"]) for r in test
    )
    # Nothing is written next to the data.
    assert sorted(p.name for p in (root / "ToyClassification").iterdir()) == before


def test_labels_reindexed_by_sorted_names_when_ids_are_not_contiguous(tmp_path):
    ids = {"delta": 40, "alpha": 7, "charlie": 12, "bravo": 3}
    train = [{**r, "label": ids[r["label_text"]]} for r in toy_rows("tr")]
    test = [{**r, "label": ids[r["label_text"]]} for r in toy_rows("te", 0.5)]
    root = make_task(tmp_path, {"train": train, "test": test})
    td = load_classification(toy_task(), toy_data(root), seed=0)
    assert td.label_names == ["alpha", "bravo", "charlie", "delta"]
    assert sorted(_pairs(td.splits["test"], td.label_names)) == sorted(
        (r["text"], r["label_text"]) for r in test
    )


def test_contiguous_data_ids_are_kept(tmp_path):
    # Like AmazonCounterfactual: 0 = not-counterfactual, 1 = counterfactual (not in sorted-name order).
    names = ["not-cf", "cf"]
    rows = [{"text": f"t{i}", "label": i % 2, "label_text": names[i % 2]} for i in range(40)]
    root = make_task(tmp_path, {"train": rows, "test": rows[:10]})
    td = load_classification(toy_task(), toy_data(root), seed=0)
    assert td.label_names == names
    assert td.splits["test"]["label"] == [r["label"] for r in rows[:10]]


def test_int_labels_without_names(tmp_path):
    rows = [{"text": f"t{i}", "label": [9, 5, 7][i % 3]} for i in range(60)]
    root = make_task(tmp_path, {"train": rows, "test": rows[:12]})
    td = load_classification(toy_task(), toy_data(root), seed=1)
    assert td.label_names == ["5", "7", "9"]
    assert list(td.splits["test"]["label"]) == [{5: 0, 7: 1, 9: 2}[r["label"]] for r in rows[:12]]


def test_split_without_label_text_maps_ids_through_train(tmp_path):
    ids = {"delta": 40, "alpha": 7, "charlie": 12, "bravo": 3}
    train = [{**r, "label": ids[r["label_text"]]} for r in toy_rows("tr")]
    test = [{"text": r["text"], "label": ids[r["label_text"]]} for r in toy_rows("te", 0.5)]
    root = make_task(tmp_path, {"train": train, "test": test})
    td = load_classification(toy_task(), toy_data(root), seed=0)
    expected = sorted((r["text"], r["label_text"]) for r in toy_rows("te", 0.5))
    assert sorted(_pairs(td.splits["test"], td.label_names)) == expected


def test_own_validation_split_is_used_as_is(tmp_path):
    train, val, test = toy_rows("tr"), toy_rows("va", 0.5), toy_rows("te", 0.5)
    root = make_task(tmp_path, {"train": train, "validation": val, "test": test})
    td = load_classification(toy_task(validation_split="validation"), toy_data(root), seed=0)
    assert td.splits["validation"]["text"] == [r["text"] for r in val]
    assert td.splits["train"]["text"] == [r["text"] for r in train]


def test_configured_validation_split_absent_is_carved(tmp_path):
    root = make_task(tmp_path, {"train": toy_rows("tr"), "test": toy_rows("te", 0.5)})
    td = load_classification(toy_task(validation_split="validation"), toy_data(root), seed=0)
    n = sum(TOY_COUNTS.values())
    assert len(td.splits["validation"]) == math.ceil(0.1 * n)
    assert len(td.splits["train"]) + len(td.splits["validation"]) == n


def test_column_renames(tmp_path):
    rows = [{"sentence": r["text"], "y": r["label"], "label_text": r["label_text"]} for r in toy_rows("tr")]
    root = make_task(tmp_path, {"train": rows, "test": rows[:20]})
    td = load_classification(toy_task(), toy_data(root, text_column="sentence", label_column="y"), seed=0)
    assert td.splits["test"]["text"] == [r["sentence"] for r in rows[:20]]
    with pytest.raises(DataError, match=r"no column 'body' \(data.text_column\)"):
        load_classification(toy_task(), toy_data(root, text_column="body"), seed=0)


def test_test_fraction_carves_test_from_single_split(tmp_path):
    rows = toy_rows("all")
    root = make_task(tmp_path, {"train": rows})
    task = toy_task(test_split="train", carved_test_fraction=0.2)
    td = load_classification(task, toy_data(root, val_fraction=0.25), seed=3)
    n = len(rows)
    test = set(td.splits["test"]["text"])
    rest = set(td.splits["train"]["text"]) | set(td.splits["validation"]["text"])
    assert len(test) == math.ceil(0.2 * n) and not test & rest and test | rest == {r["text"] for r in rows}
    assert len(td.splits["validation"]) == math.ceil(0.25 * (n - len(test)))
    counts = Counter(td.splits["test"]["label"])
    for name, count in TOY_COUNTS.items():
        assert abs(counts[TOY_NAMES.index(name)] - round(0.2 * count)) <= 1


def test_max_samples_are_stratified_subsamples(tmp_path):
    root = make_task(tmp_path, {"train": toy_rows("tr", 4), "test": toy_rows("te", 2)})
    data = toy_data(root, max_train_samples=100, max_eval_samples=30)
    td = load_classification(toy_task(), data, seed=0)
    assert len(td.splits["train"]) == 100
    assert len(td.splits["validation"]) == 30 and len(td.splits["test"]) == 30
    full_test = Counter(r["label"] for r in toy_rows("te", 2))
    got = Counter(td.splits["test"]["label"])
    for label, count in full_test.items():
        assert abs(got[label] - round(30 * count / full_test.total())) <= 1
    assert set(td.splits["test"]["text"]) <= {r["text"] for r in toy_rows("te", 2)}
    again = load_classification(toy_task(), data, seed=0)
    assert again.splits["train"]["text"] == td.splits["train"]["text"]


def test_missing_task_folder_lists_present_ones(tmp_path):
    make_task(tmp_path, {"train": toy_rows("tr"), "test": toy_rows("te")}, name="OtherTask")
    with pytest.raises(DataError, match="Task folders present: OtherTask"):
        load_classification(toy_task(), toy_data(tmp_path), seed=0)


def test_missing_test_file_names_found_files(tmp_path):
    root = make_task(tmp_path, {"train": toy_rows("tr")})
    with pytest.raises(DataError, match=r"no 'test' split .*\['train.jsonl'\]"):
        load_classification(toy_task(), toy_data(root), seed=0)


def test_data_root_from_env(tmp_path, monkeypatch):
    root = make_task(tmp_path, {"train": toy_rows("tr"), "test": toy_rows("te")})
    monkeypatch.setenv("UCSE_DATA_DIR", str(root))
    td = load_classification(toy_task(), DataConfig(), seed=0)
    assert td.source == str(root / "ToyClassification")


def test_hub_offline_gives_clear_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # The libraries read the variables at import time, so patch their flags too.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    task = toy_task(hf_path="ucse-tests/never-cached", hf_revision="0" * 40)
    with pytest.raises(DataError) as err:
        load_classification(task, DataConfig(), seed=0)
    msg = str(err.value)
    assert "ucse-tests/never-cached@" + "0" * 40 in msg
    assert "data.root" in msg and "UCSE_DATA_DIR" in msg and "README.md" in msg


def test_non_classification_task_is_refused(tmp_path):
    with pytest.raises(DataError, match="sts task"):
        load_classification(toy_task(type=TaskType.sts), toy_data(tmp_path), seed=0)


def test_jsonl_with_blank_trailing_line_and_unicode(tmp_path):
    rows = toy_rows("tr") + [{"text": "caf\u00e9 \u2603", "label": 0, "label_text": "alpha"}]
    path = write_jsonl(tmp_path / "ToyClassification" / "train.jsonl", rows)
    path.write_text(path.read_text() + "\n")
    write_jsonl(tmp_path / "ToyClassification" / "test.jsonl", rows[-3:])
    td = load_classification(toy_task(), toy_data(tmp_path), seed=0)
    assert "caf\u00e9 \u2603" in td.splits["test"]["text"]
    assert json.loads(path.read_text().splitlines()[-2])["text"] == "caf\u00e9 \u2603"


def test_a_task_folder_is_read_without_a_progress_bar_or_a_cache_left_behind(tmp_path, monkeypatch, capfd):
    # a researcher's trial: "Generating train split" bars on every run, and Arrow caches piling up in
    # <tmp>/ucse-datasets (355 entries), which no ucse command cleans
    import tempfile

    from ucse.data.loading import read_jsonl

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    path = write_jsonl(tmp_path / "train.jsonl", [{"text": f"row {i}", "label": i % 2} for i in range(50)])
    ds = read_jsonl(path)
    assert ds.num_rows == 50 and ds["label"][:3] == [0, 1, 0]
    assert list(temp.iterdir()) == []
    assert "Generating" not in capfd.readouterr().err


def test_an_unreachable_hub_fails_at_once_with_the_local_copy_hint(monkeypatch, tmp_path):
    # a researcher's trial without data.root: 23 s of huggingface_hub retries, each line printed twice
    import socket

    import ucse.data.loading as loading
    import ucse.hub as hub
    from ucse.config import TaskConfig

    def no_dns(host, port, *args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    def never(*args, **kwargs):
        raise AssertionError("the hub was asked")

    for name in hub.OFFLINE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(datasets, "load_dataset", never)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", "/nonexistent/ucse-test")
    task = TaskConfig(name="Odd", hf_path="mteb/odd")
    with pytest.raises(DataError) as err:
        loading.load_hub(task)
    assert "huggingface.co cannot be reached" in str(err.value) and "set data.root=<folder>" in str(err.value)
    # a dataset the library holds a copy of is its to read (it falls back to the copy), and so is offline mode
    (tmp_path / "mteb___odd").mkdir()
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path))
    with pytest.raises(DataError, match="the hub was asked"):
        loading.load_hub(task)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.hub_unreachable() is None
