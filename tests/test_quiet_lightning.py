"""What ``ucse train`` keeps off the terminal: Lightning's notes about the run folder ucse itself manages."""

from __future__ import annotations

import logging
import warnings

import pytest

from ucse.pipeline import quiet_lightning

NOTES = [
    "Checkpoint directory /r/checkpoints exists and is not empty.",
    "Experiment logs directory runs/kill3/logs/ exists and is not empty. Previous log files in this "
    "directory will be deleted when the new ones are saved!",
]


@pytest.fixture(autouse=True)
def _process_state(monkeypatch):
    """quiet_lightning sets logger levels and an environment variable for the process: undone after."""
    names = (
        "lightning.pytorch.utilities.rank_zero",
        "lightning.fabric.utilities.rank_zero",
        "ucse.training.run",
    )
    levels = {n: logging.getLogger(n).level for n in names}
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize("note", NOTES)
def test_lightnings_notes_on_the_run_folder_are_not_shown(note):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_lightning()  # adds its filters in front of "always"
        warnings.warn(note, UserWarning, stacklevel=1)
        warnings.warn("another warning", UserWarning, stacklevel=1)  # the rest still show
    assert [str(w.message) for w in seen] == ["another warning"]
