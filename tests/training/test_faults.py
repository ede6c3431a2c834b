"""Faults during training: a second run into the same folder, SIGTERM, Ctrl-C, a full disk, an unwritable
cache.

Each ends in one ``error:`` line with the fix (exit 2, or 143 for SIGTERM, 130 for Ctrl-C), leaves no
half-written artifact visible and keeps what was there before. The real processes (``python train.py``) are
paused at a chosen training step by a wrapper, so every race is hit deterministically, not by timing.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from ucse import atomic
from ucse.training.checkpoints import SafeCheckpointIO

ROOT = Path(__file__).resolve().parents[2]


def enospc() -> OSError:
    """What ``write()`` raises on a full disk: no file named (a fresh one each time: errors get annotated)."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# `python train.py ...`, except that with UCSE_TEST_HOLD=<epoch> the first training step of that epoch
# touches UCSE_TEST_MARKER and waits (up to 60 s) for UCSE_TEST_RELEASE to exist.
WRAPPER = """
import os, sys, time
from pathlib import Path
from ucse.training.module import UcseModule

real = UcseModule.training_step
hold = int(os.environ.get("UCSE_TEST_HOLD", "-1"))

def training_step(self, batch, batch_idx):
    if self.current_epoch == hold and batch_idx == 0:
        Path(os.environ["UCSE_TEST_MARKER"]).touch()
        for _ in range(1200):
            if Path(os.environ["UCSE_TEST_RELEASE"]).exists():
                break
            time.sleep(0.05)
    return real(self, batch, batch_idx)

UcseModule.training_step = training_step
from ucse.cli.train import main
sys.exit(main(sys.argv[1:]))
"""


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def _leftovers(folder: Path) -> list[Path]:
    """This package's temporaries and locks anywhere under ``folder``."""
    return [p for p in folder.rglob(".*") if atomic.leftover_target(p.name) or p.name.endswith(".ucse-lock")]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def args(tiny_task_root, tiny_bert_dir, tmp_path):
    def make(*extra: str) -> list[str]:
        return [
            f"data.root={tiny_task_root}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "optim.batch_size=16",
            "optim.epochs=3",
            "recipe=paper",
            "progress_bar=false",
            "uncertainty.enabled=false",
            f"cache.dir={tmp_path / 'cache'}",
            f"output_dir={tmp_path / 'run'}",
            *extra,
        ]

    return make


def _start(tmp_path: Path, argv: list[str], hold: int | None = None) -> tuple[subprocess.Popen, Path, Path]:
    script = tmp_path / "hold_train.py"
    script.write_text(WRAPPER)
    marker, release = tmp_path / f"held-{len(argv)}-{time.monotonic_ns()}", tmp_path / "release"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "UCSE_TEST_HOLD": str(-1 if hold is None else hold),
        "UCSE_TEST_MARKER": str(marker),
        "UCSE_TEST_RELEASE": str(release),
    }
    proc = subprocess.Popen(
        [sys.executable, str(script), *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, marker, release


def _wait_for(proc: subprocess.Popen, marker: Path) -> None:
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the training never reached the held step"
        time.sleep(0.05)


@pytest.mark.slow  # two real training processes (~10 s each on a quiet machine)
def test_a_second_training_into_a_folder_in_use_fails_in_one_line(args, tmp_path):
    run = tmp_path / "run"
    first, held, release = _start(tmp_path, args("seed=1"), hold=0)
    # The first run holds the folder at its first step: no checkpoint yet, so nothing but the hold tells a
    # second run that the folder is in use (it used to train into it too, both exiting 0, a mixed folder).
    _wait_for(first, held)
    second = subprocess.run(
        [sys.executable, "train.py", *args("seed=2")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = _one_error_line(second.stderr)
    assert second.returncode == 2 and "is being trained by another process" in line and str(run) in line
    assert first.poll() is None  # untouched by the refused run
    release.touch()
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    # The folder is the first run's alone: its config, its head, its metrics, no stranger's files.
    assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == 1
    assert json.loads((run / "head" / "config.json").read_text())["meta"]["seed"] == 1
    assert json.loads((run / "metrics.json").read_text())["test"]
    assert not _leftovers(tmp_path)


@pytest.mark.slow  # one real training process
def test_sigterm_stops_training_in_one_line_and_the_run_resumes(args, tmp_path, request, capsys):
    run = tmp_path / "run"
    proc, held, _ = _start(tmp_path, args(), hold=1)
    _wait_for(proc, held)  # epoch 0 is done and checkpointed; epoch 1 has begun
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM  # 143, as a shell reports a process ended by SIGTERM
    line = _one_error_line(err)
    assert "stopped by SIGTERM" in line and "holds 1 of 3 epochs" in line and "ckpt_path=last" in line, line
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)  # intact
    assert last["epoch"] == 0
    assert not (run / "head").exists() and not (run / "metrics.json").exists()
    assert not _leftovers(tmp_path)
    # Resumed as the message says: it trains epochs 1 and 2 only, from the saved step, and finishes.
    from ucse.cli.train import main

    steps = request.getfixturevalue("trained_steps")  # counted from here on, in this process
    assert main(args("ckpt_path=last")) == 0, capsys.readouterr().err[-3000:]
    per_epoch = last["global_step"]
    assert steps == list(range(per_epoch, 3 * per_epoch))
    assert (run / "head" / "model.safetensors").is_file()


@pytest.mark.slow  # one real training process
def test_ctrl_c_stops_training_in_one_line_exit_130_and_names_the_checkpoint(args, tmp_path):
    # Lightning alone turned Ctrl-C in fit into sys.exit(1): exit 1, no word on the checkpoint
    run = tmp_path / "run"
    proc, held, _ = _start(tmp_path, args(), hold=1)
    _wait_for(proc, held)  # epoch 0 is done and checkpointed; epoch 1 has begun
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT  # 130, as a shell reports a process ended by Ctrl-C
    line = _one_error_line(err)
    assert "interrupted (Ctrl-C)" in line and "holds 1 of 3 epochs" in line and "ckpt_path=last" in line, line
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 0  # intact
    assert not (run / "head").exists() and not _leftovers(tmp_path)


def _disk_full_after(monkeypatch, writes: int) -> list[str]:
    """Checkpoint writes succeed ``writes`` times, then the disk is full halfway through the next one."""
    done, real = [], SafeCheckpointIO.save_checkpoint

    def save(self, checkpoint, path, storage_options=None):
        if len(done) >= writes:
            with atomic.atomic_file(path, "wb") as fh:
                fh.write(b"\0" * 1000)  # a part of the file is written, then the disk is full
                raise enospc()
        done.append(Path(path).name)
        return real(self, checkpoint, path, storage_options)

    monkeypatch.setattr(SafeCheckpointIO, "save_checkpoint", save)
    return done


def test_a_full_disk_while_checkpointing_is_one_line_and_the_run_resumes(args, tmp_path, monkeypatch, capsys):
    from ucse.cli.train import main

    run = tmp_path / "run"
    written = _disk_full_after(monkeypatch, writes=2)  # epoch 0's best and last checkpoints
    assert main(args()) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "no space left writing" in line and str(run / "checkpoints") in line and "Free some space" in line
    assert len(written) == 2 and written[-1] == "last.ckpt"
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 0  # intact
    assert not (run / "head").exists() and not (run / "metrics.json").exists()
    assert not _leftovers(tmp_path)
    monkeypatch.undo()  # space freed: the run resumes from its last checkpoint
    assert main(args("ckpt_path=last")) == 0
    assert (run / "head" / "model.safetensors").is_file()


def test_a_full_disk_during_an_overwrite_keeps_the_earlier_run(args, tmp_path, monkeypatch, capsys):
    from ucse.cli.train import main

    run = tmp_path / "run"
    assert main(args("optim.epochs=1")) == 0
    before = _snapshot(run)
    _disk_full_after(monkeypatch, writes=1)
    assert main(args("overwrite=true", "seed=5")) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "no space left writing" in line
    assert _snapshot(run) == before
    assert not _leftovers(tmp_path)


def test_a_full_disk_during_export_keeps_the_earlier_export(args, tmp_path, monkeypatch, capsys):
    from ucse.cli.evaluate import main as eval_main
    from ucse.cli.train import main

    run, out = tmp_path / "run", tmp_path / "emb"
    assert main(args("optim.epochs=1")) == 0
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"text": "my bank card"}\n{"text": "a dog"}\n')
    export = [f"run={run}", f"export={texts}", f"out={out}"]
    assert eval_main(export, command="export") == 0
    before = _snapshot(out)

    def full(path, obj, **kw):
        raise enospc()

    monkeypatch.setattr(atomic, "write_json", full)  # embeddings.safetensors is written, meta.json fails
    assert eval_main([*export, "overwrite=true"], command="export") == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "no space left writing" in line and str(out) in line
    assert _snapshot(out) == before
    assert not _leftovers(tmp_path)


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_an_unwritable_cache_folder_is_one_line_naming_it_and_the_fix(
    args, tmp_path, monkeypatch, capsys, fault
):
    from ucse.cli.train import main

    cache = tmp_path / "cache"
    cache.mkdir()
    if fault == "read-only":  # as root, chmod does not stop a write: make the folder refuse new entries
        real_mkdir = Path.mkdir

        def mkdir(self, *a, **k):
            if self.parent == cache:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
            return real_mkdir(self, *a, **k)

        monkeypatch.setattr(Path, "mkdir", mkdir)
    else:  # no room for the states file (its blocks are reserved before the backbone pass writes them)

        def fallocate(fd, offset, length):
            raise enospc()

        monkeypatch.setattr(os, "posix_fallocate", fallocate)
    assert main(args()) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"hidden-state cache folder '{cache}'" in line, line
    assert "cache.dir=" in line and "cache.enabled=false" in line
    assert list(cache.iterdir()) == []  # no half-built entry
