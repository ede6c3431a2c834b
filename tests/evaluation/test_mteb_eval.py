import json
import logging
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from ucse.evaluation.encoder_protocol import TextEncoder
from ucse.evaluation.mteb_eval import MtebEncoder, evaluate_classification, load_local_task

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CLASS_WORDS = ("refund", "transfer", "card")
FILLER = ("please", "help", "today", "my", "account", "now", "thanks", "urgent", "again", "still")


def _write_task(root: Path, task: str, n_train: int = 60, n_test: int = 30, seed: int = 0) -> None:
    """3-label data: the class word appears with prob 0.7, otherwise a random class word."""
    rng = np.random.default_rng(seed)
    folder = root / task
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("test", n_test)):
        with (folder / f"{split}.jsonl").open("w") as fh:
            for i in range(n):
                y = i % 3
                word = CLASS_WORDS[y] if rng.uniform() < 0.7 else CLASS_WORDS[rng.integers(3)]
                words = [word, *rng.choice(FILLER, size=3)]
                rng.shuffle(words)
                row = {"text": " ".join(words), "label": y, "label_text": CLASS_WORDS[y]}
                fh.write(json.dumps(row) + "\n")


class HashedBow:
    """Deterministic hashed bag of words (crc32, not Python's salted hash)."""

    def __init__(self, dim: int = 32) -> None:
        self.dim = dim
        self.calls: list[int] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for w in t.split():
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return out


class Oracle:
    """Perfectly separable: one-hot of the label encoded in the text."""

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([[t.startswith(f"label{k} ") for k in range(3)] for t in texts], dtype=float)


class Constant:
    def encode(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4))


def _read(path: Path) -> tuple[list[str], np.ndarray]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["text"] for r in rows], np.array([r["label"] for r in rows])


def _reference_accuracy(encoder: HashedBow, folder: Path, samples_per_label: int, seed: int = 42) -> float:
    """mteb's few-shot probe re-implemented: 10 undersamplings + LogisticRegression, mean accuracy."""
    train_x, train_y = _read(folder / "train.jsonl")
    test_x, test_y = _read(folder / "test.jsonl")
    train_e = encoder.encode(train_x).astype(np.float32)
    test_e = encoder.encode(test_x).astype(np.float32)
    idxs = list(range(len(train_y)))
    accs = []
    for _ in range(10):
        np.random.RandomState(seed).shuffle(idxs)  # mteb reshuffles the same list each experiment
        counts: dict[int, int] = {}
        chosen = []
        for i in idxs:
            if counts.get(train_y[i], 0) < samples_per_label:
                chosen.append(i)
                counts[train_y[i]] = counts.get(train_y[i], 0) + 1
        clf = LogisticRegression(max_iter=100, random_state=seed).fit(train_e[chosen], train_y[chosen])
        accs.append(float((clf.predict(test_e) == test_y).mean()))
    return float(np.mean(accs))


def test_load_local_task_monolingual(tmp_path: Path) -> None:
    _write_task(tmp_path, "Banking77Classification")
    task = load_local_task("Banking77Classification", tmp_path)
    assert task.metadata.name == "Banking77Classification"
    assert task.data_loaded
    assert list(task.eval_splits) == ["test"]
    assert task.dataset["train"].num_rows == 60
    assert task.dataset["test"].num_rows == 30
    assert set(task.dataset["test"].column_names) == {"text", "label"}


def test_load_local_task_multilingual_restricted_to_en(tmp_path: Path) -> None:
    _write_task(tmp_path, "AmazonCounterfactualClassification")
    task = load_local_task("AmazonCounterfactualClassification", tmp_path)
    assert task.hf_subsets == ["en"]
    assert list(task.dataset) == ["en"]
    assert task.dataset["en"]["train"].num_rows == 60
    with pytest.raises(FileNotFoundError):
        load_local_task("AmazonCounterfactualClassification", tmp_path, eval_splits=("validation", "test"))
    with pytest.raises(FileNotFoundError):
        load_local_task("MassiveIntentClassification", tmp_path)


def test_local_task_reads_the_runs_columns_and_names_bad_rows(tmp_path: Path) -> None:
    _write_task(tmp_path, "Banking77Classification")
    folder = tmp_path / "Banking77Classification"
    # the run's data.text_column / data.label_column (a KeyError traceback before), names mapped to ids
    for split in ("train", "test"):
        rows = [json.loads(line) for line in (folder / f"{split}.jsonl").read_text().splitlines()]
        renamed = [{"sentence": r["text"], "intent": r["label_text"]} for r in rows]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in renamed))
    task = load_local_task("Banking77Classification", tmp_path, text_column="sentence", label_column="intent")
    train_text, train_y = task.dataset["train"]["text"], task.dataset["train"]["label"]
    ids = {
        w: i
        for i, w in enumerate(
            dict.fromkeys(r["intent"] for r in map(json.loads, (folder / "train.jsonl").open()))
        )
    }
    assert list(train_y) == [ids[json.loads(line)["intent"]] for line in (folder / "train.jsonl").open()]
    assert list(train_text)[0] == json.loads((folder / "train.jsonl").open().readline())["sentence"]
    good = (folder / "test.jsonl").read_text()
    # each read before as a wrong id or a TypeError: a boolean and 1.7 became 1, a null label failed int()
    for bad, message in (
        ('{"sentence": "a b", "intent": true}', "'intent' must be an integer id or a name, got True"),
        ('{"sentence": "a b", "intent": 1.7}', "got 1.7"),
        ('{"sentence": "a b", "intent": null}', "got None"),
        ('{"sentence": ["a"], "intent": "x"}', "'sentence' is not a string"),
        ('{"text": "a b", "intent": "x"}', "expected an object with 'sentence' and 'intent'"),
        ("[1]", "expected an object"),
        ("{oops", "not valid JSON"),
    ):
        (folder / "test.jsonl").write_text(good + "\n" + bad + "\n")
        with pytest.raises(ValueError, match=f"test.jsonl line 32: .*{message}"):
            load_local_task(
                "Banking77Classification", tmp_path, text_column="sentence", label_column="intent"
            )


def test_local_task_reads_string_labels_as_names_and_refuses_a_mix_of_kinds(tmp_path: Path) -> None:
    # "01" and "1" were read as one id (two labels merged), and a string "1" among names took the id of
    # whichever name came second; ucse train reads a JSON file's strings as names.
    folder = tmp_path / "Banking77Classification"
    folder.mkdir()
    train = [{"text": f"t{i}", "label": lab} for i, lab in enumerate(["billing", "1", "01", "billing", "1"])]
    test = [{"text": f"s{i}", "label": lab} for i, lab in enumerate(["01", "billing", "1"])]
    for split, rows in (("train", train), ("test", test)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = load_local_task("Banking77Classification", tmp_path)
    # three names, numbered by first appearance over train then test
    assert list(task.dataset["train"]["label"]) == [0, 1, 2, 0, 1]
    assert list(task.dataset["test"]["label"]) == [2, 0, 1]
    # an integer id in a task of names (here in another split) names both lines
    (folder / "test.jsonl").write_text('{"text": "s", "label": "billing"}\n{"text": "u", "label": 1}\n')
    with pytest.raises(
        ValueError, match=r"test.jsonl line 2: 'label' is the integer id 1, but .*train.jsonl line 1"
    ):
        load_local_task("Banking77Classification", tmp_path)


def test_official_eval_splits_when_none_are_named(tmp_path: Path) -> None:
    # FinancialPhrasebankClassification is evaluated on its train split alone: no test.jsonl is needed
    _write_task(tmp_path, "FinancialPhrasebankClassification")
    (tmp_path / "FinancialPhrasebankClassification" / "test.jsonl").unlink()
    task = load_local_task("FinancialPhrasebankClassification", tmp_path, eval_splits=None)
    assert list(task.eval_splits) == ["train"] and task.dataset["train"].num_rows == 60
    with pytest.raises(FileNotFoundError, match="test.jsonl"):
        load_local_task("FinancialPhrasebankClassification", tmp_path)
    # a task whose official splits are validation and test is scored on test, as the paper reports it
    _write_task(tmp_path, "AmazonCounterfactualClassification")
    task = load_local_task("AmazonCounterfactualClassification", tmp_path, eval_splits=None)
    assert list(task.eval_splits) == ["test"]


def test_score_matches_independent_probe(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write_task(tmp_path, "Banking77Classification")
    task = load_local_task("Banking77Classification", tmp_path)
    encoder = HashedBow()
    with warnings.catch_warnings(record=True) as seen, caplog.at_level("INFO"):
        warnings.simplefilter("always")
        res = evaluate_classification(encoder, task, batch_size=16)
    # the paper's task version, on purpose: mteb's "superseded by ... .v2" advice is not repeated
    assert not [w for w in seen if "superseded" in str(w.message)]
    # nor mteb's INFO lines (six per evaluation) nor its logged copy of that advice; its level is restored
    assert not [r for r in caplog.records if r.name.startswith("mteb") and r.levelno < logging.WARNING]
    assert not [r for r in caplog.records if "superseded" in r.getMessage()]
    assert logging.getLogger("mteb").level == logging.NOTSET
    assert res["task_name"] == "Banking77Classification"
    assert 0.0 <= res["main_score"] <= 1.0
    assert res["main_score"] == pytest.approx(res["scores"]["test"][0]["accuracy"])
    assert max(encoder.calls) <= 16  # mteb's batches reach the encoder unchanged
    expected = _reference_accuracy(HashedBow(), tmp_path / "Banking77Classification", task.samples_per_label)
    assert res["main_score"] == pytest.approx(expected, abs=1e-9)
    assert 0.4 < res["main_score"] < 1.0  # informative but noisy data: neither chance nor perfect


def test_separable_and_constant_encoders(tmp_path: Path) -> None:
    folder = tmp_path / "Banking77Classification"
    folder.mkdir(parents=True)
    for split, n in (("train", 60), ("test", 30)):
        rows = [{"text": f"label{i % 3} row {i}", "label": i % 3} for i in range(n)]
        (folder / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    perfect = evaluate_classification(Oracle(), load_local_task("Banking77Classification", tmp_path))
    assert perfect["main_score"] == pytest.approx(1.0)
    const = evaluate_classification(Constant(), load_local_task("Banking77Classification", tmp_path))
    assert const["main_score"] == pytest.approx(1 / 3, abs=0.05)  # balanced labels: chance level


def test_wrapper_protocol_and_similarity_delegation() -> None:
    class WithSimilarity(HashedBow):
        def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return -np.abs(np.asarray(a)[:, None, 0] - np.asarray(b)[None, :, 0])

    assert isinstance(HashedBow(), TextEncoder)
    assert not isinstance(object(), TextEncoder)
    with pytest.raises(TypeError):
        MtebEncoder(object())  # type: ignore[arg-type]
    wrapped = MtebEncoder(WithSimilarity(), name="ucse/test", revision="abc")
    assert wrapped.mteb_model_meta.name == "ucse/test"
    a = np.array([[1.0, 0.0], [3.0, 0.0]])
    np.testing.assert_allclose(wrapped.similarity(a, a), [[0.0, -2.0], [-2.0, 0.0]])
    cos = MtebEncoder(HashedBow()).similarity(a, a)  # no similarity(): mteb's cosine
    np.testing.assert_allclose(np.asarray(cos), np.ones((2, 2)), atol=1e-6)


def test_a_hub_head_of_another_commit_of_its_repo_loads_with_a_warning():
    # the fingerprint names the commit since 2026-11-28 ("@main" before): a head saved on "@main", or on
    # another commit, is not refused for it (a README commit changes the name, not the weights)
    from ucse.core.encoder import _same_hub_repo

    assert _same_hub_repo("hub:org/model@main", "hub:org/model@" + "a" * 40)
    assert _same_hub_repo("hub:org/m@" + "a" * 40 + "#q4.gguf", "hub:org/m@" + "b" * 40 + "#q4.gguf")
    assert not _same_hub_repo("hub:org/m@main#q4.gguf", "hub:org/m@main#q8.gguf")
    assert not _same_hub_repo("hub:org/model@main", "hub:org/other@main")
    assert not _same_hub_repo("sha256:abc", "sha256:def")
