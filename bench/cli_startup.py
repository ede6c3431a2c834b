"""Seconds until the CLI answers: ``--help``, a mistyped key or path, ``import ucse; ucse.UcseClassifier``.

Usage: ``python bench/cli_startup.py [repeats]`` (default 3; check ``uptime`` first: on a loaded machine
the wall times say more about the other processes than about ucse). Each case runs in a fresh interpreter
(``python -m ucse`` is the console script); the median wall and CPU times of the repeats are printed with
the exit code and the first line the command wrote to stderr, so that before/after runs can be compared
message by message as well as by time.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

CASES = [
    ("ucse train --help", ["-m", "ucse", "train", "--help"]),
    ("ucse predict --help", ["-m", "ucse", "predict", "--help"]),
    ("ucse eval --help", ["-m", "ucse", "eval", "--help"]),
    ("ucse train optim.lrr=1", ["-m", "ucse", "train", "optim.lrr=1"]),
    ("ucse predict run=x imput=y", ["-m", "ucse", "predict", "run=x", "imput=y"]),
    ("import ucse; ucse.UcseClassifier", ["-c", "import ucse; ucse.UcseClassifier"]),
    # Mistakes found once the arguments parse: a data file or run folder that is not there.
    ("ucse train data.path=no-such.csv", ["-m", "ucse", "train", "data.path=no-such.csv"]),
    ("ucse predict run=no-such input=x.txt", ["-m", "ucse", "predict", "run=no-such", "input=x.txt"]),
]


def _children_cpu() -> float:
    """CPU seconds (user + system) used so far by this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_case(args: list[str], repeats: int) -> tuple[float, float, int, str]:
    """Median wall and CPU seconds of ``repeats`` fresh runs, the exit code and the first stderr line.

    CPU time is less sensitive than wall time to other processes on a shared machine.
    """
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("UCSE_DEBUG", None)  # the user's view: one line, no traceback
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=600)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu)
    first = next((line for line in proc.stderr.splitlines() if line.strip()), "")
    return statistics.median(walls), statistics.median(cpus), proc.returncode, first


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; median of {repeats}")
    print("| case | wall s | CPU s | exit | stderr |\n|---|---|---|---|---|")
    for name, args in CASES:
        seconds, cpu, code, first = time_case(args, repeats)
        message = first[:100].replace("|", "\\|")  # a table cell
        print(f"| `{name}` | {seconds:.2f} | {cpu:.2f} | {code} | {message} |", flush=True)


if __name__ == "__main__":
    main()
