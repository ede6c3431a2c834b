"""Fixtures of the estimator's tests: a fast estimator on the tiny BERT and the toy task's rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from toy_tasks import own_rows


@pytest.fixture(scope="module")
def tiny_params(tiny_bert_dir: Path) -> dict:
    """Constructor arguments for a fast estimator on the tiny BERT (the probe head: seconds per fit)."""
    backbone = {"model": str(tiny_bert_dir), "name": "tiny-bert", "precision": "fp32", "batch_size": 64}
    return {"head": "logreg", "device": "cpu", "overrides": {"backbone": backbone}}


@pytest.fixture(scope="module")
def rows() -> tuple[list[str], np.ndarray]:
    """240 cue-word texts of the toy task's labels, and their labels (names)."""
    data = own_rows(240, seed=3)
    return [r["text"] for r in data], np.asarray([r["label"] for r in data], dtype=object)
