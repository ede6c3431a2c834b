"""``ucse suggest`` end to end on a tiny trained run: the picks against a brute-force recomputation."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pandas as pd
import pytest
from toy_tasks import OWN_CUES, own_rows

from ucse.cli.main import main
from ucse.inference.classifier import UcseClassifier
from ucse.uncertainty.acquisition import margins

NAMES = sorted(OWN_CUES)


@pytest.fixture(scope="module")
def reference(tiny_clf_run):
    return UcseClassifier.from_pretrained(tiny_clf_run, device="cpu")


def _texts(n: int = 40) -> list[str]:
    return [r["text"] for r in own_rows(n, seed=21)]


def test_margin_picks_are_the_least_sure_texts_as_predict_proba_says(
    tiny_clf_run, reference, tmp_path, capsys
):
    texts = _texts()
    (tmp_path / "pool.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "to_label.csv"
    args = [f"run={tiny_clf_run}", f"input={tmp_path / 'pool.txt'}", "n=6", "strategy=margin", f"out={out}"]
    assert main(["suggest", *args]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0]) == ["text", "label", "guess", "confidence", "margin", "line"]  # the run's columns
    # brute force: every text's margin from the estimator's own probabilities, the six smallest
    proba = reference.predict_proba(texts)
    want = np.argsort(margins(proba), kind="stable")[:6]
    assert [int(r["line"]) - 1 for r in rows] == want.tolist()
    assert [r["text"] for r in rows] == [texts[i] for i in want] and all(r["label"] == "" for r in rows)
    guess = reference.predict([texts[i] for i in want])
    assert [r["guess"] for r in rows] == list(guess)
    close = {"rtol": 0, "atol": 5e-5}  # the same probabilities, written to 4 decimals
    np.testing.assert_allclose([float(r["margin"]) for r in rows], margins(proba[want]), **close)
    np.testing.assert_allclose([float(r["confidence"]) for r in rows], proba[want].max(1), **close)
    assert f"6 of 40 texts to label -> {out} (margin; margins" in capsys.readouterr().err


@pytest.fixture(scope="module")
def question_run(tiny_bert_dir, tmp_path_factory):
    """A run trained on a table with columns question / topic, whose out-of-scope flag raises many texts."""
    from conftest import tiny_overrides

    import ucse

    frame = pd.DataFrame(own_rows(150)).rename(columns={"text": "question", "label": "topic"})
    overrides = tiny_overrides(tiny_bert_dir, tmp_path_factory.mktemp("q") / "run")
    overrides |= {"data.text_column": "question", "data.label_column": "topic", "uncertainty.ood.tpr": 0.5}
    return ucse.train(frame, **overrides).run_dir_


def test_rows_keep_the_runs_column_names_and_leave_out_of_scope_texts_out(question_run, tmp_path, capsys):
    texts = _texts(40)
    (tmp_path / "pool.txt").write_text("\n".join(texts) + "\n")  # a .txt file: no column names of its own
    args = [f"run={question_run}", f"input={tmp_path / 'pool.txt'}", "n=40", "strategy=margin"]
    assert main(["suggest", *args, f"out={tmp_path / 'a.csv'}"]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "a.csv").read_text())))
    assert list(rows[0])[:2] == ["question", "topic"]  # to append to the training file as it is
    flagged = {
        r["text"]
        for r in UcseClassifier.from_pretrained(question_run).predict_with_uncertainty(texts)
        if r["ood"]
    }
    assert 0 < len(flagged) < 40  # the flag at tpr 0.5 raises some of these texts
    assert {r["question"] for r in rows} == set(texts) - flagged
    err = capsys.readouterr().err
    assert f"left out: {len(flagged)} flagged out of scope (include_out_of_scope=true keeps them)" in err
    assert "fill in 'topic'" in err
    assert main(["suggest", *args, "include_out_of_scope=true", f"out={tmp_path / 'b.csv'}"]) == 0
    assert len(list(csv.DictReader(io.StringIO((tmp_path / "b.csv").read_text())))) == 40


def test_diverse_picks_and_copies_offered_once(tiny_clf_run, tmp_path, capsys):
    texts = _texts(30)
    texts = texts + [t.upper() + "!" for t in texts[:10]]  # copies up to case and punctuation
    pd.DataFrame({"id": [f"t{i}" for i in range(len(texts))], "text": texts}).to_csv(tmp_path / "in.csv")
    out = tmp_path / "pick.jsonl"
    args = [f"run={tiny_clf_run}", f"input={tmp_path / 'in.csv'}", "id_column=id", "n=8", f"out={out}"]
    assert main(["suggest", *args]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8 and list(rows[0])[0] == "id"
    assert len({r["text"].lower().rstrip("!") for r in rows}) == 8  # no text twice
    assert all(r["line"] <= 30 for r in rows)  # the first of a text's copies stands for all
    assert [r["margin"] for r in rows] == sorted(r["margin"] for r in rows)  # least sure first
    assert all(r["id"] == f"t{r['line'] - 1}" and r["guess"] in NAMES for r in rows)
    assert "left out: 10 copies of earlier texts" in capsys.readouterr().err
    # n above the texts at hand: every distinct text once
    assert main(["suggest", *args[:3], "n=500", f"out={tmp_path / 'all.jsonl'}"]) == 0
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 30


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["n=0"], "n=0 must be >= 1"),
        (["strategy=entropy"], r"expected one of \[diverse_margin, margin, random\]"),
        (["id_column=text"], "id_column=text: the output's text column is named 'text' .* pick another"),
        (["text_column=body"], "text_column=body: input=.* is one text per line"),
    ],
)
def test_bad_arguments_are_one_line(tiny_clf_run, tmp_path, capsys, extra, said):
    (tmp_path / "pool.txt").write_text("a text\nanother\n")
    input_ = tmp_path / "pool.txt"
    if "id_column=text" in extra:
        input_ = tmp_path / "pool.csv"
        pd.DataFrame({"body": [1, 2], "text": ["a text", "another"]}).to_csv(input_, index=False)
    assert main(["suggest", f"run={tiny_clf_run}", f"input={input_}", *extra]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(said, err)


def test_an_id_column_named_like_an_added_field_keeps_its_name_and_the_field_gives_way(
    tiny_clf_run, tmp_path, capsys
):
    # it failed with "rename it in the input": the user's ids are called "guess" in their own sheet
    from ucse.inference.suggest import field_names

    texts = _texts(6)
    pd.DataFrame({"guess": [f"g{i}" for i in range(6)], "text": texts}).to_csv(
        tmp_path / "p.csv", index=False
    )
    out = tmp_path / "next.csv"
    args = [f"run={tiny_clf_run}", f"input={tmp_path / 'p.csv'}", "id_column=guess", "n=3", f"out={out}"]
    assert main(["suggest", *args]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0]) == ["guess", "text", "label", "suggest_guess", "confidence", "margin", "line"]
    assert all(r["guess"] == f"g{int(r['line']) - 1}" and r["suggest_guess"] in NAMES for r in rows)
    assert "fields renamed beside columns of that name: guess -> suggest_guess" in capsys.readouterr().err
    # the run's own columns win too, and a renamed field never lands on another taken name
    assert field_names(("line", "suggest_line")) == {
        "guess": "guess",
        "confidence": "confidence",
        "margin": "margin",
        "line": "suggest_suggest_line",
    }


def test_an_existing_output_is_never_replaced(tiny_clf_run, tmp_path, capsys):
    (tmp_path / "pool.txt").write_text("\n".join(_texts(5)) + "\n")
    out = tmp_path / "mine.csv"
    out.write_text("my own notes\n")
    assert main(["suggest", f"run={tiny_clf_run}", f"input={tmp_path / 'pool.txt'}", f"out={out}"]) == 2
    assert out.read_text() == "my own notes\n" and "already exists" in capsys.readouterr().err


def test_no_text_left_to_pick_is_said_even_on_stdout(tiny_clf_run, tmp_path, capsys, monkeypatch):
    import ucse.inference.suggest as suggest

    def nothing(clf, texts, *args, **kwargs):  # every text flagged out of scope
        empty = np.zeros(0)
        return suggest.Suggestions(empty.astype(int), empty, empty, empty, copies=0, out_of_scope=len(texts))

    monkeypatch.setattr(suggest, "suggest_to_label", nothing)
    (tmp_path / "pool.txt").write_text("a\nb\n")
    assert main(["suggest", f"run={tiny_clf_run}", f"input={tmp_path / 'pool.txt'}", "out=-"]) == 0
    out = capsys.readouterr()
    assert out.out == ""
    said = "no text to label among the 2: left out 2 flagged out of scope"
    assert out.err.strip() == said + " (include_out_of_scope=true keeps them)."


def test_rows_already_labelled_in_the_runs_label_column_are_no_candidates(tiny_clf_run, tmp_path, capsys):
    # one spreadsheet for both: some rows carry a label, the rest are to label; the labelled ones were offered
    texts = _texts(30)
    labels = [NAMES[i % 3] if i % 2 else ("" if i % 4 else None) for i in range(30)]
    texts.append(texts[1].upper())  # an unlabelled copy of a labelled text: known already
    labels.append("")
    pd.DataFrame({"text": texts, "label": labels}).to_csv(tmp_path / "sheet.csv", index=False)
    out = tmp_path / "next.csv"
    args = [
        f"run={tiny_clf_run}",
        f"input={tmp_path / 'sheet.csv'}",
        "n=100",
        "strategy=margin",
        f"out={out}",
    ]
    assert main(["suggest", *args]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert sorted(int(r["line"]) - 1 for r in rows) == list(range(0, 30, 2))  # the 15 unlabelled rows
    assert "left out: 16 already labelled in 'label' (or copies of such)" in capsys.readouterr().err
    # every row labelled: nothing to pick, said in one line
    full = tmp_path / "full.csv"
    pd.DataFrame({"text": texts[:4], "label": [NAMES[0]] * 4}).to_csv(full, index=False)
    assert main(["suggest", f"run={tiny_clf_run}", f"input={full}", "out=-"]) == 0
    assert (
        capsys.readouterr().err.strip()
        == "no text to label among the 4: left out 4 already labelled in 'label' (or copies of such)."
    )
    # to a file: none is written (an empty one had to be replaced by the next call, with overwrite=true)
    empty = tmp_path / "none.csv"
    assert main(["suggest", f"run={tiny_clf_run}", f"input={full}", f"out={empty}"]) == 0
    assert not empty.exists() and f"; nothing written to {empty}." in capsys.readouterr().err


def test_predicts_own_output_is_a_pool_of_unlabelled_texts(tiny_clf_run, tmp_path, capsys):
    # (a review) predict writes its answers under "label": every row looked labelled, nothing was offered
    (tmp_path / "pool.txt").write_text("\n".join(_texts(12)) + "\n")
    pred = tmp_path / "pred.jsonl"
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'pool.txt'}", f"out={pred}"]) == 0
    out = tmp_path / "next.csv"
    assert main(["suggest", f"run={tiny_clf_run}", f"input={pred}", "n=3", f"out={out}"]) == 0
    assert len(list(csv.DictReader(io.StringIO(out.read_text())))) == 3


def test_a_strategy_given_as_a_string_is_that_strategy():
    # (a review) "margin" and "random" as plain strings ran diverse_margin
    from ucse.uncertainty.acquisition import Strategy, select_to_label

    rng = np.random.default_rng(0)
    p, f = rng.dirichlet(np.ones(3), 40), rng.normal(size=(40, 8))
    for name in ("margin", "random", "diverse_margin"):
        assert select_to_label(p, f, 4, name).tolist() == select_to_label(p, f, 4, Strategy(name)).tolist()
    assert select_to_label(p, f, 4, "margin").tolist() == np.argsort(margins(p), kind="stable")[:4].tolist()


def test_texts_of_the_runs_own_data_are_not_offered_again(train_overrides, tmp_path, caplog, capsys):
    # A trial's second round on the same pool was offered 6 texts it had labelled and trained on in the first.
    import ucse

    rows = own_rows(150)
    pd.DataFrame(rows).to_csv(tmp_path / "train.csv", index=False)
    run = ucse.train(str(tmp_path / "train.csv"), **train_overrides(tmp_path / "run")).run_dir_
    trained = [r["text"] for r in rows]
    fresh = [t for t in _texts(40) if t not in set(trained)]
    pool = fresh + [trained[0].upper() + "!", trained[5], trained[149]]  # copies of labelled rows
    (tmp_path / "pool.txt").write_text("\n".join(pool) + "\n")
    args = [f"run={run}", f"input={tmp_path / 'pool.txt'}", "n=500", "include_out_of_scope=true"]
    assert main(["suggest", *args, f"out={tmp_path / 'a.csv'}"]) == 0
    offered = [r["text"] for r in csv.DictReader(io.StringIO((tmp_path / "a.csv").read_text()))]
    assert sorted(offered) == sorted(set(fresh))  # every row of train, validation and test is known
    said = "left out: 3 already in the run's own data (skip_trained=false offers them)"
    assert said in capsys.readouterr().err
    assert main(["suggest", *args, "skip_trained=false", f"out={tmp_path / 'b.csv'}"]) == 0
    assert len(list(csv.DictReader(io.StringIO((tmp_path / "b.csv").read_text())))) == len(set(pool))
    # the training file moved: the run's own copy of its rows serves
    (tmp_path / "train.csv").rename(tmp_path / "moved.csv")
    assert main(["suggest", *args, f"out={tmp_path / 'e.csv'}"]) == 0
    assert (tmp_path / "e.csv").read_text() == (tmp_path / "a.csv").read_text()
    # without that copy (a run from before it): said in one line, the picks made without the rows,
    # data_path= finds them again
    (run / "rows.parquet").unlink()
    assert main(["suggest", *args, f"out={tmp_path / 'c.csv'}"]) == 0
    said = "texts the run already has labels for are not left out: its training file"
    assert said in caplog.text and "pass data_path=<where it is now>" in caplog.text
    assert len(list(csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text())))) == len(set(pool))
    caplog.clear()
    assert main(["suggest", *args, f"data_path={tmp_path / 'moved.csv'}", f"out={tmp_path / 'd.csv'}"]) == 0
    assert said not in caplog.text
    assert (tmp_path / "d.csv").read_text() == (tmp_path / "a.csv").read_text()


def test_the_runs_out_of_scope_examples_are_not_offered_again(train_overrides, tmp_path, capsys):
    # a trial's "lost property at the town hall" was offered after it had gone into data.ood_path's file
    import ucse

    oos = ["what time does the library open", "lost property at the town hall", "who won the football"]
    (tmp_path / "oos.txt").write_text("\n".join(oos) + "\n")
    pd.DataFrame(own_rows(150)).to_csv(tmp_path / "train.csv", index=False)
    overrides = train_overrides(tmp_path / "run") | {"data.ood_path": str(tmp_path / "oos.txt")}
    run = ucse.train(str(tmp_path / "train.csv"), **overrides).run_dir_
    fresh = [t for t in _texts(20) if t not in {r["text"] for r in own_rows(150)}]
    (tmp_path / "pool.txt").write_text("\n".join(fresh + [oos[1].upper() + "?", oos[2]]) + "\n")
    args = [f"run={run}", f"input={tmp_path / 'pool.txt'}", "n=500", "include_out_of_scope=true"]
    assert main(["suggest", *args, f"out={tmp_path / 'a.csv'}"]) == 0
    offered = [r["text"] for r in csv.DictReader(io.StringIO((tmp_path / "a.csv").read_text()))]
    assert sorted(offered) == sorted(set(fresh))
    assert "left out: 2 already in the run's own data" in capsys.readouterr().err
