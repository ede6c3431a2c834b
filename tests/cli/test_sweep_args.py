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
