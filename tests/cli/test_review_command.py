"""``ucse review``: every labelled row outside test ranked by cross-fitted probes, planted label errors first;
never replaces a file; bad options answer in one line; the run's C read back from metrics.json safely."""

from __future__ import annotations

import csv
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold
from toy_tasks import own_rows, train_in_memory, train_rows

from ucse.cli.main import main
from ucse.config import from_yaml
from ucse.data import load_classification
from ucse.summary import train_summary
from ucse.uncertainty.review_run import ALL_ROWS, cross_fitted_probs, run_probe_c


def _read(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _held_texts(run: Path) -> list[str]:
    """Every labelled text of the run outside test."""
    cfg = from_yaml(run / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    return data.texts("train") + data.texts("validation")


@pytest.fixture(scope="module")
def flipped_run(tmp_path_factory, tiny_bert_dir):
    """A head=logreg run on 240 rows of which six keep their cue word but carry the next label."""
    tmp = tmp_path_factory.mktemp("review")
    rows = own_rows(240, seed=3)
    names = sorted({r["label"] for r in rows})
    planted = {}
    for i in range(0, 240, 40):
        planted[rows[i]["text"]] = rows[i]["label"]
        rows[i] = {**rows[i], "label": names[(names.index(rows[i]["label"]) + 1) % len(names)]}
    result, profile = train_rows(tmp, tiny_bert_dir, rows, "head=logreg", "data.refit=false")
    # the run's own review holds its validation slice (data.refit=false: a small one otherwise cross-fits
    # the probe over every row): the summary points at the command for every row
    files = train_summary(tmp / "run", result.metrics, profile).splitlines()[-2]
    held = len(_held_texts(tmp / "run"))
    said = f"; `ucse review run={tmp / 'run'}` ranks all {held} train + validation rows)"
    assert files.endswith(said), files
    return tmp / "run", planted


def test_every_labelled_row_is_ranked_and_the_planted_errors_lead(flipped_run, capsys):
    run, planted = flipped_run
    assert main(["review", f"run={run}"]) == 0
    assert str(run / ALL_ROWS) in capsys.readouterr().out
    review = _read(run / ALL_ROWS)
    held = _held_texts(run)
    assert sorted(r["text"] for r in review) == sorted(held)  # every row outside test, once
    assert len(held) > len(_read(run / "label_review.csv"))  # more than the run's own review (validation)
    assert [int(r["rank"]) for r in review] == list(range(1, len(review) + 1))
    p = [float(r["p_label"]) for r in review]
    assert p == sorted(p)  # most doubtful first
    # The planted rows that fall outside test lead: AUROC of their ranks >= 0.9 (random order: 0.5), and
    # the suggestion is their true label.
    ranks = [i for i, r in enumerate(review) if r["text"] in planted]
    assert len(ranks) >= 4
    auroc = np.mean([[a < b for b in range(len(review)) if b not in ranks] for a in ranks])
    assert auroc >= 0.9
    assert all(review[i]["suggested"] == planted[review[i]["text"]] for i in ranks)


def test_copies_that_share_a_wrong_label_lead_the_review(tmp_path, tiny_bert_dir, capsys):
    # Four texts, each written four times with the next label: kept in one fold, no copy vouches for another.
    rows = own_rows(200, seed=5)
    names = sorted({r["label"] for r in rows})
    planted = {}
    for i in (0, 50, 100, 150):
        planted[rows[i]["text"]] = rows[i]["label"]
        rows[i] = {**rows[i], "label": names[(names.index(rows[i]["label"]) + 1) % len(names)]}
        rows += [rows[i]] * 3
    train_rows(tmp_path, tiny_bert_dir, rows, "head=logreg")
    assert main(["review", f"run={tmp_path / 'run'}"]) == 0
    review = _read(tmp_path / "run" / ALL_ROWS)
    ranks = [i for i, r in enumerate(review) if r["text"] in planted]
    assert len(ranks) >= 8, ranks  # two or more of the four texts outside test (the carve keeps copies whole)
    # they lead: AUROC of their ranks >= 0.9 (0.97 here; with copies scored beside their twins, 0.78)
    auroc = np.mean([[a < b for b in range(len(review)) if b not in ranks] for a in ranks])
    assert auroc >= 0.9, ranks
    assert all(review[i]["suggested"] == planted[review[i]["text"]] for i in ranks)


def test_an_existing_file_is_never_replaced_and_bad_options_answer_in_one_line(flipped_run, capsys, tmp_path):
    run, _ = flipped_run
    mine = tmp_path / "mine.csv"
    mine.write_text("mine\n")
    for argv, said in (
        ([f"run={run}", f"out={mine}"], "already exists; nothing was written"),
        ([f"run={run}", "folds=1", f"out={tmp_path / 'a.csv'}"], "folds=1: give an integer >= 2"),
        ([f"run={run}", "folds=five"], "folds=five: give an integer >= 2"),
        ([f"run={run}", "fold=3"], "Did you mean 'folds'?"),
        (
            [f"run={run}", f"out={tmp_path / 'r.jsonl'}"],
            "review writes a CSV table; give a path ending in .csv",
        ),
        (["out=x.csv"], "review needs run=<run folder>"),
        ([f"run={tmp_path / 'none'}"], str(tmp_path / "none")),
    ):
        capsys.readouterr()
        assert main(["review", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1, err
    assert mine.read_text() == "mine\n"
    assert not (tmp_path / "a.csv").exists() and not (tmp_path / "r.jsonl").exists()
    capsys.readouterr()
    assert main(["review", f"run={run}", f"out={tmp_path / 'b.csv'}", "folds=3"]) == 0
    assert sorted(r["text"] for r in _read(tmp_path / "b.csv")) == sorted(_held_texts(run))
    assert "asked" not in capsys.readouterr().out
    # more folds than any label's rows: fewer made, and said (only the probe line told)
    assert main(["review", f"run={run}", f"out={tmp_path / 'c.csv'}", "folds=1000"]) == 0
    out = capsys.readouterr().out
    assert "folds=1000 asked: " in out and " made, as many as the most frequent label's rows" in out


def test_include_test_reviews_the_test_rows_too_and_overwrite_replaces(flipped_run, capsys, tmp_path):
    # a trial planted four wrong labels; two landed in the carved test slice, out of every review
    run, planted = flipped_run
    out = tmp_path / "all.csv"
    assert main(["review", f"run={run}", f"out={out}", "include_test=true"]) == 0
    cfg = from_yaml(run / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    every = _held_texts(run) + data.texts("test")
    review = _read(out)
    assert sorted(r["text"] for r in review) == sorted(every) and data.texts("test")  # test rows too, once
    ranks = [i for i, r in enumerate(review) if r["text"] in planted]
    assert len(ranks) == len(planted)  # every planted row is in some split, so every one is ranked now
    auroc = np.mean([[a < b for b in range(len(review)) if b not in ranks] for a in ranks])
    assert auroc >= 0.9
    capsys.readouterr()
    assert main(["review", f"run={run}", f"out={out}"]) == 2  # an existing file: refused without overwrite
    assert "Pass overwrite=true to replace it" in capsys.readouterr().err
    assert main(["review", f"run={run}", f"out={out}", "overwrite=true"]) == 0
    assert sorted(r["text"] for r in _read(out)) == sorted(_held_texts(run))  # replaced: without test
    assert main(["review", f"run={run}", "include_test=maybe"]) == 2
    assert "include_test=maybe: give true or false." in capsys.readouterr().err


def test_the_runs_c_is_read_back_only_when_it_is_a_positive_number():
    assert run_probe_c({"selection": {"probe": {"C": 31.6}}}) == 31.6
    assert run_probe_c({"probe": {"C": 3}}) == 3.0
    for bad in (
        {},
        {"probe": {"C": -1}},
        {"probe": {"C": float("nan")}},
        {"probe": {"C": True}},
        {"probe": {"C": "10"}},
        {"selection": "x"},
        {"probe": None},
    ):
        assert run_probe_c(bad) is None, bad


def test_an_unreadable_metrics_file_only_means_the_c_is_chosen_again(flipped_run, tmp_path, caplog):
    run, _ = flipped_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(ALL_ROWS))
    (copy / "metrics.json").write_text("{bad")
    with caplog.at_level(logging.WARNING, logger="ucse.config.run_layout"):
        assert main(["review", f"run={copy}"]) == 0
    assert "metrics.json is unreadable" in caplog.text and "chosen by cross-validation" in caplog.text
    assert sorted(r["text"] for r in _read(copy / ALL_ROWS)) == sorted(_held_texts(run))


def test_cross_fitted_probabilities_by_hand_and_a_label_of_one_row():
    # Three labels of 30 rows around their own direction, and a fourth label with a single row.
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 8))
    y = np.array([0] * 30 + [1] * 30 + [2] * 30 + [3])
    x = centres[y] + 0.8 * rng.normal(size=(len(y), 8))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    probs, t, k = cross_fitted_probs(x, y, 1.0, 3, 0, 1000)
    assert k == 2  # at most the smallest label's rows, at least 2
    assert probs.shape == (len(y), 4) and np.isfinite(probs).all() and math.isfinite(t) and t > 0
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    assert probs[-1, 3] == 0.0  # no other row of its label: nothing vouches for it, it ranks first
    # The other rows: the same folds' regressions by hand (sklearn), log-probabilities over the temperature.
    folds = StratifiedKFold(2, shuffle=True, random_state=0).split(x, y)
    logp = np.full((len(y), 4), -np.inf)
    for tr, te in folds:
        clf = LogisticRegression(C=1.0, solver="newton-cg", max_iter=1000).fit(x[tr], y[tr])
        logp[np.ix_(te, clf.classes_)] = clf.predict_log_proba(x[te])
    want = np.exp(logp[:-1] / t - np.logaddexp.reduce(logp[:-1] / t, axis=1, keepdims=True))
    np.testing.assert_allclose(probs[:-1], want, atol=1e-9)


def test_copies_of_a_text_are_scored_in_one_fold():
    # Two labels of 20 rows around their own direction, and five copies of one label-0 text labelled 1: scored
    # beside its twins each copy is vouched for by four of them; in one fold, by none.
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(2, 8))
    y = np.array([0] * 20 + [1] * 20 + [1] * 5)
    x = centres[[0] * 20 + [1] * 20 + [0] * 5] + 0.5 * rng.normal(size=(45, 8))
    x[40:] = x[40]  # the copies: one text
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    groups = np.array([*range(40), *[40] * 5])
    plain, _, _ = cross_fitted_probs(x, y, 100.0, 5, 0, 1000)
    grouped, _, k = cross_fitted_probs(x, y, 100.0, 5, 0, 1000, groups)
    assert k == 5
    # by hand: the group folds (scikit-learn's StratifiedGroupKFold), the copies in one test fold
    folds = list(StratifiedGroupKFold(5, shuffle=True, random_state=0).split(x, y, groups))
    assert sum(set(range(40, 45)) <= set(te) for _, te in folds) == 1
    assert plain[40:, 1].min() > 0.5  # vouched for: the wrong label looks right
    assert grouped[40:, 1].max() < 0.5  # in one fold: the text's neighbours of label 0 speak
    given = grouped[np.arange(len(y)), y]
    assert set(np.argsort(given)[:5]) == set(range(40, 45))  # they lead the review


def test_a_run_trained_in_memory_is_refused_clearly_and_not_offered(tiny_bert_dir, tmp_path, capsys):
    clf = train_in_memory(tmp_path, tiny_bert_dir)
    (clf.run_dir_ / "rows.parquet").unlink()  # a run from before its copy of the rows
    clf.profile_.info["recalibrate"] = False  # as a profile fitted without the copy records
    # its summary does not offer what would be refused (ucse.train prints none: built as ucse train does)
    files = train_summary(clf.run_dir_, clf.metrics_, clf.profile_).splitlines()[-2]
    assert files.startswith("files: ") and "label_review.csv" in files and "ucse review" not in files
    assert main(["review", f"run={clf.run_dir_}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "passed in memory, which review cannot read back" in err and len(err.splitlines()) == 1
    assert not (clf.run_dir_ / ALL_ROWS).exists()
