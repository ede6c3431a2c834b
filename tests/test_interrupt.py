"""Ctrl-C during training: ``KeyboardInterrupt`` for the Python caller with what the run left, SIGINT
handled afterwards as before (Lightning alone ignored it for the rest of the process and called
``sys.exit(1)``), an ignored SIGINT left ignored, and no ``except Exception`` swallowing a stop."""

from __future__ import annotations

import os
import signal

import pytest

from ucse.interrupt import TerminatedError, before_stop, interrupt_as_error, stop_on_sigterm
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


def test_a_stop_runs_the_before_stop_actions_first_and_every_signal_stops():
    order: list[str] = []
    with interrupt_as_error(), before_stop(lambda: order.append("ended ranks")):
        for _ in range(2):  # a stop swallowed where Python ignores exceptions: the next one still stops
            with pytest.raises(TerminatedError):
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(10))
            order.append("stopped")
    assert order == ["ended ranks", "stopped", "ended ranks", "stopped"]
    with before_stop(lambda: 1 / 0), pytest.raises(TerminatedError), stop_on_sigterm():  # a failing action
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10))


def test_a_run_keeps_ucses_sigterm_handler_not_lightnings(tiny_run_cfg, monkeypatch):
    # Lightning's handler broadcasts from inside the handler and deadlocked 2-process runs
    # (tests/training/test_ddp_stop.py); during fit and test SIGTERM must reach ucse's
    seen = []
    real = UcseModule.training_step

    def training_step(self, batch, batch_idx):
        seen.append(signal.getsignal(signal.SIGTERM))
        return real(self, batch, batch_idx)

    monkeypatch.setattr(UcseModule, "training_step", training_step)
    before = signal.getsignal(signal.SIGTERM)
    train(tiny_run_cfg("recipe=paper", "head=textcnn", "uncertainty.enabled=false", "optim.epochs=1"))
    handlers = {getattr(h, "__qualname__", repr(h)) for h in seen}
    assert handlers == {"_raising.<locals>.handler"}, handlers
    assert signal.getsignal(signal.SIGTERM) is before  # given back after the run
