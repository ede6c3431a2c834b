"""The README's "Your own data" commands, run verbatim on a CSV with string labels (real MiniLM-L6)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from toy_tasks import own_rows, write_rows

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def readme_block(section: str) -> list[str]:
    """The command lines of the first ```bash block under ``## <section>`` in README.md."""
    text = (REPO / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", body, re.S)
    assert block, f"no bash block under '## {section}'"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _path_with_ucse(tmp: Path) -> str:
    """PATH on which ``ucse`` runs this checkout: the installed console script, else an equivalent shim.

    The console script is ``ucse.cli.main:main`` (pyproject.toml), the same as ``python -m ucse``; a venv
    installed before the script was declared has no ``ucse`` file yet, so the shim stands in for it.
    """
    bin_dir = Path(sys.executable).parent
    if (bin_dir / "ucse").is_file() and os.environ.get("PYTHONPATH") is None:
        return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    shim = tmp / "bin" / "ucse"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ucse "$@"\n')
    shim.chmod(0o755)
    return f"{shim.parent}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_readme_own_data_commands_run_verbatim(tmp_path):
    commands = readme_block("Your own data")
    assert (
        len(commands) == 2 and commands[0].startswith("ucse train") and commands[1].startswith("ucse predict")
    )
    names = {"money": "billing", "pets": "login", "music": "shipping"}  # word labels, as a user has them
    rows = [{"text": r["text"], "label": names[r["label"]]} for r in own_rows(120, seed=3)]
    write_rows(tmp_path / "tickets.csv", rows)
    fresh = own_rows(40, seed=4)
    (tmp_path / "new_tickets.txt").write_text("".join(r["text"] + "\n" for r in fresh))
    env = {
        **os.environ,
        "PATH": _path_with_ucse(tmp_path),
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    for command in commands:
        proc = subprocess.run(
            command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
        if command.startswith("ucse train"):
            assert "run: runs/tickets" in proc.stdout and "test accuracy" in proc.stdout
            summary = proc.stdout.split("run: runs/tickets", 1)[1]
            assert len(summary.splitlines()) <= 10 and "{" not in proc.stdout  # a summary, not a dump
            assert "head: " in summary and "logreg" in summary  # the choice, beside the tuned probe
    preds = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [p["text"] for p in preds] == [r["text"] for r in fresh]
    assert {p["label"] for p in preds} <= set(names.values())
    for p in preds:
        assert {"confidence", "uncertainty", "abstain", "probs"} <= set(p)
        assert p["confidence"] == pytest.approx(max(p["probs"].values()))
    accuracy = sum(p["label"] == names[r["label"]] for p, r in zip(preds, fresh)) / len(fresh)
    assert accuracy > 0.8, accuracy
    shutil.rmtree(tmp_path / "runs")
