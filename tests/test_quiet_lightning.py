"""What ``ucse train`` keeps off the terminal: Lightning's notes about the run folder ucse itself manages."""

from __future__ import annotations

import logging
import os
import warnings

import pytest

from ucse.pipeline import quiet_lightning

NOTES = [
    "Checkpoint directory /r/checkpoints exists and is not empty.",
    "Experiment logs directory runs/kill3/logs/ exists and is not empty. Previous log files in this "
    "directory will be deleted when the new ones are saved!",
]
NAMES = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero", "ucse.training.run")


@pytest.mark.parametrize("note", NOTES)
def test_lightnings_notes_on_the_run_folder_are_not_shown(note):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_lightning():  # adds its filters in front of "always"
            warnings.warn(note, UserWarning, stacklevel=1)
            warnings.warn("another warning", UserWarning, stacklevel=1)  # the rest still show
    assert [str(w.message) for w in seen] == ["another warning"]


def test_the_callers_filters_levels_and_progress_bars_come_back(monkeypatch):
    # a notebook that fitted a UcseClassifier lost its own Lightning warnings and info lines for good
    # (a review of the estimator: 5 ignore filters and three logger levels stayed behind)
    from transformers.utils import logging as hf_logging

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    levels = {n: logging.getLogger(n).level for n in NAMES}
    monkeypatch.setattr(logging.getLogger(NAMES[0]), "level", logging.INFO)
    hf_logging.enable_progress_bar()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        with quiet_lightning():
            assert logging.getLogger(NAMES[0]).level == logging.WARNING
            assert not hf_logging.is_progress_bar_enabled()
            warnings.warn(NOTES[0], UserWarning, stacklevel=1)
        warnings.warn(NOTES[0], UserWarning, stacklevel=1)  # the caller's "always" again
        assert warnings.filters == filters
    assert [str(w.message) for w in seen] == [NOTES[0]]
    assert logging.getLogger(NAMES[0]).level == logging.INFO
    assert {n: logging.getLogger(n).level for n in NAMES[1:]} == {n: levels[n] for n in NAMES[1:]}
    assert hf_logging.is_progress_bar_enabled() and "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
