"""Run folders: a finished run is never changed by accident, overwrite replaces it whole, resume is exact."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch

from ucse import atomic
from ucse.config import ConfigError
from ucse.training import train
from ucse.training.module import RNG_KEY, UcseModule

ROOT = Path(__file__).resolve().parents[2]


def load_entry_point(name: str):
    """``train.py`` / ``eval.py`` at the repository root as a module (their ``main(argv)`` is the command)."""
    spec = importlib.util.spec_from_file_location(f"_ucse_{name}_entry", ROOT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train_cli = load_entry_point("train")


def _one_error_line(stderr: str) -> bool:
    """One ``error:`` line and no traceback (progress bars of the loading may precede it)."""
    return sum(line.startswith("error: ") for line in stderr.splitlines()) == 1 and "Traceback" not in stderr


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def finished(tiny_run_cfg):
    """A finished one-epoch run in ``output_dir`` and the factory that made it."""
    result = train(tiny_run_cfg("optim.epochs=1"))
    return result.run_dir, tiny_run_cfg


@pytest.fixture
def argv(tiny_task_root, tiny_bert_dir, tmp_path):
    """The real command line of the fixture's run, plus extra overrides."""

    def make(*extra: str) -> list[str]:
        return [
            f"data.root={tiny_task_root}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "optim.batch_size=16",
            "optim.epochs=1",
            "progress_bar=false",
            "uncertainty.enabled=false",
            f"output_dir={tmp_path / 'run'}",
            *extra,
        ]

    return make


def test_a_finished_run_is_refused_and_left_unchanged(finished, argv, capsys):
    run, _ = finished
    before = _snapshot(run)
    # Another task into the same folder: refused before anything is loaded or written (config.yaml too).
    code = train_cli.main(argv("task.name=Other", "optim.lr=1e-3"))
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err)
    # train() writes no profile: the run is named as one stopped before it (a finished run with a profile is
    # offered ckpt_path=last too: tests/bad_inputs.py)
    assert "overwrite=true" in err and f"ucse calibrate run={run}" in err and "ckpt_path" not in err
    assert _snapshot(run) == before


def test_resuming_is_offered_only_where_a_checkpoint_is_there(tmp_path):
    # a trial followed "ckpt_path=last to resume it" on a head=auto run, which writes no checkpoint
    from ucse.config import build_config
    from ucse.training.run_folder import check_run_dir

    run = tmp_path / "run"
    (run / "head").mkdir(parents=True)
    for name in ("config.yaml", "metrics.json", "head/calibration.json"):
        (run / name).write_text("{}")
    cfg = build_config([f"output_dir={run}"])
    with pytest.raises(ConfigError) as err:
        check_run_dir(cfg, run)
    assert "overwrite=true to replace it whole or choose another output_dir" in str(err.value)
    assert "ckpt_path" not in str(err.value)
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    with pytest.raises(ConfigError, match="ckpt_path=last to resume it, or choose another output_dir"):
        check_run_dir(cfg, run)


def test_a_folder_of_other_files_is_refused(tiny_run_cfg, tmp_path):
    mine = tmp_path / "run"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for extra in ((), ("overwrite=true",)):
        with pytest.raises(ConfigError, match="no ucse run .*notes.txt"):
            train(tiny_run_cfg(*extra))
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_a_folder_with_a_users_own_config_yaml_is_refused(tiny_run_cfg, tmp_path):
    # a config.yaml was taken for a ucse run's: the user's config.yaml and logs/ were trained over
    mine = tmp_path / "run"
    (mine / "logs").mkdir(parents=True)
    (mine / "config.yaml").write_text("model: resnet\n")
    (mine / "logs" / "metrics.csv").write_text("epoch,acc\n1,0.5\n")
    (mine / "notes.txt").write_text("keep me")
    before = _snapshot(mine)
    with pytest.raises(ConfigError, match=r"files a ucse run does not write \(notes.txt\)"):
        train(tiny_run_cfg())
    (mine / "notes.txt").unlink()
    before.pop("notes.txt")
    with pytest.raises(ConfigError, match="a config.yaml that is not a ucse run's"):
        train(tiny_run_cfg())
    assert _snapshot(mine) == before


def test_a_run_that_stopped_before_its_results_is_trained_again(finished):
    run, make = finished
    for name in ("metrics.json", "head", "checkpoints"):  # what a run killed while loading leaves: no results
        path = run / name
        if path.is_dir():
            for p in sorted(path.rglob("*"), reverse=True):
                p.unlink() if p.is_file() else p.rmdir()
            path.rmdir()
        else:
            path.unlink()
    assert train(make("optim.epochs=1")).run_dir == run and (run / "metrics.json").is_file()


def test_resume_with_other_optimiser_settings_is_refused(finished, tmp_path):
    # accepted before: config.yaml took the new lr / weight decay while the optimiser state kept the old ones
    run, make = finished
    before = _snapshot(run)
    for extra, field in (("optim.lr=0.5", "optim.lr"), ("optim.batch_size=8", "optim.batch_size")):
        with pytest.raises(ConfigError, match=rf"another 'optim' \({field}: "):
            train(make("optim.epochs=2", extra, "ckpt_path=last"))
    with pytest.raises(ConfigError, match=r"another 'head_precision'"):
        train(make("optim.epochs=2", "head_precision=bf16", "ckpt_path=last"))
    assert _snapshot(run) == before
    # a checkpoint of another run: its own config.yaml was never compared (seed, lr... all accepted)
    other = tmp_path / "other"
    with pytest.raises(ConfigError, match=r"is not a checkpoint of the run in .*other"):
        train(make("optim.epochs=2", f"output_dir={other}", f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}"))
    assert not other.exists()


def _last(run: Path) -> dict:
    return torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)


def test_overwrite_replaces_the_old_run_whole(finished, request):
    run, make = finished
    per_epoch = _last(run)["global_step"]  # optimiser steps of one epoch: the finished run trained one
    (run / "eval.json").write_text("{}")  # a stale artefact of the old run
    old = _snapshot(run)
    result = train(make("optim.epochs=2", "overwrite=true"))
    assert result.run_dir == run
    assert not (run / "eval.json").exists()
    new = _snapshot(run)
    for name in ("config.yaml", "metrics.json", "checkpoints/last.ckpt", "head/model.safetensors"):
        assert new[name] != old[name], name  # every part is the new run's (epochs=2), none the old one's
    assert json.loads(new["metrics.json"])["test"]
    # last.ckpt is the end of the new run's last epoch, whatever validation did in that epoch.
    assert (_last(run)["epoch"], _last(run)["global_step"]) == (1, 2 * per_epoch)
    assert not [p for p in run.parent.iterdir() if p.name.startswith(".")]  # no temporary sibling left
    # The replaced run resumes like any other, although its checkpoints were written under the temporary
    # name: it trains the third epoch only, continuing from the saved step.
    steps = request.getfixturevalue("trained_steps")
    longer = train(make("optim.epochs=3", "ckpt_path=last"))
    assert steps == list(range(2 * per_epoch, 3 * per_epoch))
    assert (_last(run)["epoch"], _last(run)["global_step"]) == (2, 3 * per_epoch)
    assert longer.metrics["best_checkpoint"] in {p.name for p in (run / "checkpoints").iterdir()}


def test_last_ckpt_is_the_last_epoch_even_when_validation_did_not_improve(tiny_run_cfg, request):
    # At lr=1e-12 an AdamW step (<= 1e-12) is below half an ulp of every weight (|w| > 1e-4 here), so the
    # weights, and the validation accuracy, are bit-identical every epoch on any CPU: only epoch 0 writes
    # a best checkpoint. Lightning 2.6 then left last.ckpt at epoch 0, and ckpt_path=last redid epochs.
    one = train(tiny_run_cfg("optim.epochs=3", "optim.lr=1e-12"))
    best = torch.load(one.run_dir / "checkpoints" / one.metrics["best_checkpoint"], weights_only=True)
    assert best["epoch"] == 0
    per_epoch = best["global_step"]
    assert (_last(one.run_dir)["epoch"], _last(one.run_dir)["global_step"]) == (2, 3 * per_epoch)
    steps = request.getfixturevalue("trained_steps")
    train(tiny_run_cfg("optim.epochs=4", "optim.lr=1e-12", "ckpt_path=last"))
    assert steps == list(range(3 * per_epoch, 4 * per_epoch))  # the fourth epoch only


def test_hidden_user_files_that_look_temporary_are_not_ours(tiny_run_cfg, tmp_path):
    # Issue 16: a folder holding only the user's `.draft.tmp` and `.precious.tmp/` was judged empty, and
    # the clean-up of a killed run's temporaries deleted both. Only ucse's own names are leftovers.
    mine = tmp_path / "run"
    (mine / ".precious.tmp").mkdir(parents=True)
    (mine / ".precious.tmp" / "notes.txt").write_text("keep me")
    (mine / ".draft.tmp").write_text("my draft")
    before = _snapshot(mine)
    for extra in ((), ("overwrite=true",)):
        with pytest.raises(ConfigError, match=r"no ucse run .*\.draft\.tmp, \.precious\.tmp"):
            train(tiny_run_cfg(*extra))
    assert _snapshot(mine) == before


def test_every_artifact_of_a_run_follows_the_umask(tiny_run_cfg):
    # safetensors writes its file 0600 whatever the umask: head/model.safetensors was the one exception.
    from ucse.pipeline import run_training

    old = os.umask(0o027)
    try:
        result, profile = run_training(tiny_run_cfg("optim.epochs=1"))
    finally:
        os.umask(old)
    assert profile is not None and (result.run_dir / "head" / "calibration.json").is_file()
    wrong = {
        str(p.relative_to(result.run_dir)): oct(p.stat().st_mode & 0o777)
        for p in result.run_dir.rglob("*")
        if p.stat().st_mode & 0o777 != (0o750 if p.is_dir() else 0o640)
    }
    assert wrong == {}


def test_a_failed_overwrite_keeps_the_old_run(finished, monkeypatch):
    run, make = finished
    before = _snapshot(run)

    def boom(*a, **k):
        raise RuntimeError("killed")

    monkeypatch.setattr("ucse.training.run.save_head", boom)
    with pytest.raises(RuntimeError, match="killed"):
        train(make("overwrite=true"))
    assert _snapshot(run) == before
    assert not [p for p in run.parent.iterdir() if p.name.startswith(".")]


def test_resume_with_another_head_is_refused(finished):
    run, make = finished
    before = _snapshot(run)
    with pytest.raises(ConfigError, match=r"another 'head' \(head.type: 'textcnn' in the run, 'linear' now"):
        train(make("head=linear", "ckpt_path=last"))
    assert _snapshot(run) == before


def test_a_truncated_checkpoint_is_refused_in_one_line(finished):
    run, make = finished
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    with pytest.raises(ConfigError, match="last.ckpt is unreadable .* cut short by a kill"):
        train(make("optim.epochs=2", "ckpt_path=last"))


def test_a_checkpoint_that_is_not_a_training_checkpoint_is_refused(finished):
    # a list gave an AttributeError; one without epoch / global_step trained more epochs on top, silently
    run, make = finished
    last = run / "checkpoints" / "last.ckpt"
    good = torch.load(last, weights_only=True)
    assert {"epoch", "global_step", "loops", "state_dict"} <= set(good)  # what Lightning writes
    for bad, what in (
        ([1, 2, 3], "no epoch, global_step, loops"),
        ({k: v for k, v in good.items() if k != "epoch"}, "no epoch"),
        ({**good, "state_dict": {k: 1 for k in good["state_dict"]}}, "a state_dict that is not a mapping"),
        ({**good, "epoch": "1"}, "epoch is not a count"),
        ({**good, "global_step": -3}, "global_step is not a count"),
    ):
        torch.save(bad, last)
        with pytest.raises(
            ConfigError, match=f"last.ckpt is not a training checkpoint of this program .{what}"
        ):
            train(make("optim.epochs=2", "ckpt_path=last"))


def test_a_stop_while_last_ckpt_is_written_keeps_the_best_it_names(tiny_run_cfg, tmp_path, monkeypatch):
    # A stop (SIGTERM, Ctrl-C, an error) raised between the new best's write and last.ckpt's: the fit's
    # teardown removed the previous best, which the previous last.ckpt still names.
    from ucse.training.checkpoints import RelocatableCheckpoint

    seen = {"best": None}
    real = RelocatableCheckpoint._save_last_checkpoint

    def stop_after_a_new_best(self, trainer, candidates):
        if seen["best"] is not None and self.best_model_path != seen["best"]:
            raise RuntimeError("stopped while writing last.ckpt")
        seen["best"] = self.best_model_path
        return real(self, trainer, candidates)

    monkeypatch.setattr(RelocatableCheckpoint, "_save_last_checkpoint", stop_after_a_new_best)
    with pytest.raises(RuntimeError, match="stopped while writing"):
        train(
            tiny_run_cfg(
                "optim.lr=1e-2", "optim.epochs=6", "optim.batch_size=8", f"output_dir={tmp_path / 'r'}"
            )
        )
    last = torch.load(tmp_path / "r" / "checkpoints" / "last.ckpt", weights_only=True)
    named = [v["best_model_path"] for v in last["callbacks"].values() if "best_model_path" in v]
    assert named and Path(named[0]).name and (tmp_path / "r" / "checkpoints" / Path(named[0]).name).is_file()


def test_a_resume_whose_best_checkpoint_is_gone_is_refused_not_shipped_as_the_last_epoch(finished):
    # validate(ckpt_path=None) scored the current (last) weights and the run shipped them as its best
    run, make = finished
    for best in (run / "checkpoints").glob("best-*.ckpt"):
        best.unlink()
    last = (run / "checkpoints" / "last.ckpt").read_bytes()
    with pytest.raises(ConfigError, match=r"The best checkpoint this run recorded \(best-.*\) is not in"):
        train(make("optim.epochs=2", "ckpt_path=last"))
    # refused before training: the epoch the resume would have trained for nothing was not trained
    assert (run / "checkpoints" / "last.ckpt").read_bytes() == last


def test_leftovers_of_a_kill_are_cleaned_by_the_next_run(finished):
    run, make = finished
    head = run / atomic.temp_name("head")
    head.mkdir()
    (head / "model.safetensors").write_bytes(b"half")
    (run / atomic.temp_name("metrics.json")).write_text("{")
    (run / "checkpoints" / atomic.temp_name("last.ckpt")).write_bytes(b"\0")
    train(make("optim.epochs=2", "ckpt_path=last"))
    assert not [p for p in run.rglob(".*")]


def test_checkpoints_hold_every_rng_state(finished):
    run, _ = finished
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)[RNG_KEY]
    assert set(state) == {"torch", "cuda", "numpy", "python"}
    assert state["numpy"]["keys"].shape == (624,) and len(state["python"][1]) == 625


def test_resume_equals_an_uninterrupted_run(tiny_run_cfg, tmp_path, monkeypatch):
    # Dropout and the sampled z draw from the global RNG, and the shuffle follows the epoch: without the RNG
    # state in the checkpoint and the epoch-keyed order the resumed epochs diverge.
    whole = train(tiny_run_cfg("optim.epochs=3", f"output_dir={tmp_path / 'whole'}"))

    class SimulatedKillError(Exception):
        pass

    def crash_at_epoch_2(self):
        if self.current_epoch == 2:
            raise SimulatedKillError

    monkeypatch.setattr(UcseModule, "on_train_epoch_start", crash_at_epoch_2)
    with pytest.raises(SimulatedKillError):
        train(tiny_run_cfg("optim.epochs=3", f"output_dir={tmp_path / 'parts'}"))
    assert not (tmp_path / "parts" / "head").exists()
    monkeypatch.undo()
    parts = train(tiny_run_cfg("optim.epochs=3", "ckpt_path=last", f"output_dir={tmp_path / 'parts'}"))
    a = (whole.run_dir / "head" / "model.safetensors").read_bytes()
    b = (parts.run_dir / "head" / "model.safetensors").read_bytes()
    assert a == b
    assert whole.metrics["test"] == parts.metrics["test"] and whole.metrics["val"] == parts.metrics["val"]


def test_after_a_resume_a_tie_keeps_the_earlier_epoch_as_an_uninterrupted_run(
    tiny_run_cfg, tmp_path, monkeypatch
):
    # lr 1e-6: validation accuracy stays where it starts, so every epoch ties the first. The resumed run
    # kept the tying epoch 2 in memory and shipped it under epoch 0's checkpoint name and scores.
    slow = ("optim.epochs=3", "optim.lr=1e-6")
    whole = train(tiny_run_cfg(*slow, f"output_dir={tmp_path / 'whole'}"))
    accs = [float(r["val/acc"]) for r in _csv_rows(whole.run_dir) if r.get("val/acc")]
    assert len(accs) == 3 and len(set(accs)) == 1  # the premise: every epoch ties

    def crash_at_epoch_2(self):
        if self.current_epoch == 2:
            raise RuntimeError("simulated kill")

    monkeypatch.setattr(UcseModule, "on_train_epoch_start", crash_at_epoch_2)
    with pytest.raises(RuntimeError, match="simulated kill"):
        train(tiny_run_cfg(*slow, f"output_dir={tmp_path / 'parts'}"))
    monkeypatch.undo()
    parts = train(tiny_run_cfg(*slow, "ckpt_path=last", f"output_dir={tmp_path / 'parts'}"))
    a = (whole.run_dir / "head" / "model.safetensors").read_bytes()
    assert (parts.run_dir / "head" / "model.safetensors").read_bytes() == a


def test_a_resume_keeps_the_log_of_the_epochs_before_the_kill(tiny_run_cfg, tmp_path, monkeypatch):
    # Lightning's CSV writer deleted metrics.csv on the resume: the log began at the resumed epoch.
    every = ("log_every_n_steps=1",)
    whole = train(tiny_run_cfg(*every, f"output_dir={tmp_path / 'whole'}"))

    real_step = UcseModule.training_step

    def step_then_maybe_crash(self, *args, **kwargs):
        if self.current_epoch == 2 and self.global_step > 15:  # mid-epoch: its first steps are in the log
            raise RuntimeError("simulated kill")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(UcseModule, "training_step", step_then_maybe_crash)
    with pytest.raises(RuntimeError, match="simulated kill"):
        train(tiny_run_cfg(*every, f"output_dir={tmp_path / 'parts'}"))
    monkeypatch.undo()
    killed = _csv_rows(tmp_path / "parts")
    assert {r["epoch"] for r in killed} == {"0", "1", "2"}  # the premise: the killed epoch had logged steps
    parts = train(tiny_run_cfg(*every, "ckpt_path=last", f"output_dir={tmp_path / 'parts'}"))
    # The same rows, in order, as the run that was never killed: none lost, the killed epoch's not doubled.
    # Values compared per epoch and column as written (the resumed steps are the same arithmetic).
    got, want = _csv_rows(parts.run_dir), _csv_rows(whole.run_dir)
    assert [(r["epoch"], r["step"], sorted(k for k, v in r.items() if v)) for r in got] == [
        (r["epoch"], r["step"], sorted(k for k, v in r.items() if v)) for r in want
    ]
    assert got == want


def _csv_rows(run: Path) -> list[dict]:
    import csv

    with (run / "logs" / "metrics.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_a_non_finite_loss_stops_training_and_writes_no_head(finished, argv, capsys):
    run, _ = finished
    code = train_cli.main(argv("optim.lr=1e30", "overwrite=true"))
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err)
    assert "non-finite loss at step" in err and "lower optim.lr" in err and "No head was written" in err
    # The failed overwrite left the old (finite) run in place, and no temporary folder.
    assert (run / "head" / "model.safetensors").is_file()
    assert not [p for p in run.parent.iterdir() if p.name.startswith(".")]


def test_a_non_finite_loss_in_a_fresh_folder_leaves_no_head(tiny_run_cfg, tmp_path):
    with pytest.raises(ValueError, match=r"non-finite loss at step \d+ \(epoch 0"):
        train(tiny_run_cfg("optim.lr=1e30", f"output_dir={tmp_path / 'nan'}"))
    assert not (tmp_path / "nan" / "head").exists() and not (tmp_path / "nan" / "metrics.json").exists()


def test_the_deferred_non_finite_check_names_the_same_step_and_terms(tiny_run_cfg, tmp_path, monkeypatch):
    # On an accelerator the first bad step is recorded on the device and read every few steps (no per-step
    # sync); forced here on CPU, it must report exactly what the per-step check reports.
    with pytest.raises(ValueError, match="non-finite loss") as per_step:
        train(tiny_run_cfg("optim.lr=1e30", f"output_dir={tmp_path / 'a'}"))
    monkeypatch.setattr(UcseModule, "finite_check_every", 3)
    with pytest.raises(ValueError, match="non-finite loss") as deferred:
        train(tiny_run_cfg("optim.lr=1e30", f"output_dir={tmp_path / 'b'}"))
    head = str(per_step.value).split("; likely cause")[0]
    assert head == str(deferred.value).split("; likely cause")[0]
    assert "likely cause: the head's weights diverged" in str(deferred.value)
    assert not (tmp_path / "b" / "head").exists()


def test_the_layout_names_what_a_run_writes(finished):
    """Every top-level entry of a finished run is one RunFolder names, and the files it names exist."""
    from ucse.config.run_layout import RunFolder

    run_dir, _ = finished
    run = RunFolder(run_dir)
    assert run.config.is_file() and run.metrics.is_file() and run.head.is_dir()
    assert run.last_checkpoint.is_file() and run.logs.is_dir()
    named = {RunFolder.CONFIG, RunFolder.METRICS, RunFolder.HEAD, RunFolder.CHECKPOINTS, RunFolder.HELDOUT}
    named |= {RunFolder.LOGS, RunFolder.ROWS}
    assert run.rows.is_file()
    assert {p.name for p in run_dir.iterdir()} <= named  # hidden lock files sit beside the folder, not in it
    assert (
        run.eval_report("test").name == "eval.json"
        and run.eval_report("validation").name == "eval-validation.json"
    )


def test_a_resume_on_other_rows_is_refused(tiny_bert_dir, tmp_path):
    # trained on a file, the file rewritten with other rows, resumed: it finished silently on the new rows
    from toy_tasks import own_rows, write_rows

    from ucse.config import build_config

    data = write_rows(tmp_path / "d.csv", own_rows(90, seed=1))

    def cfg(*extra):
        return build_config(
            [f"data.path={data}", f"backbone.model={tiny_bert_dir}", "backbone.precision=fp32",
             "head=textcnn", "recipe=paper", "optim.batch_size=16", "progress_bar=false",
             f"output_dir={tmp_path / 'run'}", *extra]
        )  # fmt: skip

    class SimulatedKillError(Exception):
        pass

    def crash_at_epoch_1(self):
        if self.current_epoch == 1:
            raise SimulatedKillError

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(UcseModule, "on_train_epoch_start", crash_at_epoch_1)
        with pytest.raises(SimulatedKillError):
            train(cfg("optim.epochs=2"))
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    assert set(last["ucse_data_fingerprints"]) == {"train", "validation", "test"}
    write_rows(data, own_rows(90, seed=2))  # other rows
    with pytest.raises(
        ConfigError, match=r"last.ckpt was trained on other train and validation and test rows"
    ):
        train(cfg("optim.epochs=2", "ckpt_path=last"))
    write_rows(data, own_rows(90, seed=1))  # the rows it was trained on: resumes
    assert train(cfg("optim.epochs=2", "ckpt_path=last")).metrics["test"]


def test_the_same_command_resumes_a_recipe_auto_run(tiny_run_cfg):
    # recipe=auto sets the batch size (and epochs) from the data size into config.yaml: the command's own
    # 64 then differed from the run's 32 and "the same command plus ckpt_path=last" was refused
    run = train(tiny_run_cfg("recipe=auto", "head=linear", "optim.batch_size=64")).run_dir
    from ucse.config import from_yaml

    assert from_yaml(run / "config.yaml").optim.batch_size == 32  # what the schedule wrote
    (run / "metrics.json").unlink()  # as a run killed after its checkpoints, before its results
    for p in sorted((run / "head").rglob("*"), reverse=True):
        p.unlink()
    (run / "head").rmdir()
    assert train(tiny_run_cfg("recipe=auto", "head=linear", "optim.batch_size=64", "ckpt_path=last")).metrics
    with pytest.raises(ConfigError, match=r"another 'optim' \(optim.lr: "):  # what the run does not set
        train(tiny_run_cfg("recipe=auto", "head=linear", "optim.lr=0.5", "ckpt_path=last"))


def test_a_profiler_trace_of_a_run_that_stopped_early_is_its_own(finished):
    run, make = finished
    for name in ("metrics.json",):
        (run / name).unlink()
    import shutil

    shutil.rmtree(run / "head")
    shutil.rmtree(run / "checkpoints")
    (run / "fit-profile-[Strategy]SingleDeviceStrategy.training_step.pt.trace.json").write_text("{}")
    assert train(make("optim.epochs=1")).run_dir == run  # refused as "files a ucse run does not write"


def test_ckpt_path_last_without_a_checkpoint_says_it_trains_from_the_start(tiny_run_cfg, caplog):
    # a mistyped output_dir with ckpt_path=last trained afresh without a word (a researcher's trial)
    cfg = tiny_run_cfg("ckpt_path=last", "optim.epochs=1")
    assert cfg.head.type.value == "textcnn"  # recipe=paper's head, resolved by build_config (--cfg prints it)
    train(cfg)
    said = [r.getMessage() for r in caplog.records if "ckpt_path=last" in r.getMessage()]
    assert len(said) == 1 and "holds no last.ckpt" in said[0] and "training from the start" in said[0]


def test_a_backbone_that_cannot_load_leaves_no_folder(argv, tmp_path, capsys):
    # A folder with a config but no tokenizer or weights: the load fails in one line, and before it the run
    # folder held a config.yaml of a run that never started.
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    code = train_cli.main([*argv(), f"backbone.model={broken}"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err) and "broken-model" in err
    assert not (tmp_path / "run").exists()


def test_an_output_dir_that_cannot_be_made_is_named_by_its_setting(argv, tmp_path, capsys):
    # named the hidden lock file ('/proc/.x.ucse-lock') with a bare errno, not output_dir=
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code = train_cli.main([*argv(), f"output_dir={blocker / 'run'}"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err) and "ucse-lock" not in err
    assert f"output_dir={blocker / 'run'}: its folder {blocker} cannot be written" in err
    assert blocker.read_text() == "not a folder"
