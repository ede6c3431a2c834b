"""Ctrl-C during training: ``KeyboardInterrupt`` for the Python caller with what the run left, SIGINT
handled afterwards as before (Lightning alone ignored it for the rest of the process and called
``sys.exit(1)``), an ignored SIGINT left ignored, and no ``except Exception`` swallowing a stop."""

from __future__ import annotations

import os
import signal

import pytest

from ucse.interrupt import TerminatedError, interrupt_as_error
from ucse.training import train
from ucse.training.module import UcseModule


def _interrupt_at(monkeypatch, epoch: int, step: int) -> None:
    """Ctrl-C (a real SIGINT to this process) at ``step`` of ``epoch``."""
    real = UcseModule.training_step

    def training_step(self, batch, batch_idx):
        if self.current_epoch == epoch and batch_idx == step:
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, batch, batch_idx)

    monkeypatch.setattr(UcseModule, "training_step", training_step)


def test_ctrl_c_in_fit_raises_keyboard_interrupt_naming_the_checkpoint(tiny_run_cfg, monkeypatch, tmp_path):
    before = signal.getsignal(signal.SIGINT)
    _interrupt_at(monkeypatch, epoch=1, step=0)
    with pytest.raises(KeyboardInterrupt) as stopped:
        train(tiny_run_cfg("recipe=paper", "head=textcnn", "uncertainty.enabled=false"))
    message = str(stopped.value)
    assert message.startswith("interrupted (Ctrl-C); ") and "holds 1 of 3 epochs" in message, message
    assert "ckpt_path=last" in message
    # SIGINT works as before the run: not left ignored (Lightning's SIG_IGN) nor left to this module
    assert signal.getsignal(signal.SIGINT) is before is not signal.SIG_IGN
    assert not (tmp_path / "run" / "head").exists()


def test_an_ignored_sigint_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a non-interactive shell
    try:
        with interrupt_as_error():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)  # ignored: nothing is raised
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_within_the_block_ctrl_c_is_a_stop_that_except_exception_does_not_catch():
    with pytest.raises(TerminatedError) as stop, interrupt_as_error():
        try:
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs before the next bytecode
            sum(range(10))
        except Exception:  # noqa: BLE001 - what a library's error translation does
            pytest.fail("a stop was caught as an error")
    assert stop.value.signum == signal.SIGINT and stop.value.exit_code == 130


def test_ctrl_c_in_an_estimator_fit_offers_no_resume_of_its_temporary_folder(tiny_bert_dir, monkeypatch):
    from toy_tasks import own_rows

    from ucse.inference.classifier import UcseClassifier

    backbone = {"model": str(tiny_bert_dir), "name": "tiny-bert", "precision": "fp32", "batch_size": 64}
    optim = {"epochs": 3, "batch_size": 16}
    est = UcseClassifier(head="textcnn", device="cpu", overrides={"backbone": backbone, "optim": optim})
    rows = own_rows(120, seed=3)
    _interrupt_at(monkeypatch, epoch=1, step=0)
    with pytest.raises(KeyboardInterrupt) as stopped:
        est.fit([r["text"] for r in rows], [r["label"] for r in rows])
    assert str(stopped.value) == (
        "interrupted (Ctrl-C); nothing was kept (the estimator trained in a temporary folder)."
    )
