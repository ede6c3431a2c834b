"""Every bad input of docs/RESULTS.md section 10 via the real commands: exit code, one line, no traceback."""

from __future__ import annotations

import pytest
import torch
from bad_inputs import CASES, make_workspace, run_case


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("bad-inputs"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_exits_with_one_clear_line(case, workspace, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same answer on a GPU machine
    before = sorted(p.name for p in workspace.run.rglob("*"))
    code, line, stderr = run_case(case, workspace)
    assert code == case.code, stderr[-3000:]
    assert "Traceback" not in stderr
    if case.code == 2:
        assert sum(ln.startswith("error: ") for ln in stderr.splitlines()) == 1, stderr[-3000:]
        assert case.expect in line, line
    assert sorted(p.name for p in workspace.run.rglob("*")) == before  # the finished run is untouched
