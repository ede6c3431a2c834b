"""Fixtures of the training tests."""

from __future__ import annotations

import pytest

from ucse.training.module import UcseModule


@pytest.fixture
def trained_steps(monkeypatch) -> list[int]:
    """The global step of every training step run in this process from now on (a resumed run's are few)."""
    steps, real = [], UcseModule.training_step

    def counting(self, batch, batch_idx):
        steps.append(self.global_step)
        return real(self, batch, batch_idx)

    monkeypatch.setattr(UcseModule, "training_step", counting)
    return steps
