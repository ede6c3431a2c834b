"""``ucse eval run=... input=<labelled file>``: a run scored on new labelled data, checked independently."""

from __future__ import annotations

import csv
import json
import math
import random
import shutil

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, recall_score
from toy_tasks import CUES, generated_words

from ucse.config import ConfigError
from ucse.data import DataError
from ucse.evaluation.config import build_eval_config
from ucse.evaluation.evaluate_file import evaluate_file, input_report_path
from ucse.pipeline import run_training


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_task_root, tiny_bert_dir):
    from ucse.config import build_config

    out = tmp_path_factory.mktemp("eval-file")
    cfg = build_config(
        [
            f"data.root={tiny_task_root}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "head_precision=fp32",
            "optim.lr=5e-3",
            "optim.epochs=3",
            "optim.batch_size=16",
            "progress_bar=false",
            "recipe=paper",
            "uncertainty.ood.tpr=0.5",  # a threshold the tiny task's few held-out texts can set
            f"output_dir={out / 'run'}",
        ]
    )
    return run_training(cfg)[0].run_dir  # with its uncertainty profile (train() alone fits none)


def _write(path, rows, columns=("message", "team")):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(rows)
    return path


def _new_rows(n=40, seed=1, labels=(0, 1, 2)):
    """Texts the run never saw, written like the tiny task's: a class's cue word among random words."""
    rng = random.Random(seed)
    noise = generated_words(150)[120:]  # other filler words than the training texts'
    rows = []
    for i in range(n):
        label = labels[i % len(labels)]
        words = [rng.choice(noise) for _ in range(rng.randint(3, 9))]
        words.insert(rng.randint(0, len(words)), CUES[label])
        rows.append((" ".join(words), f"class_{label}"))
    return rows


def test_the_report_is_what_the_estimator_answers_on_the_file(run, tmp_path):
    from ucse import UcseClassifier

    rows = _new_rows(labels=(2, 0))  # a subset of the labels, in another order
    path = _write(tmp_path / "new month.csv", rows)
    cfg = build_eval_config([f"run={run}", f"input={path}", "text_column=message", "label_column=team"])
    report = evaluate_file(cfg)
    written = input_report_path(run, str(path))
    assert written.name == "eval-input-new_month.csv.json" and report["written"] == str(written)
    saved = json.loads(written.read_text())
    assert saved["n"] == len(rows) and saved["dropped"] == 0 and saved["input"] == str(path.resolve())
    # independently: the estimator's own predictions on the file's texts, scored by scikit-learn
    clf = UcseClassifier.from_pretrained(run)
    texts, truth = [t for t, _ in rows], [y for _, y in rows]
    pred = clf.predict(texts)
    assert saved["decisions"]["accuracy"] == pytest.approx(accuracy_score(truth, pred))
    names = saved["confusion"]["labels"]
    assert names == ["class_0", "class_1", "class_2"]
    assert saved["confusion"]["counts"] == confusion_matrix(truth, pred, labels=names).tolist()
    present = [r for r in saved["per_label"] if r["support"]]
    assert [r["label"] for r in present] == ["class_0", "class_2"]
    want = recall_score(truth, pred, labels=["class_0", "class_2"], average=None)
    np.testing.assert_allclose([r["recall"] for r in present], want)
    # the flag's share is that of the rows predict gives
    rows_out = clf.predict_with_uncertainty(texts)
    flagged = np.mean([bool(r.get("ood")) for r in rows_out])
    assert saved["out_of_scope"]["set"] and 0 < flagged < 1  # a flag that flags some texts, not all
    assert saved["out_of_scope"]["flagged"] == pytest.approx(flagged)
    for r in present:  # and per label, beside the training rows per label the profile recorded
        mine = [o for o, y in zip(rows_out, truth, strict=True) if y == r["label"]]
        assert r["flagged"] == pytest.approx(np.mean([bool(o.get("ood")) for o in mine]))
    trained = json.loads((run / "head" / "calibration.json").read_text())["info"]["class_prior"]["counts"]
    assert [r["training_rows"] for r in saved["per_label"]] == trained and sum(trained) > 0


def test_a_report_of_another_file_of_the_same_name_is_never_replaced(run, tmp_path):
    first = _write(tmp_path / "names.csv", _new_rows(9), ("text", "label"))
    (tmp_path / "sub").mkdir()
    second = _write(tmp_path / "sub" / "names.csv", _new_rows(6, seed=2), ("text", "label"))
    evaluate_file(build_eval_config([f"run={run}", f"input={first}"]))
    evaluate_file(build_eval_config([f"run={run}", f"input={first}"]))  # the same file again: replaced
    with pytest.raises(ValueError, match=r"holds the report of another file \(.*names\.csv\); evaluating"):
        evaluate_file(build_eval_config([f"run={run}", f"input={second}"]))
    assert json.loads(input_report_path(run, str(first)).read_text())["n"] == 9
    # a name too long for the file system: cut, with a hash of the whole name
    long = _write(tmp_path / ("x" * 240 + ".csv"), _new_rows(6), ("text", "label"))
    path = input_report_path(run, str(long))
    assert len(path.name) < 150 and path.name != input_report_path(run, "x" * 239 + ".csv").name
    assert evaluate_file(build_eval_config([f"run={run}", f"input={long}"]))["written"] == str(path)


def test_out_writes_the_report_where_asked_and_a_read_only_run_is_found_out_first(run, tmp_path, monkeypatch):
    # The report could only go into the run folder: a read-only one lost the whole evaluation at its end, and
    # monthly samples in dated folders (m3/labelled.csv, m4/labelled.csv) shared one report name.
    import ucse.evaluation.evaluate_file as module

    (tmp_path / "m3").mkdir()
    sample = _write(tmp_path / "m3" / "labelled.csv", _new_rows(9), ("text", "label"))
    before = sorted(p.name for p in run.iterdir())
    out = tmp_path / "m3" / "report.json"
    got = evaluate_file(build_eval_config([f"run={run}", f"input={sample}", f"out={out}"]))
    assert got["written"] == str(out) and json.loads(out.read_text())["n"] == 9
    assert sorted(p.name for p in run.iterdir()) == before  # nothing written into the run
    for extra, message in (
        ([f"out={out}"], "already exists; nothing was written. overwrite=true replaces it"),
        ([f"out={tmp_path / 'r.txt'}"], "input='s report is JSON"),
        ([f"out={tmp_path / 'nope' / 'r.json'}"], "does not exist; create it first"),
    ):
        with pytest.raises(ValueError, match=message):
            evaluate_file(build_eval_config([f"run={run}", f"input={sample}", *extra]))
    evaluate_file(build_eval_config([f"run={run}", f"input={sample}", f"out={out}", "overwrite=true"]))
    calls = []

    def read_only(path, mode):
        calls.append(path)
        return False

    monkeypatch.setattr(module.os, "access", read_only)  # as a read-only mount answers (root ignores chmod)
    with pytest.raises(ValueError, match="cannot be written .*pass out=<report.json>"):
        evaluate_file(build_eval_config([f"run={run}", f"input={sample}"]))
    assert calls == [run]


def test_labels_of_another_kind_or_column_fail_in_one_line(run, tmp_path):
    ids = _write(tmp_path / "ids.csv", [(t, y[-1]) for t, y in _new_rows(9)], ("text", "label"))
    with pytest.raises(DataError) as err:
        evaluate_file(build_eval_config([f"run={run}", f"input={ids}"]))
    text = str(err.value)
    assert "none of the 9 values of its column 'label' (e.g. ['0', '1', '2']) is a label of the run" in text
    assert "labels are names (['class_0', 'class_1', 'class_2'])" in text and len(text.splitlines()) == 1


def test_bad_rows_name_the_line_in_evals_own_keys_or_are_dropped(run, tmp_path):
    rows = _new_rows(12)
    rows.insert(5, ("a question about gift cards", "gift cards"))  # a label the run never saw
    path = _write(tmp_path / "odd.csv", rows, ("text", "label"))
    with pytest.raises(
        DataError, match=r"odd\.csv line 7: 'label' is not in the train split's label set"
    ) as err:
        evaluate_file(build_eval_config([f"run={run}", f"input={path}"]))
    assert "drop_bad_rows=true" in str(err.value) and "data." not in str(err.value)
    report = evaluate_file(build_eval_config([f"run={run}", f"input={path}", "drop_bad_rows=true"]))
    assert report["dropped"] == 1 and report["n"] == 12
    with pytest.raises(DataError, match=r"has no column 'msg' \(text_column\).*Set text_column=<column>"):
        evaluate_file(build_eval_config([f"run={run}", f"input={path}", "text_column=msg"]))
    renamed = _write(tmp_path / "renamed.csv", rows, ("question", "topic"))
    with pytest.raises(DataError) as err:  # the columns guessed from the values, in eval's own spelling
        evaluate_file(build_eval_config([f"run={run}", f"input={renamed}"]))
    assert "looks like text_column=question label_column=topic (4 values)." in str(err.value)
    assert "data." not in str(err.value)
    with pytest.raises(FileNotFoundError, match="input=.*nope.csv: no such file"):
        evaluate_file(build_eval_config([f"run={run}", f"input={tmp_path / 'nope.csv'}"]))
    with pytest.raises(DataError, match="is a folder"):
        evaluate_file(build_eval_config([f"run={run}", f"input={tmp_path}"]))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run=r", "text_column=x"], "text_column= is for input="),
        (
            ["run=r", "label_column=y", "drop_bad_rows=true"],
            "label_column= and drop_bad_rows= are for input=",
        ),
        (["run=r", "input=f.csv", "split=validation"], "split=validation: input= evaluates the run"),
        (["run=r", "input=f.csv", "mteb=true"], "mteb=True: input= evaluates the run"),
        (["run=r", "input=f.csv", "export=t.jsonl", "out=o"], "give it with run=, not export="),
        (["run=r", "input="], "input= is empty"),
    ],
)
def test_input_settings_that_cannot_apply_are_refused(argv, message):
    with pytest.raises(ConfigError, match=message):
        build_eval_config(argv)


def test_the_command_prints_the_table_and_the_files_figures(run, tmp_path, capsys):
    from ucse.cli.main import main

    rows = _new_rows(30, seed=3)
    rows += [(t, "class_1") for t, y in _new_rows(3, seed=4, labels=(0,))]  # class_0's cue, labelled class_1
    path = _write(tmp_path / "march.csv", rows, ("text", "label"))
    assert main(["eval", f"run={run}", f"input={path}"]) == 0
    out = capsys.readouterr().out
    saved = json.loads(input_report_path(run, str(path)).read_text())
    acc = saved["metrics"]["accuracy"]
    # with Wilson's interval, recomputed by hand: two runs compared on a small file need it (a trial)
    z, k = 1.959963984540054, round(acc * 33)
    centre, half = (k + z * z / 2) / (33 + z * z), z / (33 + z * z) * math.sqrt(k * (33 - k) / 33 + z * z / 4)
    assert (
        f"march.csv (n=33): accuracy {acc:.4f} (95 % interval {centre - half:.3f}-{centre + half:.3f}" in out
    )
    assert "error on the file" in out and "test error" not in out
    assert f"full report: {input_report_path(run, str(path))}\n" in out
    # the same file again: its report is replaced, and that is said
    assert main(["eval", f"run={run}", f"input={path}"]) == 0
    assert (
        f"full report: {input_report_path(run, str(path))} (replacing the one written 20"
        in capsys.readouterr().out
    )
    # the three mislabelled rows are errors: the per-label line names the file its rows are in
    assert (
        "recall by label on march.csv: " in out and "the confusion matrix: eval-input-march.csv.json)" in out
    )
    assert "answers least often right on march.csv: " in out  # their answers are wrong for another label


def test_an_integer_run_reads_whole_number_floats_as_its_ids(tmp_path):
    # pandas writes an integer column that held a missing value as -5.0 / 10.0: the ids -5 and 10
    from ucse.data.labelled_file import read_labelled_file

    path = _write(
        tmp_path / "ids.csv", [("a", "10.0"), ("b", "-5"), ("c", "-5.0"), ("d", "7")], ("text", "label")
    )
    texts, ids, dropped = read_labelled_file(path, "text", "label", ["-5", "7", "10"], True)
    assert texts == ["a", "b", "c", "d"] and ids.tolist() == [2, 0, 0, 1] and dropped == 0
    with pytest.raises(DataError, match=r"whose labels are names \(\['x', 'y'\]\)"):  # ids against names
        read_labelled_file(path, "text", "label", ["x", "y"], False)


def test_an_integer_runs_per_label_rows_carry_its_ids_as_predict_answers_them(tmp_path, tiny_bert_dir):
    from ucse import UcseClassifier
    from ucse.config import build_config

    ids = {"class_0": -5, "class_1": 7, "class_2": 10}
    rows = [(t, ids[y]) for t, y in _new_rows(90, seed=3)]
    train_file = _write(tmp_path / "ids.csv", rows, ("text", "label"))
    cfg = build_config(
        [
            f"data.path={train_file}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "head_precision=fp32",
            "recipe=paper",
            "head=logreg",
            "progress_bar=false",
            f"output_dir={tmp_path / 'run'}",
        ]
    )
    run = run_training(cfg)[0].run_dir
    metrics = json.loads((run / "metrics.json").read_text())
    assert [r["label"] for r in metrics["test_per_label"]] == [-5, 7, 10]
    new = [(t, ids[y]) for t, y in _new_rows(12, seed=4)]
    report = evaluate_file(
        build_eval_config([f"run={run}", f"input={_write(tmp_path / 'new.csv', new, ('text', 'label'))}"])
    )
    saved = json.loads((input_report_path(run, str(tmp_path / "new.csv"))).read_text())
    assert saved["confusion"]["labels"] == [-5, 7, 10] == [r["label"] for r in saved["per_label"]]
    answers = UcseClassifier.from_pretrained(run).predict([t for t, _ in new])
    assert np.asarray(answers).dtype.kind == "i"  # the same kind as the rows' labels
    wrong = [r["confused_with"] for r in saved["per_label"] if r["confused_with"] is not None]
    assert set(wrong) <= set(answers.tolist()) and report["n"] == 12


def test_lists_of_labels_are_refused_as_multi_label_not_as_another_column(tmp_path):
    # they were "none of the values of its column is a label of the run": the wrong column, it said
    from ucse.data.labelled_file import read_labelled_file

    path = tmp_path / "tags.jsonl"
    path.write_text("".join(json.dumps({"text": f"t{i}", "label": ["x", "y"]}) + "\n" for i in range(4)))
    with pytest.raises(DataError, match=r"tags.jsonl line 1: 'label' holds a list of labels .*multi-label"):
        read_labelled_file(path, "text", "label", ["x", "y"], False)


def test_a_file_with_rows_still_to_label_says_how_to_score_the_rest(tmp_path):
    from ucse.data.labelled_file import read_labelled_file

    path = _write(tmp_path / "new.csv", [("a", "x"), ("b", ""), ("c", "y"), ("d", "")], ("text", "label"))
    with pytest.raises(
        DataError,
        match=r"2 of 4 rows have no value in 'label' \(lines 3, 5\).*drop_bad_rows=true to score the 2",
    ):
        read_labelled_file(path, "text", "label", ["x", "y"], False)
    texts, ids, dropped = read_labelled_file(path, "text", "label", ["x", "y"], False, drop_bad_rows=True)
    assert texts == ["a", "c"] and ids.tolist() == [0, 1] and dropped == 2


def test_a_label_written_in_another_case_is_read_as_the_runs_unless_two_run_labels_are_alike(tmp_path):
    from ucse.data.labelled_file import read_labelled_file

    path = _write(tmp_path / "new.csv", [("a", "X"), ("b", " y "), ("c", "x"), ("d", "Y")], ("text", "label"))
    texts, ids, _ = read_labelled_file(path, "text", "label", ["x", "Y"], False)
    assert ids.tolist() == [0, 1, 0, 1]
    # 'y' and 'Y ' are both labels of this run: no guessing, ' y ' and 'Y' are refused
    with pytest.raises(
        DataError, match=r"(?s)2 bad row.*line 3: 'label' is not in the train split's label set"
    ):
        read_labelled_file(path, "text", "label", ["x", "y", "Y "], False)


def test_an_integer_run_scores_the_ids_of_a_file_with_label_text_beside_them(tmp_path):
    # (a review) the file's label_text names were read instead, and the error said to pass label_column=label
    from ucse.data.labelled_file import read_labelled_file

    path = tmp_path / "ids.csv"
    path.write_text("text,label,label_text\na,3,billing\nb,7,login\nc,3,billing\n")
    texts, ids, _ = read_labelled_file(path, "text", "label", ["3", "7", "11"], True)
    assert ids.tolist() == [0, 1, 0]
    _, ids, _ = read_labelled_file(path, "text", "label", ["billing", "login"], False)  # a run of names
    assert ids.tolist() == [0, 1, 0]


def test_the_wrong_answers_are_listed_the_surest_first_as_predict_gives_them(run, tmp_path, capsys):
    # a labelling team ran predict with the gold label as an id column to find which texts were wrong
    from ucse import UcseClassifier
    from ucse.cli.main import main

    rows = _new_rows(30, seed=5)
    rows += [(t, "class_1") for t, y in _new_rows(3, seed=6, labels=(0,))]  # class_0's cue, labelled class_1
    path = _write(tmp_path / "april.csv", rows, ("text", "label"))
    assert main(["eval", f"run={run}", f"input={path}"]) == 0
    saved = json.loads(input_report_path(run, str(path)).read_text())
    got = UcseClassifier.from_pretrained(run, device="cpu").predict_with_uncertainty([t for t, _ in rows])
    want = [
        {"row": i + 1, "text": t, "label": y, "answer": g["label"], "confidence": round(g["confidence"], 4)}
        for i, ((t, y), g) in enumerate(zip(rows, got))
        if g["label"] != y
    ]
    assert saved["errors_total"] == len(want) >= 3  # the three mislabelled rows at least
    assert sorted(saved["errors"], key=lambda e: e["row"]) == [
        w | {"abstain": g["abstain"], "ood": g["ood"]}
        for w, g in zip(want, [got[w["row"] - 1] for w in want])
    ]
    conf = [e["confidence"] for e in saved["errors"]]
    assert conf == sorted(conf, reverse=True)  # the surest first
    first = saved["errors"][0]
    said = f"{len(want)} wrong answers, the surest first in eval-input-april.csv.json's errors"
    out = capsys.readouterr().out
    # a trial's surest wrong answers were bare product codes: the text, not the label, says too little
    assert said in out and "(a sure one is often a wrong label, or a text too short to tell)" in out
    assert first["confidence"] == max(conf)


def test_texts_the_run_trained_on_are_counted_and_warned(run, tmp_path, caplog):
    # a labelling loop's fixed test file shared "bin!!" with a later round's training rows, unsaid (a trial)
    from ucse.config import from_yaml
    from ucse.data import load_classification

    cfg = from_yaml(run / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    names = data.label_names
    own = [(t.upper() + "!!", names[y]) for t, y in zip(data.texts("train")[:4], data.labels("train")[:4])]
    own += [(data.texts("test")[0], names[data.labels("test")[0]])]  # a test row: measured on, also seen
    path = _write(tmp_path / "mixed.csv", _new_rows(20) + own, ("text", "label"))
    report = evaluate_file(build_eval_config([f"run={run}", f"input={path}"]))
    assert report["copies_of_run_rows"] == 5
    assert json.loads(input_report_path(run, str(path)).read_text())["copies_of_run_rows"] == 5
    assert f"5 of 25 texts of {path} are copies of rows of the run's own data" in caplog.text
    # and the 20 others scored apart, as predict answers them (a weekly sample repeats "lol" and spam)
    from ucse import UcseClassifier
    from ucse.cli.summary import eval_summary

    clf = UcseClassifier.from_pretrained(run, device="cpu")
    rows = _new_rows(20)
    want = accuracy_score([r[1] for r in rows], clf.predict([r[0] for r in rows]))
    assert report["new_texts"]["n"] == 20 and report["new_texts"]["accuracy"] == pytest.approx(want)
    assert "the line 'on the texts new to the run' scores the others" in caplog.text
    said = "on the 20 texts new to the run (not copies of its rows; predict's answers): accuracy"
    assert f"{said} {want:.4f}" in eval_summary(report, None)
    caplog.clear()
    fresh = _write(tmp_path / "fresh.csv", _new_rows(20), ("text", "label"))
    clean = evaluate_file(build_eval_config([f"run={run}", f"input={fresh}"]))
    assert clean["copies_of_run_rows"] == 0 and "new_texts" not in clean  # every text new: the headline
    assert "copies of rows" not in caplog.text


def test_a_label_the_runs_min_label_rows_left_out_is_named_as_such(run, tmp_path):
    # a trial read "'category' is not in the train split's label set" of a label its training file held,
    # which data.min_label_rows=2 had left out for its one row
    from ucse.data.labelled_file import read_labelled_file

    path = _write(tmp_path / "new.csv", [("a", "x"), ("b", "rare"), ("c", "y")], ("text", "label"))
    with pytest.raises(DataError) as err:
        read_labelled_file(path, "text", "label", ["x", "y"], False)
    assert "line 3: 'label' is not in the train split's label set: 'rare'" in str(err.value)
    assert "min_label_rows" not in str(err.value)
    with pytest.raises(DataError) as err:
        read_labelled_file(path, "text", "label", ["x", "y"], False, min_label_rows=3)
    said = "labels of fewer than 3 train rows were left out of training by data.min_label_rows=3"
    assert said in str(err.value) and len(str(err.value).splitlines()) == 1
    # ucse eval reads the setting from the run's own config
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    config = copy / "config.yaml"
    text = config.read_text()
    assert "min_label_rows: 0\n" in text
    config.write_text(text.replace("min_label_rows: 0\n", "min_label_rows: 2\n"))
    rows = _new_rows(6)
    rows.insert(2, ("a question about gift cards", "gift cards"))
    odd = _write(tmp_path / "left-out.csv", rows, ("text", "label"))
    said = r"line 4: 'label' is not in .*data\.min_label_rows=2\): 'gift cards'"
    with pytest.raises(DataError, match=said):
        evaluate_file(build_eval_config([f"run={copy}", f"input={odd}"]))
