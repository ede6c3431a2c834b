"""A training run gives the process's torch flags back as it found them (Lightning sets them for good)."""

from __future__ import annotations

import os
from contextlib import nullcontext

import lightning as L
import pytest
import torch
import torch.utils.deterministic
from toy_tasks import LEARNS

from ucse.training import train
from ucse.training.torch_flags import CUBLAS_ENV, SEED_ENV, run_torch_flags


def _flags() -> tuple:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.benchmark,
        torch.utils.deterministic.fill_uninitialized_memory,
        os.environ.get(CUBLAS_ENV),
    )


@pytest.fixture
def restore_flags():
    """Whatever a test sets, the next test starts from the flags this one found."""
    saved = _flags()
    yield
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    torch.backends.cudnn.benchmark = saved[2]
    torch.utils.deterministic.fill_uninitialized_memory = saved[3]
    if saved[4] is None:
        os.environ.pop(CUBLAS_ENV, None)
    else:
        os.environ[CUBLAS_ENV] = saved[4]


def _trainer(deterministic: bool) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        deterministic=deterministic,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


@pytest.mark.parametrize("fails", [False, True])
def test_lightning_deterministic_flags_are_undone(restore_flags, monkeypatch, fails):
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.benchmark = True
    torch.utils.deterministic.fill_uninitialized_memory = True
    monkeypatch.delenv(CUBLAS_ENV, raising=False)
    before = _flags()
    with pytest.raises(RuntimeError) if fails else nullcontext():
        with run_torch_flags():
            _trainer(deterministic=True)
            # what the run trains under: Lightning's deterministic algorithms, without the NaN fill
            assert torch.are_deterministic_algorithms_enabled()
            assert not torch.utils.deterministic.fill_uninitialized_memory
            assert os.environ.get(CUBLAS_ENV) is not None and not torch.backends.cudnn.benchmark
            if fails:
                raise RuntimeError("the run failed")
    assert _flags() == before
    assert torch.utils.deterministic.fill_uninitialized_memory  # the caller's fill is back


def test_a_callers_own_deterministic_setting_survives_a_run(restore_flags, monkeypatch):
    """Trainer(deterministic=False) (the GPU runs) switches deterministic algorithms *off*: put them back."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    monkeypatch.setenv(CUBLAS_ENV, ":16:8")
    before = _flags()
    with run_torch_flags():
        _trainer(deterministic=False)
        assert not torch.are_deterministic_algorithms_enabled()
    assert _flags() == before


def test_train_leaves_the_flags_as_it_found_them(restore_flags, tiny_run_cfg, monkeypatch):
    torch.use_deterministic_algorithms(False)
    monkeypatch.delenv(CUBLAS_ENV, raising=False)
    before = _flags()
    train(tiny_run_cfg(*LEARNS, "optim.epochs=1"))
    assert _flags() == before


@pytest.mark.parametrize("head", ["textcnn", "auto"])  # Lightning's loop, and head=auto's in-memory fits
def test_a_run_gives_back_the_callers_random_streams_and_seed_variables(tiny_run_cfg, monkeypatch, head):
    import random

    import numpy as np

    for key in SEED_ENV:
        monkeypatch.delenv(key, raising=False)

    def draws() -> tuple:
        return random.random(), float(np.random.rand()), float(torch.rand(()))

    def seeded(seed: int) -> None:
        random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)

    seeded(123)
    want = draws()  # what the caller's streams give next
    seeded(123)
    train(tiny_run_cfg(*LEARNS, "optim.epochs=1", f"head={head}", "seed=7"))
    assert draws() == want  # not seed 7's stream, nor wherever the run left it
    assert all(key not in os.environ for key in SEED_ENV)
