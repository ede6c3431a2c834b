"""A ``python train.py`` run started in its own process group and left training, for tests that stop it.

The tiny task for 1,000 epochs (far longer than any test waits), as a user would start it from a terminal:
its own process group, as a foreground job has, so a test can send a signal to the whole group (Ctrl-C) or
to the command alone (``kill <pid>``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def training_run(task_root: Path, bert_dir: Path, folder: Path, *extra: str) -> Iterator[subprocess.Popen]:
    """The running command, once its first checkpoint is written; its whole group killed on the way out.

    Its output (stdout and stderr) goes to ``folder / "log.txt"`` (:func:`output`).
    """
    args = [
        f"data.root={task_root}",
        f"backbone.model={bert_dir}",
        "backbone.name=tiny-bert",
        "recipe=paper",
        "optim.epochs=1000",
        "progress_bar=false",
        "uncertainty.enabled=false",
        f"cache.dir={folder / 'cache'}",
        f"output_dir={folder / 'run'}",
        *extra,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    with (folder / "log.txt").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "train.py", *args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            last = folder / "run" / "checkpoints" / "last.ckpt"
            deadline = time.time() + 180
            while not last.is_file() and proc.poll() is None and time.time() < deadline:
                time.sleep(0.2)
            assert last.is_file(), output(folder)[-3000:]
            yield proc
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=30)


def output(folder: Path) -> str:
    """What the run printed so far."""
    return (folder / "log.txt").read_text()
