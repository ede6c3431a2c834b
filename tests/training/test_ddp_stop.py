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
import time
from pathlib import Path

import pytest
from stopped_run import output, training_run


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
    ranks: list[int] = []
    with training_run(tiny_task_root, tiny_bert_dir, tmp_path, "devices=2", "strategy=ddp") as proc:
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
        out = output(tmp_path)
        assert code == 128 + signum, out[-3000:]
        assert not _alive(ranks), out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        said = [line for line in out.splitlines() if line.startswith("error: ")]
        assert said and all("Resume with the same command plus ckpt_path=last." in line for line in said), (
            said
        )
