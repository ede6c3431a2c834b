"""Training end to end on your own data, with string labels and no config file, from every input form."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
from toy_tasks import LEARNS, OWN_CUES, own_rows, write_rows

from ucse.config import build_config, from_yaml
from ucse.data import load_task_data
from ucse.evaluation.config import build_eval_config
from ucse.evaluation.evaluate import evaluate_run
from ucse.inference.classifier import UcseClassifier
from ucse.training import train

NAMES = sorted(OWN_CUES)
_spec = importlib.util.spec_from_file_location("train_script", Path(__file__).parents[2] / "train.py")
train_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train_script)  # the real `python train.py` entry point, run in-process


def _fast(tiny_bert_dir: Path, out: Path, learn: bool = False) -> list[str]:
    """A fast run; ``learn``: enough steps to learn the cue task on any CPU (see ``toy_tasks.LEARNS``)."""
    return [
        f"backbone.model={tiny_bert_dir}",
        "backbone.name=tiny-bert",
        "backbone.precision=fp32",
        "backbone.batch_size=32",
        *(LEARNS if learn else ("optim.lr=1e-2", "optim.epochs=4", "optim.batch_size=16", "recipe=paper")),
        "progress_bar=false",
        f"output_dir={out}",
    ]


def _head_meta(run: Path) -> dict:
    return json.loads((run / "head" / "config.json").read_text())["meta"]


def _write_split_folder(root: Path, rows: list[dict]) -> Path:
    write_rows(root / "train.csv", rows[:100])
    write_rows(root / "dev.jsonl", rows[100:120])
    write_rows(root / "test.parquet", rows[120:])
    return root


def _write_saved(root: Path, rows: list[dict]) -> Path:
    datasets.DatasetDict(
        train=datasets.Dataset.from_list(rows[:120]), test=datasets.Dataset.from_list(rows[120:])
    ).save_to_disk(root)
    return root


FILE_FORMS = {
    "csv": lambda d, rows: write_rows(d / "reviews.csv", rows),
    "tsv": lambda d, rows: write_rows(d / "reviews.tsv", rows),
    "jsonl": lambda d, rows: write_rows(d / "reviews.jsonl", rows),
    "json": lambda d, rows: write_rows(d / "reviews.json", rows),
    "parquet": lambda d, rows: write_rows(d / "reviews.parquet", rows),
    "split folder": lambda d, rows: _write_split_folder(d / "reviews", rows),
    "save_to_disk folder": lambda d, rows: _write_saved(d / "reviews", rows),
}


@pytest.mark.parametrize("form", FILE_FORMS, ids=list(FILE_FORMS))
def test_train_py_on_a_data_path(form, tiny_bert_dir, tmp_path, capsys):
    rows = own_rows(150)
    path = FILE_FORMS[form](tmp_path, rows)
    run = tmp_path / "run"
    assert train_script.main([f"data.path={path}", *_fast(tiny_bert_dir, run, learn=True)]) == 0
    assert f"run: {run}" in capsys.readouterr().out
    meta = _head_meta(run)
    assert meta["label_names"] == NAMES and meta["label_type"] == "str"
    # No Banking77 leftovers in a custom task: its name is the path's, with no instruction or hub copy.
    assert meta["task"] == "reviews" and meta["instruction"] == ""
    cfg = from_yaml(run / "config.yaml")
    assert cfg.data.path == str(path) and cfg.task.hf_path is None
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["data"]["num_classes"] == 3 and metrics["data"]["source"] == str(path)
    assert sum(metrics["data"]["sizes"].values()) == 150
    # Cue words make the task learnable on the tiny random BERT: well above chance (1/3; 30 test rows),
    # which also proves the test labels line up with train's.
    assert metrics["test"]["accuracy"] > 0.5


@pytest.mark.parametrize("form", ["DataFrame", "(texts, labels)", "(texts, integer ids)"])
def test_train_on_in_memory_data(form, tiny_bert_dir, tmp_path):
    rows = own_rows(150)
    ids = {name: i * 5 + 2 for i, name in enumerate(NAMES)}  # 2, 7, 12: sorted as text, 12 < 2 < 7
    labels = [ids[r["label"]] if "integer" in form else r["label"] for r in rows]
    source = pd.DataFrame(rows) if form == "DataFrame" else ([r["text"] for r in rows], labels)
    cfg = build_config(_fast(tiny_bert_dir, tmp_path / "run", learn=True), own_data=True)
    assert cfg.task.name == "data" and cfg.task.hf_path is None and cfg.task.instruction == ""
    result = train(cfg, data=load_task_data(source, cfg.task, cfg.data, cfg.seed))
    meta = _head_meta(result.run_dir)
    # Integer ids are named by their decimal forms in numeric order and saved as integers (label_type).
    assert (meta["label_names"], meta["label_type"]) == (
        (["2", "7", "12"], "int") if "integer" in form else (NAMES, "str")
    )
    assert result.metrics["test"]["accuracy"] > 0.5
    # Prediction rows carry the labels as predict() gives them (ints stay ints); probs are keyed by name.
    clf = UcseClassifier.from_pretrained(result.run_dir, device="cpu")
    texts = [r["text"] for r in rows[:20]]
    out = clf.predict_with_uncertainty(texts)
    assert [r["label"] for r in out] == clf.predict(texts).tolist()
    kind = int if "integer" in form else str
    assert all(type(r["label"]) is kind and all(type(v) is kind for v in r.get("set", [])) for r in out)
    assert all(set(r["probs"]) == {str(c) for c in clf.classes_} for r in out)


def test_eval_py_finds_the_data_path_again(tiny_bert_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_rows(tmp_path / "mine.csv", own_rows(90))
    # fp32 head, as evaluate_run runs it (auto is bf16-mixed on AVX512-BF16 CPUs only): the same arithmetic.
    args = ["data.path=mine.csv", *_fast(tiny_bert_dir, tmp_path / "run"), "head_precision=fp32"]
    result = train(build_config(args))
    monkeypatch.chdir(Path(__file__).parent)  # eval from elsewhere: config.yaml holds the absolute path
    report = evaluate_run(build_eval_config([f"run={result.run_dir}", "plots=false"]))
    assert report["task"] == "mine"
    # The same fp32 head and states at another batch size (16 in training, eval's own here): only a text
    # whose two top logits tie to the rounding of the sums (~1e-7) could flip; allow one.
    n = report["n"]
    assert report["metrics"]["accuracy"] == pytest.approx(
        result.metrics["test"]["accuracy"], abs=1 / n + 1e-9
    )


def test_bad_data_fails_before_the_run_folder_is_made(tiny_bert_dir, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a", "label": "x"}\n{"text": "b", label: "y"}\n')
    run = tmp_path / "run"
    assert train_script.main([f"data.path={bad}", *_fast(tiny_bert_dir, run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad} line 2: JSON syntax error") and err.count("\n") == 1
    assert not run.exists()


def test_excluded_labels_leave_the_head(tiny_bert_dir, tmp_path):
    path = write_rows(tmp_path / "d.csv", own_rows(150))
    cfg = build_config(
        [f"data.path={path}", "data.exclude_labels=[pets]", *_fast(tiny_bert_dir, tmp_path / "r")]
    )
    result = train(cfg)
    assert _head_meta(result.run_dir)["label_names"] == ["money", "music"]
    assert result.metrics["data"]["num_classes"] == 2


def test_the_default_head_trains_with_a_label_of_two_rows(tiny_bert_dir, tmp_path, caplog):
    # A user's rare label (2 rows) among well-filled ones, the default recipe and head=auto: before, the
    # carve could leave it one training row and the cross-validated probe refused to choose C.
    rows = own_rows(60) + [
        {"text": "moving to Lisbon office", "label": "relocation"},
        {"text": "relocation allowance Berlin", "label": "relocation"},
    ]
    path = write_rows(tmp_path / "hr.csv", rows)
    run = tmp_path / "run"
    fast = [a for a in _fast(tiny_bert_dir, run) if not a.startswith(("optim.", "recipe="))]
    assert train_script.main([f"data.path={path}", "recipe=auto", "head=auto", *fast]) == 0
    meta = _head_meta(run)
    assert "relocation" in meta["label_names"]
    sel = json.loads((run / "metrics.json").read_text())["selection"]
    # 5 folds all the same: the 2-row label's rows sit in two of them, so every fold trains on it
    assert sel["mode"] == "cross-validation" and sel["folds"] == 5
    assert any("kept whole for training" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_default_trains_on_three_rows_per_label(tiny_bert_dir, tmp_path, seed, capsys):
    # A handful of examples (3 per label): the 20 % test slice is smaller than the label set. A random slice
    # could leave a label one row, and the cross-validated probe then failed with scikit-learn's fold error.
    rows = own_rows(3 * len(NAMES), seed=seed)
    path = write_rows(tmp_path / "few.csv", rows)
    run = tmp_path / "run"
    fast = [a for a in _fast(tiny_bert_dir, run) if not a.startswith(("optim.", "recipe="))]
    assert train_script.main([f"data.path={path}", f"seed={seed}", *fast]) == 0
    out = capsys.readouterr().out
    assert "test accuracy" in out and sorted(_head_meta(run)["label_names"]) == NAMES
    # too few held-out texts for the 95 % keep rule: the summary says the flag flags nothing, and the fix
    assert "flags no text" in out and "uncertainty.ood.tpr=" in out


def test_two_rows_per_label_train_without_a_test_slice_and_eval_says_so(tiny_bert_dir, tmp_path, capsys):
    # Every label has 2 rows: a test row would leave its label one (training then stopped, naming it); no
    # test slice is carved, and `ucse eval` names the missing split instead of failing deep in the head.
    from ucse.cli.main import main as ucse_main

    path = write_rows(tmp_path / "two.csv", own_rows(2 * len(NAMES)))
    run = tmp_path / "run"
    fast = [a for a in _fast(tiny_bert_dir, run) if not a.startswith(("optim.", "recipe="))]
    assert train_script.main([f"data.path={path}", *fast]) == 0
    assert "no test split" in capsys.readouterr().out
    sizes = json.loads((run / "metrics.json").read_text())["data"]["sizes"]
    assert sizes["test"] == 0 and sizes["train"] + sizes["validation"] == 2 * len(NAMES)
    assert ucse_main(["eval", f"run={run}", "plots=true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no test rows" in err and "split=validation" in err
    # a split too small for t-SNE is still evaluated, its other plots written
    assert ucse_main(["eval", f"run={run}", "split=validation", "plots=true"]) == 0
    assert (run / "arc.png").is_file() and not (run / "tsne.png").exists()


def test_a_label_too_rare_for_the_default_head_fails_before_the_run_folder(tiny_bert_dir, tmp_path, capsys):
    # Given splits carve nothing, so a train label can have a single row; head=auto's cross-validation over
    # train + validation (a small validation file) needs 2 of every label: one line naming it, no folder.
    rows = own_rows(60)
    (tmp_path / "given").mkdir()
    write_rows(
        tmp_path / "given" / "train.csv", rows[:40] + [{"text": "moving to Lisbon", "label": "relocation"}]
    )
    write_rows(tmp_path / "given" / "validation.csv", rows[40:50])
    write_rows(tmp_path / "given" / "test.csv", rows[50:])
    run = tmp_path / "run"
    args = [
        f"data.path={tmp_path / 'given'}",
        "recipe=auto",
        *_fast(tiny_bert_dir, run)[:5],
        f"output_dir={run}",
    ]
    assert train_script.main([*args, "head=auto"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'relocation' (1)" in err and "head=textcnn" in err
    assert not run.exists()


@pytest.mark.parametrize(
    ("head", "train", "validation", "short"),
    [
        ("auto", [0, 0, 1, 1, 2], [], ["c (1)"]),  # cross-validated: 2 rows of each over train + validation
        ("auto", [0, 0, 1, 1, 2], [2], []),
        ("blend", [0, 0, 1, 1], [2, 2], []),  # a label only in validation still reaches the folds
        ("logreg", [0, 0, 1, 1, 2], [], []),  # fitted on train: one row is enough (C over folds without it)
        ("logreg", [0, 0, 1, 1], [2, 2], ["c (0)"]),
    ],
)
def test_label_row_counts_each_head_needs(head, train, validation, short):
    from ucse.config import HeadType
    from ucse.training.preflight import check_label_rows

    labels = {"train": np.array(train), "validation": np.array(validation, dtype=int)}
    if not short:
        check_label_rows(HeadType(head), labels, ["a", "b", "c"])
        return
    with pytest.raises(
        ValueError, match=rf"head={head}: 1 of 3 labels have too few .*'{short[0][0]}' \({short[0][3]}\)"
    ):
        check_label_rows(HeadType(head), labels, ["a", "b", "c"])
