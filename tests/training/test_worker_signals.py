"""Ctrl-C with DataLoader workers (``num_workers=2``): the run stops with exit 130 and its one line.

Reference: the command watched from outside (exit status, output), and a forked process's exit status.
The workers are forked from the training process and inherited ucse's Ctrl-C handler, whose stop torch's
worker loop does not expect (it ends quietly on ``KeyboardInterrupt`` only): each printed a traceback, and
the run then hung or failed on "DataLoader worker exited unexpectedly"; a stop raised inside the DataLoader's
finalizer was swallowed (now re-raised at the next batch, ``ucse/training/stops.py``).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from stopped_run import output, training_run
from torch.utils.data import DataLoader

from ucse.interrupt import interrupt_as_error, stop_on_sigterm
from ucse.training.datamodule import WorkersWithoutCtrlC


def _ctrl_c_blocked(batch: list[int]) -> bool:
    """Collate, run in the worker: whether Ctrl-C is blocked there."""
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


class _CtrlCWhileStarting(WorkersWithoutCtrlC):
    started = False

    def _get_iterator(self):
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # Ctrl-C as the workers are forked
        it = super()._get_iterator()
        for _ in range(50):  # bytecodes and sleeps at which an unblocked Ctrl-C would be raised
            time.sleep(0.01)
        self.started = True  # reached only where the Ctrl-C was held while the workers started
        return it


def test_workers_start_deaf_to_ctrl_c_and_a_ctrl_c_meanwhile_reaches_the_caller():
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.SIGINT not in before
    # torch's own workers take Ctrl-C (the reference); ours never do, and the caller's mask is as it was
    assert list(DataLoader(range(4), batch_size=2, num_workers=2, collate_fn=_ctrl_c_blocked)) == [False] * 2
    assert (
        list(WorkersWithoutCtrlC(range(4), batch_size=2, num_workers=2, collate_fn=_ctrl_c_blocked))
        == [True] * 2
    )
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
    # a Ctrl-C that arrives while they start is held, then raised in the caller
    loader = _CtrlCWhileStarting(range(4), batch_size=2, num_workers=2, collate_fn=_ctrl_c_blocked)
    with pytest.raises(KeyboardInterrupt):
        iter(loader)
        for _ in range(500):  # Python runs the handler between bytecodes
            time.sleep(0.01)
    assert loader.started
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 3), (signal.SIGTERM, -signal.SIGTERM)])
def test_a_process_forked_in_the_block_gets_pythons_own_signal_behaviour(signum, status):
    # what a DataLoader worker, forked from the training process, meets on Ctrl-C or SIGTERM
    with interrupt_as_error(), stop_on_sigterm():
        pid = os.fork()
        if pid == 0:  # the child: report what the signal did, by exit status
            code = 1
            try:
                os.kill(os.getpid(), signum)
                for _ in range(500):  # Python runs the handler between bytecodes, not in kill(): wait
                    time.sleep(0.01)
                code = 2  # nothing happened
            except KeyboardInterrupt:
                code = 3  # Python's Ctrl-C
            except BaseException:  # noqa: BLE001 - ucse's stop, in a process that does not own the run
                code = 4
            os._exit(code)
        _, raw = os.waitpid(pid, 0)
    got = os.waitstatus_to_exitcode(raw)  # negative: killed by that signal
    assert got == status


@pytest.mark.slow  # a run with two DataLoader workers, started and stopped (~15 s)
def test_ctrl_c_with_dataloader_workers_is_one_line_and_no_traceback(tiny_task_root, tiny_bert_dir, tmp_path):
    with training_run(tiny_task_root, tiny_bert_dir, tmp_path, "num_workers=2") as proc:
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the training process and its workers
        code = proc.wait(timeout=60)
        # The workers' last words, if any: wait until no process of the group is left (not a fixed sleep,
        # which a slow machine outlasts), at most 20 s (an unreaped zombie still counts as one).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        out = output(tmp_path)
        assert code == 130, out[-3000:]
        # No worker died of ucse's stop, and none swallowed in a finalizer was printed. (torch's own worker
        # shutdown can still print its atexit "worker killed by signal" after the line: not ucse's to change.)
        assert "TerminatedError" not in out and "Exception ignored in: <function _Multi" not in out, out[
            -3000:
        ]
        said = [line for line in out.splitlines() if line.startswith("error: ")]
        assert len(said) == 1 and "ckpt_path=last" in said[0], said
