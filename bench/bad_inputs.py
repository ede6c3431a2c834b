"""Print the "bad input" table of docs/RESULTS.md section 10 by running every case of tests/bad_inputs.py.

Usage: ``PYTHONPATH=. python bench/bad_inputs.py`` (about a minute on 2 CPU cores: one tiny training run, then
each case through ``train.py`` / ``eval.py`` / ``ucse sweep``'s ``main``).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bad_inputs import CASES, make_workspace, run_case  # noqa: E402


def main() -> None:
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        ws = make_workspace(Path(tmp))
        rows = []
        for case in CASES:
            code, line, _ = run_case(case, ws)
            msg = line.replace(tmp, "<tmp>").replace("|", "\\|") or "(accepted)"
            rows.append(f"| {case.name} | `{case.command}` | {code} | {msg} |")
    print("| case | command | exit | message |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
