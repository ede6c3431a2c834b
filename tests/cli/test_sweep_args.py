"""``ucse sweep`` passes every top-level train field through; anything else that is no sweep option fails."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from ucse.cli.sweep import TRAIN_FIELDS, parse
from ucse.config import ConfigError, TrainConfig


def test_every_top_level_train_field_passes_through():
    argv = ["devices=2", "strategy=ddp", "recipe=paper", "device=cpu", "optim.lr=1e-3", "seeds=1"]
    opts, rest = parse(argv)
    assert opts["seeds"] == "1" and rest == argv[:5]
    own = {"seed", "output_dir", "task", "backbone"}  # set by the sweep itself
    assert TRAIN_FIELDS == {f.name for f in fields(TrainConfig)} - own


@pytest.mark.parametrize("token", ["sed=1", "seed=3", "output_dir=x"])
def test_other_keys_are_refused_naming_the_options(token):
    with pytest.raises(ConfigError, match="Unknown sweep option"):
        parse([token])


def test_a_sweep_without_test_rows_or_with_an_odd_eval_flag_is_refused_before_training(capsys):
    from ucse.cli.sweep import main

    # data.test_fraction=0 ended in a KeyError traceback after the first run; eval=ture was taken as false
    for argv, message in (
        (["data.test_fraction=0", "seeds=1", "variants=logreg"], "data.test_fraction=0: a sweep tabulates"),
        (["eval=ture", "seeds=1", "variants=logreg"], "eval='ture': give eval=true or eval=false"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


def test_a_killed_run_resumes_only_from_a_checkpoint(tmp_path, monkeypatch):
    # ckpt_path=last was added whenever the run folder existed: a head=logreg run (fitted in memory, no
    # checkpoint) killed after writing its config.yaml then stopped the whole sweep
    from types import SimpleNamespace

    import ucse.pipeline
    from ucse.cli.sweep import run_sweep

    task = "Banking77Classification"
    for variant in ("logreg", "linear-base"):
        (tmp_path / task / variant / "seed0").mkdir(parents=True)
    (tmp_path / task / "linear-base" / "seed0" / "checkpoints").mkdir()
    (tmp_path / task / "linear-base" / "seed0" / "checkpoints" / "last.ckpt").write_bytes(b"")
    seen = {}

    def fake_run(cfg):
        seen[cfg.output_dir.split("/")[-2]] = cfg.ckpt_path
        return (SimpleNamespace(metrics={"test": {"accuracy": 0.5}}),)

    monkeypatch.setattr(ucse.pipeline, "run_training", fake_run)
    run_sweep([task], "minilm-l6", 1, ["logreg", "linear-base"], tmp_path, [])
    assert seen == {"logreg": None, "linear-base": "last"}


def test_a_sweep_of_your_own_file_is_named_after_it_and_never_passes_for_another_task(
    tmp_path, tiny_bert_dir, tiny_task_root, capsys, caplog
):
    # `ucse sweep data.path=tickets.csv` filed its runs and its table row under Banking77Classification (the
    # default task= won over the file), and a later Banking77 sweep into the same out= skipped them as done
    import shutil

    from toy_tasks import own_rows, write_rows

    from ucse.cli.sweep import main

    path = write_rows(tmp_path / "tickets.csv", own_rows(60))
    out = tmp_path / "sweeps"
    common = [
        f"backbone.model={tiny_bert_dir}",
        "backbone.name=tiny-bert",
        "backbone.precision=fp32",
        "variants=logreg",
        f"out={out}",
        f"cache.dir={tmp_path / 'cache'}",
    ]
    assert main([f"data.path={path}", "seeds=1", *common]) == 0
    table = capsys.readouterr().out
    assert "| tickets |" in table and "Banking77" not in table
    done = out / "tickets" / "logreg" / "seed0"
    assert (done / "metrics.json").is_file()
    assert not (out / "Banking77Classification").exists()
    # a run stopped between its head and its profile was skipped as done, and stayed without a profile
    saved = (done / "head" / "calibration.json").read_text()
    review = (done / "label_review.csv").read_text()
    for name in ("head/calibration.json", "head/calibration.safetensors", "label_review.csv"):
        (done / name).unlink(missing_ok=True)  # what a run stopped before its profile lacks
    assert main([f"data.path={path}", "seeds=1", *common]) == 0
    assert "has no uncertainty profile (a stopped run): fitting it now" in caplog.text
    assert json.loads((done / "head" / "calibration.json").read_text()) == json.loads(saved)
    assert (done / "label_review.csv").read_text() == review
    caplog.clear()
    # the same file moved: a resume, said in a warning
    moved = tmp_path / "moved" / "tickets.csv"
    moved.parent.mkdir()
    shutil.move(path, moved)
    # ... and its run stopped before its profile: refitted from the run's own copy of its rows
    for name in ("head/calibration.json", "head/calibration.safetensors", "label_review.csv"):
        (done / name).unlink(missing_ok=True)
    assert main([f"data.path={moved}", "seeds=1", *common]) == 0
    assert "kept as done (the same task name)" in caplog.text and str(path) in caplog.text
    assert json.loads((done / "head" / "calibration.json").read_text()) == json.loads(saved)
    # without that copy (a run from before it) the refit cannot reread the old path, which must not stop the
    # sweep (it did, with "data.path=<the old path> does not exist")
    (done / "rows.parquet").unlink()
    for name in ("head/calibration.json", "head/calibration.safetensors", "label_review.csv"):
        (done / name).unlink(missing_ok=True)
    caplog.clear()
    assert main([f"data.path={moved}", "seeds=1", *common]) == 0
    assert "its profile could not be fitted" in caplog.text and f"`ucse calibrate run={done}`" in caplog.text
    shutil.copy(moved, path)  # back where the run was trained (the steps below name it)
    # a finished run of another task where this sweep's would go: refused before any run is trained
    shutil.copytree(
        out / "tickets" / "logreg" / "seed0", out / "Banking77Classification" / "logreg" / "seed1"
    )
    capsys.readouterr()
    assert main(["task=Banking77Classification", f"data.root={tiny_task_root}", "seeds=2", *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a finished run of another task ('tickets'" in err and len(err.splitlines()) == 1
    assert not (out / "Banking77Classification" / "logreg" / "seed0").exists()  # nothing trained first
