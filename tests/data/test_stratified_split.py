"""The carved validation split against an independent per-class expectation."""

from collections import Counter

import datasets
import pytest
from toy_tasks import TOY_COUNTS, TOY_NAMES, make_task, toy_data, toy_rows, toy_task

from ucse.data import load_classification
from ucse.data.splitting import stratified_split


@pytest.fixture
def toy_root(tmp_path):
    return make_task(tmp_path, {"train": toy_rows("tr", 3), "test": toy_rows("te")})


def _rows(ds):
    return list(zip(ds["text"], ds["label"]))


@pytest.mark.parametrize("frac", [0.1, 0.25])
def test_validation_is_stratified_disjoint_and_complete(toy_root, frac):
    td = load_classification(toy_task(), toy_data(toy_root, val_fraction=frac), seed=0)
    train, val = _rows(td.splits["train"]), _rows(td.splits["validation"])
    original = [(r["text"], TOY_NAMES.index(r["label_text"])) for r in toy_rows("tr", 3)]
    assert not set(train) & set(val)
    assert sorted(train + val) == sorted(original)
    per_class = Counter(label for _, label in original)
    val_counts = Counter(label for _, label in val)
    for label, count in per_class.items():
        assert abs(val_counts[label] - round(frac * count)) <= 1, (label, count, val_counts[label])
    assert set(val_counts) == set(range(len(TOY_COUNTS)))


def test_validation_is_deterministic_per_seed(toy_root):
    runs = [load_classification(toy_task(), toy_data(toy_root), seed=s) for s in (7, 7, 8)]
    vals = [r.splits["validation"]["text"] for r in runs]
    assert list(vals[0]) == list(vals[1])
    assert set(vals[0]) != set(vals[2])


def test_single_member_class_falls_back_to_random_split(tmp_path, caplog):
    rows = toy_rows("tr") + [{"text": "lonely", "label": 4, "label_text": "echo"}]
    root = make_task(tmp_path, {"train": rows, "test": toy_rows("te")})
    td = load_classification(toy_task(), toy_data(root), seed=0)
    assert len(td.splits["train"]) + len(td.splits["validation"]) == len(rows)
    assert td.label_names == [*TOY_NAMES, "echo"]
    assert "Cannot stratify" in caplog.text


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("test_size", [0.1, 0.33, 7, 40])
def test_the_split_takes_the_rows_train_test_split_takes(seed, test_size):
    # The reference is datasets' own stratified train_test_split (which reads the labels row by row).
    import datasets
    import numpy as np

    from ucse.data import stratified_split

    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=120, p=[0.4, 0.3, 0.15, 0.1, 0.05]).tolist()
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(5)})
    texts = [f"t{i}" for i in range(120)]
    ds = datasets.Dataset.from_dict({"text": texts, "label": labels}, features=features)
    ours = stratified_split(ds, test_size, seed)
    ref = ds.train_test_split(test_size=test_size, stratify_by_column="label", seed=seed)
    for part in ("train", "test"):
        assert ours[part]["text"][:] == ref[part]["text"][:]


@pytest.mark.parametrize("seed", range(6))
def test_a_slice_smaller_than_the_label_set_takes_one_row_of_distinct_labels(tmp_path, seed, caplog):
    # 4 labels x 3 rows, one file: the 3-row test slice cannot hold every label. A random slice could take
    # two rows of one label, leaving it one row that no fold split can stratify (training then failed).
    import csv

    path = tmp_path / "few.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label"])
        w.writerows(
            [f"{name} text {i}", name] for name in ("pin", "theft", "currency", "delivery") for i in range(3)
        )
    from ucse.config import DataConfig
    from ucse.data import load_task_data

    td = load_task_data(str(path), toy_task(), DataConfig(path=str(path)), seed=seed)
    test = Counter(td.splits["test"]["label"][:])
    rest = Counter(td.splits["train"]["label"][:]) + Counter(td.splits["validation"]["label"][:])
    assert len(td.splits["test"]) == 3 and max(test.values()) == 1  # three distinct labels
    assert min(rest.values()) >= 2 and len(rest) == 4  # every label keeps two rows to learn from
    assert "holds one text of 3 of them" in caplog.text
    # the warning says which slice it is (it said "A 3-row slice", validation or test unknown)
    assert (
        "The 3-text test slice (data.test_fraction=0.2) cannot hold a text of each of 4 labels" in caplog.text
    )


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("size", [1, 4, 9])
def test_a_small_slice_of_many_small_labels_keeps_two_rows_of_each(seed, size):
    # 10 labels of 3, 4 or 5 rows (brute-force check over slice sizes below the label count).
    import datasets

    from ucse.data import stratified_split

    counts = [3, 4, 5, 3, 3, 4, 5, 3, 3, 3]
    labels = [c for c, n in enumerate(counts) for _ in range(n)]
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(10)})
    ds = datasets.Dataset.from_dict(
        {"text": [f"t{i}" for i in range(len(labels))], "label": labels}, features
    )
    parts = stratified_split(ds, size, seed)
    test, rest = Counter(parts["test"]["label"][:]), Counter(parts["train"]["label"][:])
    assert len(parts["test"]) == size and max(test.values()) == 1
    assert all(rest[c] >= 2 for c in range(10)) and sum(rest.values()) + size == len(labels)
    assert not set(parts["test"]["text"][:]) & set(parts["train"]["text"][:])


@pytest.mark.parametrize("seed", range(10))
def test_a_random_fallback_split_never_takes_a_labels_last_row(seed):
    # 4 labels x 2 rows and a 3-row slice: no stratification, and a plain random slice could take both rows
    # of one label (seed 3 of a 0.3 / 0.3 carve of 4 x 3 rows left label 'a' with no training row)
    ds = datasets.Dataset.from_dict({"text": [f"t{i}" for i in range(8)], "label": [0, 0, 1, 1, 2, 2, 3, 3]})
    parts = stratified_split(ds, 3, seed)
    assert len(parts["test"]) == 3 and len(parts["train"]) == 5
    assert sorted(set(parts["train"]["label"][:])) == [0, 1, 2, 3]
    assert sorted(parts["train"]["text"][:] + parts["test"]["text"][:]) == sorted(ds["text"][:])
