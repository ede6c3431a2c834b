"""``ucse calibrate``: refitting a run's profile equals training with those settings, without retraining.

Reference: a second run trained from scratch with the new ``uncertainty.*`` settings on the same seed (the
head is deterministic on CPU, so its profile is what the refit must reproduce), and the run's own files.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from toy_tasks import own_rows, train_in_memory, write_rows

from ucse.cli.main import main
from ucse.config import build_config, from_yaml
from ucse.pipeline import run_training


def _cfg(data: Path, out: Path, tiny_bert_dir: Path, *extra: str):
    return build_config(
        [
            f"data.path={data}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "backbone.batch_size=32",
            "head=logreg",
            "progress_bar=false",
            "uncertainty.abstain.coverage=0.8",
            f"output_dir={out}",
            *extra,
        ]
    )


def _file_run(tmp_path: Path, tiny_bert_dir: Path, rows: list, name: str, copy: bool) -> tuple[Path, Path]:
    """(the training file, the run) of a run trained on ``rows`` written to ``name``; without ``copy`` the
    run's rows.parquet is removed, as in a run from before it (its data are then read again)."""
    data = write_rows(tmp_path / name, rows)
    run = tmp_path / "run"
    run_training(_cfg(data, run, tiny_bert_dir))
    if not copy:
        (run / "rows.parquet").unlink()
    return data, run


@pytest.fixture(scope="module")
def tickets(tmp_path_factory, tiny_bert_dir) -> tuple[Path, Path]:
    """A csv of 240 rows and a finished run on it (validation: 10 % of the 80 % left after test)."""
    root = tmp_path_factory.mktemp("calibrate")
    data = write_rows(root / "tickets.csv", own_rows(240, seed=5))
    run_training(_cfg(data, root / "run", tiny_bert_dir))
    return data, root / "run"


def _profile(run: Path) -> dict:
    return json.loads((run / "head" / "calibration.json").read_text())


def test_refit_equals_training_with_the_new_settings(tickets, tiny_bert_dir, tmp_path, capsys):
    data, run = tickets
    weights = (run / "head" / "model.safetensors").read_bytes()
    new = ["uncertainty.abstain.coverage=0.5", "uncertainty.conformal.alpha=0.2"]
    assert main(["calibrate", f"run={run}", *new]) == 0
    shown = capsys.readouterr().out
    assert "coverage 0.8" in shown and "coverage 0.5" in shown  # before -> after, named
    assert (run / "head" / "model.safetensors").read_bytes() == weights  # the head was not retrained

    fresh = tmp_path / "fresh"
    run_training(_cfg(data, fresh, tiny_bert_dir, *new))
    got, want = _profile(run), _profile(fresh)
    assert got["abstain"] == want["abstain"] and got["conformal"] == want["conformal"]
    assert got["abstain"]["target"] == 0.5 and got["conformal"]["alpha"] == 0.2
    assert got["calibration"] == pytest.approx(want["calibration"])
    recorded = from_yaml(run / "config.yaml").uncertainty
    assert recorded.abstain.coverage == 0.5 and recorded.conformal.alpha == 0.2  # the run's record follows


@pytest.mark.parametrize(
    "new",
    [
        ["uncertainty.ood.tpr=0.8"],  # same score: the statistics are kept, only the threshold moves
        # Another score: fitted on the training split (tpr given: the run keeps the one set before).
        ["uncertainty.ood.score=knn", "uncertainty.ood.k=3", "uncertainty.ood.tpr=0.9"],
    ],
)
def test_the_out_of_scope_flag_refits_like_training(tickets, tiny_bert_dir, tmp_path, capsys, new):
    data, run = tickets
    assert main(["calibrate", f"run={run}", *new]) == 0
    assert "out-of-scope flag: " in capsys.readouterr().out
    fresh = tmp_path / "fresh"
    run_training(_cfg(data, fresh, tiny_bert_dir, *new))
    got, want = _profile(run)["ood"], _profile(fresh)["ood"]
    assert got["score"] == want["score"] and got["tpr"] == want["tpr"] and got["k"] == want["k"]
    assert got["threshold"] == pytest.approx(want["threshold"], rel=1e-6)
    # head=logreg on a small validation slice is cross-fitted: the flag reads rows held out of the fold probes
    assert got["info"]["heldout"] == want["info"]["heldout"] != "validation"


def test_an_error_target_replaces_the_coverage_rule(tickets):
    _, run = tickets
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.target_error=0.3"]) == 0
    a = _profile(run)["abstain"]
    assert a["rule"] == "target_error" and a["target"] == 0.3
    assert from_yaml(run / "config.yaml").uncertainty.abstain.coverage is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["uncertainty.abstain.coverage=0.5"], "calibrate needs run="),
        (["run={run}", "optim.lr=0.1"], "only uncertainty.<field>"),
        (["run={run}", "uncertainty.enabled=false"], "always fits a profile"),
        (["run={run}", "uncertainty.abstain.coverag=0.5"], "coverag"),
        (["run={run}", "uncertainty.abstain.coverage=1.5"], "coverage"),
        (["run={missing}", "uncertainty.abstain.coverage=0.5"], "does not exist"),
    ],
)
def test_bad_arguments_are_one_line_and_change_nothing(tickets, tmp_path, capsys, args, needle):
    _, run = tickets
    before = _profile(run)
    argv = [a.format(run=run, missing=tmp_path / "nope") for a in args]
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]
    assert _profile(run) == before


def test_a_run_trained_in_memory_is_served_from_its_copy_of_the_rows(tiny_bert_dir, tmp_path, capsys):
    clf = train_in_memory(tmp_path, tiny_bert_dir)
    assert _profile(clf.run_dir_)["info"]["recalibrate"] is True  # its messages offer `ucse calibrate`
    assert main(["calibrate", f"run={clf.run_dir_}", "uncertainty.abstain.coverage=0.5"]) == 0
    assert main(["eval", f"run={clf.run_dir_}", "plots=false"]) == 0
    test = json.loads((clf.run_dir_ / "eval.json").read_text())
    assert test["n"] == json.loads((clf.run_dir_ / "metrics.json").read_text())["data"]["sizes"]["test"]


def test_a_run_trained_in_memory_is_refused_clearly(tickets, tiny_bert_dir, tmp_path, capsys):
    clf = train_in_memory(tmp_path, tiny_bert_dir)
    (clf.run_dir_ / "rows.parquet").unlink()  # a run from before its copy of the rows
    assert main(["calibrate", f"run={clf.run_dir_}", "uncertainty.abstain.coverage=0.5"]) == 2
    assert "in memory" in capsys.readouterr().err
    # eval too: one line naming the run and what to do, not the loader's "no data source" for a task
    assert main(["eval", f"run={clf.run_dir_}"]) == 2
    err = capsys.readouterr().err
    assert "in memory, which eval cannot read back" in err and "from_pretrained(run).score" in err
    assert "no data source" not in err and not (clf.run_dir_ / "eval.json").exists()
    assert _profile(tickets[1])["info"]["recalibrate"] is True


def test_no_field_refits_the_runs_own_settings_where_the_profile_is_missing(tickets, capsys):
    _, run = tickets
    before = _profile(run)
    for name in ("calibration.json", "calibration.safetensors"):  # as after a crash between head and profile
        (run / "head" / name).unlink()
    assert main(["calibrate", f"run={run}"]) == 0
    assert "abstention: no abstention -> " in capsys.readouterr().out
    after = _profile(run)
    assert after["abstain"]["rule"] == before["abstain"]["rule"] and after["score"] == before["score"]


def test_a_run_stopped_before_its_profile_is_named_where_it_is_served_and_retrained(
    tickets, tiny_bert_dir, tmp_path, capsys, caplog
):
    import logging
    import shutil

    from ucse import UcseClassifier
    from ucse.heads.manifest import write_manifest

    data, finished = tickets
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    before = _profile(run)
    # what a run stopped between writing its head and fitting its profile leaves
    for name in ("head/calibration.json", "head/calibration.safetensors", "label_review.csv"):
        (run / name).unlink()
    write_manifest(run / "head", {"config.json", "model.safetensors"})
    with caplog.at_level(logging.WARNING):
        UcseClassifier.from_pretrained(run, device="cpu")
    (msg,) = [r.getMessage() for r in caplog.records if "no uncertainty profile" in r.getMessage()]
    assert f"`ucse calibrate run={run}` fits it" in msg and "plain softmax" in msg
    texts = tmp_path / "new.txt"
    texts.write_text("my card was charged twice\n")
    capsys.readouterr()
    assert main(["predict", f"run={run}", f"input={texts}", f"out={tmp_path / 'p.jsonl'}"]) == 0
    assert msg in capsys.readouterr().err  # the command says it too, once, with its summary
    # the same training command: not "resume it with ckpt_path", which a fitted-in-memory head refuses
    argv = [f"data.path={data}", f"backbone.model={tiny_bert_dir}", "backbone.name=tiny-bert", "head=logreg"]
    assert main(["train", *argv, f"output_dir={run}"]) == 2
    err = capsys.readouterr().err
    assert "without its uncertainty profile" in err and f"ucse calibrate run={run}" in err
    assert "ckpt_path" not in err
    assert main(["calibrate", f"run={run}"]) == 0
    after = _profile(run)
    assert (after["score"], after["abstain"]) == (before["score"], before["abstain"])
    assert (run / "label_review.csv").read_bytes() == (finished / "label_review.csv").read_bytes()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        UcseClassifier.from_pretrained(run, device="cpu")
    assert not [r for r in caplog.records if "no uncertainty profile" in r.getMessage()]


def test_a_run_on_rows_in_memory_without_its_profile_is_told_to_train_again(tiny_bert_dir, tmp_path, caplog):
    import logging

    from ucse import UcseClassifier
    from ucse.heads.manifest import write_manifest

    run = train_in_memory(tmp_path, tiny_bert_dir).run_dir_
    for name in ("head/calibration.json", "head/calibration.safetensors"):
        (run / name).unlink()
    write_manifest(run / "head", {"config.json", "model.safetensors"})
    with caplog.at_level(logging.WARNING):
        UcseClassifier.from_pretrained(run, device="cpu")
    (msg,) = [r.getMessage() for r in caplog.records if "no uncertainty profile" in r.getMessage()]
    assert f"`ucse calibrate run={run}` fits it" in msg  # from the run's own copy of its rows
    caplog.clear()
    (run / "rows.parquet").unlink()  # a run from before the copy
    with caplog.at_level(logging.WARNING):
        UcseClassifier.from_pretrained(run, device="cpu")
    (msg,) = [r.getMessage() for r in caplog.records if "no uncertainty profile" in r.getMessage()]
    # `ucse calibrate` refuses such a run (its rows cannot be read back): not offered
    assert "passed in memory" in msg and "train it again" in msg and "calibrate run=" not in msg


def test_a_stop_while_the_profile_is_fitted_names_the_repair(
    tickets, tiny_bert_dir, tmp_path, monkeypatch, capsys, caplog
):
    import logging

    import ucse.pipeline

    data, _ = tickets

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ucse.pipeline, "fit_uncertainty", stopped)
    argv = [f"data.path={data}", f"backbone.model={tiny_bert_dir}", "backbone.name=tiny-bert", "head=logreg"]
    with caplog.at_level(logging.WARNING):
        assert main(["train", *argv, f"output_dir={tmp_path / 'run'}"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: interrupted")
    said = f"was trained, but its uncertainty profile was not fitted; `ucse calibrate run={tmp_path / 'run'}`"
    assert any(said in r.getMessage() for r in caplog.records)


def test_calibrate_replaces_a_damaged_profile_and_says_so(tickets, tmp_path, caplog):
    import logging
    import shutil

    _, finished = tickets
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    before = _profile(run)
    edited = {**before, "samples": 7}  # edited by hand: its digest no longer matches the manifest
    (run / "head" / "calibration.json").write_text(json.dumps(edited))
    with caplog.at_level(logging.WARNING):
        assert main(["calibrate", f"run={run}"]) == 0
    assert any("cannot be used" in r.getMessage() and "SHA-256" in r.getMessage() for r in caplog.records)
    after = _profile(run)
    assert (after["score"], after["abstain"], after["samples"]) == (
        before["score"],
        before["abstain"],
        before["samples"],
    )


def test_data_changed_since_training_are_refused_by_calibrate_and_named_by_eval(
    tiny_bert_dir, tmp_path, capsys, caplog
):
    # The run records which rows each split held (metrics.json: SHA-256 of its sorted (label, text) rows);
    # refitting the profile on other "validation" rows could read rows the head trained on.
    rows = own_rows(120, seed=9)
    data, run = _file_run(tmp_path, tiny_bert_dir, rows, "tickets.csv", copy=False)
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["data"]["fingerprints"]) == {"train", "validation", "test"}
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.coverage=0.7"]) == 0  # same data: fine
    capsys.readouterr()
    before = _profile(run)
    write_rows(data, rows[:-1] + [{**rows[-1], "text": rows[-1]["text"] + " edited"}])  # one row edited
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.coverage=0.6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not the ones this run was trained with" in err[0] and "Retrain" in err[0]
    assert _profile(run) == before  # nothing replaced
    # eval reports on whatever rows it is given, and says when its split is not the one trained with.
    write_rows(data, [{**r, "text": r["text"] + " edited"} for r in rows])  # every split changes
    assert main(["eval", f"run={run}"]) == 0
    assert any("the test rows that data.path" in r.getMessage() for r in caplog.records)
    # A run from before fingerprints (or a damaged record) is not checked: it refits as it always did.
    del metrics["data"]["fingerprints"]
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.coverage=0.6"]) == 0


def test_a_balanced_prior_divides_the_probabilities_by_the_training_shares(tickets, tmp_path, capsys):
    import shutil

    import numpy as np
    import torch

    from ucse.uncertainty.profile import load_uncertainty_profile

    run = tmp_path / "run"
    shutil.copytree(tickets[1], run)
    before = load_uncertainty_profile(run / "head")
    assert main(["calibrate", f"run={run}", "uncertainty.calibration.prior=balanced"]) == 0
    said = capsys.readouterr().out
    assert "class prior: train -> balanced (held-out macro-F1 " in said
    ece = [
        load_uncertainty_profile(run / "head").info["class_prior"][p]["ece"] for p in ("train", "balanced")
    ]
    assert f", ECE {ece[0]:.3f} -> {ece[1]:.3f})" in said  # what the prior does to the rows' calibration
    after = load_uncertainty_profile(run / "head")
    counts = np.asarray(after.info["class_prior"]["counts"], dtype=np.float64)
    sizes = json.loads((run / "metrics.json").read_text())["data"]["sizes"]
    # the rows the probe trained on (head=logreg on a small validation slice: train + validation)
    # the shipped head's rows: train + validation, and the carved test slice it was refitted on (refit_test)
    assert counts.sum() == sizes["train"] + sizes["validation"] + sizes["test"]
    logits = torch.randn(50, len(counts), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    want = before.calibrator.probs(logits) / torch.as_tensor(counts / counts.sum())
    torch.testing.assert_close(after.calibrator.probs(logits), want / want.sum(1, keepdim=True))
    assert from_yaml(run / "config.yaml").uncertainty.calibration.prior.value == "balanced"
    texts = tmp_path / "new.txt"
    texts.write_text("a new text\nanother one\n")
    assert main(["predict", f"run={run}", f"input={texts}", f"out={tmp_path / 'p.jsonl'}"]) == 0
    assert "; class prior: balanced)" in capsys.readouterr().err  # predict says which mix it answers for


def test_a_target_prior_multiplies_the_probabilities_by_the_target_over_the_training_shares(
    tickets, tmp_path, capsys, caplog
):
    import shutil

    import numpy as np
    import torch

    from ucse.uncertainty.profile import load_uncertainty_profile

    run = tmp_path / "run"
    shutil.copytree(tickets[1], run)
    before = load_uncertainty_profile(run / "head")
    names = json.loads((run / "head" / "config.json").read_text())["meta"]["label_names"]
    prior = ["uncertainty.calibration.prior=target"]
    # A label the run does not have: one line naming it and the labels, nothing replaced.
    saved = _profile(run)
    assert main(["calibrate", f"run={run}", *prior, "uncertainty.calibration.target_shares={jazz: 0.5}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'jazz' is not one of the run's 3 labels" in err[0], err
    assert _profile(run) == saved
    shares = "uncertainty.calibration.target_shares.music=0.6"  # money and pets share the other 0.4
    assert main(["calibrate", f"run={run}", *prior, shares]) == 0
    out = capsys.readouterr().out
    assert "class prior: train -> target (held-out rows weighted to the target mix: macro-F1 " in out
    after = load_uncertainty_profile(run / "head")
    counts = np.asarray(after.info["class_prior"]["counts"], dtype=np.float64)
    pi = counts / counts.sum()
    q = np.where(np.array(names) == "music", 0.6, 0.0)
    rest = np.array(names) != "music"
    q[rest] = 0.4 * counts[rest] / counts[rest].sum()
    np.testing.assert_allclose(after.info["class_prior"]["target_shares"], q)
    # The shares in force are printed: the given one, and the others' resolved shares.
    (mix,) = [line for line in out.splitlines() if line.startswith("target mix in force: ")]
    assert mix.startswith("target mix in force: music 0.6 (given); "), mix
    for name, share in zip(names, q, strict=True):
        if name != "music":
            assert f"{name} {share:.3g}" in mix, (name, mix)
    logits = torch.randn(50, len(counts), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    want = before.calibrator.probs(logits) * torch.as_tensor(q / pi)
    torch.testing.assert_close(after.calibrator.probs(logits), want / want.sum(1, keepdim=True))
    recorded = from_yaml(run / "config.yaml").uncertainty.calibration
    assert recorded.prior.value == "target" and dict(recorded.target_shares) == {"music": 0.6}
    texts = tmp_path / "new.txt"
    texts.write_text("a new text\nanother one\n")
    assert main(["predict", f"run={run}", f"input={texts}", f"out={tmp_path / 'p.jsonl'}"]) == 0
    assert "; class prior: target)" in capsys.readouterr().err
    # A new mix replaces the recorded one in one call (it was merged into it: music 0.6 + pets 0.5 > 1);
    # one label's share changes that one and keeps the others', said in a warning; another prior drops the
    # recorded shares (it was refused while they stood).
    new = "uncertainty.calibration.target_shares={pets: 0.5}"
    assert main(["calibrate", f"run={run}", new]) == 0, capsys.readouterr().err
    assert dict(from_yaml(run / "config.yaml").uncertainty.calibration.target_shares) == {"pets": 0.5}
    assert main(["calibrate", f"run={run}", "uncertainty.calibration.target_shares.music=0.2"]) == 0
    assert "target mix in force: pets 0.5, music 0.2 (given); money 0.3 (the rest" in capsys.readouterr().out
    assert dict(from_yaml(run / "config.yaml").uncertainty.calibration.target_shares) == {
        "pets": 0.5,
        "music": 0.2,
    }
    assert "the run's recorded shares {'pets': 0.5} are kept beside the ones given" in caplog.text
    assert main(["calibrate", f"run={run}", "uncertainty.calibration.prior=train"]) == 0, (
        capsys.readouterr().err
    )
    recorded = from_yaml(run / "config.yaml").uncertainty.calibration
    assert recorded.prior.value == "train" and recorded.target_shares is None
    assert "target" not in load_uncertainty_profile(run / "head").info.get("class_prior", {}).get("prior", "")


def test_training_with_a_target_prior_checks_its_labels_before_anything_is_written(
    tickets, tiny_bert_dir, tmp_path, capsys
):
    data, _ = tickets
    out = tmp_path / "never"
    args = ["train", f"data.path={data}", f"backbone.model={tiny_bert_dir}", f"output_dir={out}"]
    assert main([*args, "uncertainty.calibration.prior=target"]) == 2
    assert "needs uncertainty.calibration.target_shares.<label>=<share>" in capsys.readouterr().err
    assert (
        main(
            [*args, "uncertainty.calibration.prior=target", "uncertainty.calibration.target_shares={cats: 1}"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'cats' is not one of the run's 3 labels (money, music, pets)" in err[0], err
    assert not out.exists()


def test_eval_refuses_to_fit_a_profile_on_changed_rows(tiny_bert_dir, tmp_path, capsys):
    # A run with no saved profile (the library's train() fits none): eval fits one on the run's validation
    # and train rows, which must still be the rows it was trained with (calibrate and review refuse too).
    from ucse.training import train

    rows = own_rows(120, seed=9)
    data = write_rows(tmp_path / "tickets.csv", rows)
    run = train(_cfg(data, tmp_path / "run", tiny_bert_dir)).run_dir
    (run / "rows.parquet").unlink()  # a run from before its copy of the rows: its data are read again
    assert main(["eval", f"run={run}", "plots=false", "efficiency=false"]) == 0
    assert json.loads((run / "eval.json").read_text())["profile_source"] == "fitted at evaluation"
    capsys.readouterr()
    before = (run / "eval.json").read_bytes()
    write_rows(data, rows[::-1])  # the same rows in another order: another carve of train and validation
    assert main(["eval", f"run={run}", "plots=false", "efficiency=false"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not the ones this run was trained with" in err[0] and "Retrain" in err[0]
    assert (run / "eval.json").read_bytes() == before  # nothing replaced


def test_a_moved_training_file_is_named_and_data_path_finds_it(tiny_bert_dir, tmp_path, capsys):
    # A user renamed the training file: calibrate said "data.path=... does not exist. Point it at your data
    # file", a setting it refuses, and data_root= cannot name a file: no way on but putting the file back.
    rows = own_rows(120, seed=11)
    data, run = _file_run(tmp_path, tiny_bert_dir, rows, "tickets.csv", copy=False)
    before = _profile(run)
    moved = data.rename(tmp_path / "tickets-2026.csv")
    for command in (["calibrate"], ["eval"], ["review"]):
        assert main([*command, f"run={run}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"records data.path={data}, which does not exist" in err[0]
        assert f"where it is now> to {command[0]}" in err[0] and "pass data_path=<the run" in err[0]
    assert _profile(run) == before
    assert main(["calibrate", f"run={run}", f"data_path={moved}"]) == 0
    out = capsys.readouterr().out
    assert "(unchanged)" in out and " -> " not in out.split("abstention:")[1]  # the run's own settings
    assert from_yaml(run / "config.yaml").data.path == str(data)  # the run's record keeps its own
    assert main(["eval", f"run={run}", f"data_path={moved}"]) == 0
    assert main(["review", f"run={run}", f"data_path={moved}"]) == 0
    # another file is not the run's data: its rows are checked
    write_rows(moved, [{**r, "text": r["text"] + " edited"} for r in rows])
    assert main(["calibrate", f"run={run}", f"data_path={moved}"]) == 2
    assert "not the ones this run was trained with" in capsys.readouterr().err


def test_calibrate_does_not_repeat_the_datas_reading_notes(tickets, caplog):
    # The data's notes (separator, copies, labels and sizes) were said when the run trained; calibrate
    # printed them again above its four lines every time.
    _, run = tickets
    caplog.set_level("INFO")
    assert main(["calibrate", f"run={run}"]) == 0
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("ucse.data")]
    assert logging.getLogger("ucse.data").level == logging.NOTSET  # given back


def test_the_runs_copy_of_its_rows_serves_every_command_whatever_becomes_of_the_file(
    tiny_bert_dir, tmp_path, capsys, caplog
):
    # A labelling loop keeps one sheet and labels a few more rows each round: every earlier run was refused
    # ("not the ones this run was trained with"), and a moved file needed data_path= every time (a trial).
    rows = own_rows(120, seed=13)
    data, run = _file_run(tmp_path, tiny_bert_dir, rows, "sheet.csv", copy=True)
    assert main(["eval", f"run={run}", "plots=false"]) == 0
    before = json.loads((run / "eval.json").read_text())["metrics"]
    write_rows(data, rows + own_rows(30, seed=14))  # the next round's rows added
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.coverage=0.7"]) == 0
    assert main(["review", f"run={run}"]) == 0
    assert main(["eval", f"run={run}", "plots=false"]) == 0
    assert json.loads((run / "eval.json").read_text())["metrics"] == before  # the run's own test rows
    data.unlink()  # gone altogether
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.coverage=0.8"]) == 0
    assert main(["eval", f"run={run}", "plots=false"]) == 0
    assert "rows.parquet" not in caplog.text  # the copy was whole: nothing said
    # a copy whose rows are not the run's (edited, or damaged) is set aside with a note, and the data read
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(run / "rows.parquet")
    texts = table.column("text").to_pylist()
    edited = table.set_column(1, "text", pa.array([texts[0] + " x", *texts[1:]], pa.string()))
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), run / "rows.parquet")
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.coverage=0.7"]) == 2  # the file is gone
    assert "is not the run's copy of its rows (its " in caplog.text
    assert "records data.path=" in capsys.readouterr().err
    (run / "rows.parquet").write_bytes(b"PAR1 not parquet")
    caplog.clear()
    assert main(["calibrate", f"run={run}", "uncertainty.abstain.coverage=0.7"]) == 2
    assert "is not the run's copy of its rows (its bytes are not the ones the run wrote)" in caplog.text


def test_an_operating_point_for_one_label_is_set_without_retraining_and_predict_follows_it(
    tickets, tmp_path, capsys
):
    # a moderation team's trial found no way to say "answer 'abusive' at >= 90 % precision" or "catch 80 %"
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tickets[1], run)
    bad = ["calibrate", f"run={run}", "uncertainty.decision.label=pet", "uncertainty.decision.threshold=0.2"]
    assert main(bad) == 2
    assert (
        "decision.label=pet is not one of the run's 3 labels (money, music, pets). Did you mean 'pets'?"
        in (capsys.readouterr().err)
    )
    asked = ["uncertainty.decision.label=pets", "uncertainty.decision.threshold=0.2"]
    assert main(["calibrate", f"run={run}", *asked]) == 0
    said = capsys.readouterr().out
    assert (
        "decision: none (the most probable label) -> 'pets' where its probability >= 0.2 (held-out " in said
    )
    assert from_yaml(run / "config.yaml").uncertainty.decision.label == "pets"  # the run's record follows
    texts = tmp_path / "new.txt"
    texts.write_text("\n".join(r["text"] for r in own_rows(30, seed=21)) + "\n")
    out = tmp_path / "p.jsonl"
    assert main(["predict", f"run={run}", f"input={texts}", f"out={out}"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for r in rows:
        p = r["probs"]
        want = "pets" if p["pets"] >= 0.2 else max(("money", "music"), key=p.__getitem__)
        assert r["label"] == want and r["confidence"] == pytest.approx(p[want])
    assert any(r["label"] != max(r["probs"], key=r["probs"].get) for r in rows)  # not the most probable
    # back to the most probable label: the rule dropped
    assert (
        main(
            [
                "calibrate",
                f"run={run}",
                "uncertainty.decision.label=null",
                "uncertainty.decision.threshold=null",
            ]
        )
        == 0
    )
    assert "-> none (the most probable label)" in capsys.readouterr().out
