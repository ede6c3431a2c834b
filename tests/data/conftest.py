"""Fixtures of the data-layer tests (helpers live in tests/toy_tasks.py)."""

from pathlib import Path

import pytest
from toy_tasks import REAL_ROOT


@pytest.fixture(autouse=True)
def _no_env_data_root(monkeypatch):
    # Tests decide the data root themselves; a developer's UCSE_DATA_DIR must not leak in.
    monkeypatch.delenv("UCSE_DATA_DIR", raising=False)


@pytest.fixture
def real_root() -> Path:
    # shared/data sits beside the repo for developers and CI; its absence is an environment error.
    assert (REAL_ROOT / "README.md").is_file(), f"real task data not found at {REAL_ROOT}"
    return REAL_ROOT
