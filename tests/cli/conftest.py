"""A tiny trained run on string-labelled data (via ``ucse.train`` on a DataFrame), shared by the module."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from toy_tasks import own_rows


def tiny_overrides(tiny_bert_dir: Path, out: Path) -> dict:
    """``ucse.train`` keyword overrides for a fast run on the tiny BERT."""
    return {
        "output_dir": str(out),
        "backbone": {"model": str(tiny_bert_dir), "name": "tiny-bert", "precision": "fp32", "batch_size": 32},
        "optim": {"lr": 1e-2, "epochs": 4, "batch_size": 16},
        "progress_bar": False,
    }


@pytest.fixture
def train_overrides(tiny_bert_dir: Path):
    """Factory: ``ucse.train`` overrides for a fast tiny-BERT run into ``out``."""
    return lambda out: tiny_overrides(tiny_bert_dir, out)


@pytest.fixture(scope="session")
def tiny_clf_run(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run folder of a head trained on 150 rows with labels money / music / pets (uncertainty fitted)."""
    import ucse

    out = tmp_path_factory.mktemp("clf") / "run"
    result = ucse.train(pd.DataFrame(own_rows(150)), **tiny_overrides(tiny_bert_dir, out))
    return result.run_dir
