"""A 2-process run (``devices=2 strategy=ddp`` on CPU, gloo) stopped by a signal: every rank ends, promptly.

Reference: the processes themselves, watched from outside: the command's exit status (128 + the signal), the
rank process it launched gone, one line saying what the run left, no traceback. Lightning's own SIGTERM
handler broadcast from inside the handler and hung waiting in it (2 of 3 tries of the first case below), and
after Ctrl-C it left the other rank to stop on its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":  # a zombie has ended; only its exit status is left for its parent
            out.append(pid)
    return out


@pytest.mark.slow  # a 2-process run started, trained for a while and stopped (~20 s each)
@pytest.mark.parametrize(
    ("signum", "whole_group"),
    [
        (signal.SIGTERM, False),  # `kill <pid>` of the command, as a scheduler or a user does
        (signal.SIGINT, True),  # Ctrl-C in a terminal: every process of the foreground group
        (signal.SIGTERM, True),  # `kill -TERM -<pgid>`, a job scheduler ending the whole job
    ],
)
def test_a_stopped_two_process_run_ends_every_rank(
    tiny_task_root, tiny_bert_dir, tmp_path, signum, whole_group
):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    args = [
        f"data.root={tiny_task_root}",
        f"backbone.model={tiny_bert_dir}",
        "backbone.name=tiny-bert",
        "recipe=paper",
        "optim.epochs=1000",  # far longer than the test waits
        "progress_bar=false",
        "devices=2",
        "strategy=ddp",
        "uncertainty.enabled=false",
        f"cache.dir={tmp_path / 'cache'}",
        f"output_dir={tmp_path / 'run'}",
    ]
    log = (tmp_path / "log.txt").open("w")
    proc = subprocess.Popen(
        [sys.executable, "train.py", *args],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    ranks: list[int] = []
    try:
        last = tmp_path / "run" / "checkpoints" / "last.ckpt"
        deadline = time.time() + 180
        while not last.is_file() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert last.is_file(), (tmp_path / "log.txt").read_text()[-3000:]
        time.sleep(1.0)  # well inside the next epochs: steps, all-reduces, validation
        found = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout
        ranks = [int(p) for p in found.split()]
        assert ranks, "the run launched no rank process"
        if whole_group:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        code = proc.wait(timeout=60)
        deadline = time.time() + 10
        while _alive(ranks) and time.time() < deadline:
            time.sleep(0.1)
        out = (tmp_path / "log.txt").read_text()
        assert code == 128 + signum, out[-3000:]
        assert not _alive(ranks), out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        said = [line for line in out.splitlines() if line.startswith("error: ")]
        assert said and all("Resume with the same command plus ckpt_path=last." in line for line in said), (
            said
        )
    finally:
        for pid in [proc.pid, *_alive(ranks)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        log.close()
