"""``ucse sweep`` passes every top-level train field through; anything else that is no sweep option fails."""

from __future__ import annotations

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
