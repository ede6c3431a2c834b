"""Shared fixtures: tiny random backbones (BERT encoder, Qwen3 decoder) and an isolated cache folder."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

# Fail fast instead of retrying the unreachable hub; set before transformers is imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# As `import ucse` sets it (ucse/__init__.py), before tiny_models imports torch: on a busy 2-core machine
# OpenMP's spinning threads slowed small training loops tenfold (docs/RESULTS.md section 5).
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "10000"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # makes `import tiny_models` work everywhere

# Ctrl-C as a terminal's foreground job has it. A suite started as a background job of a non-interactive shell
# (`make test &`, a CI step's `&`) inherits SIGINT ignored, which survives exec: ucse then rightly ignores the
# Ctrl-C of the tests that send one, in this process and in every command they start (a forked child tested
# "nothing happened", a stopped run waited out its timeout). A Python handler here is reset to the default in
# the commands the tests start, as a shell's would be.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from tiny_models import (  # noqa: E402
    build_tiny_bert,
    build_tiny_qwen3,
    make_tiny_bert_cfg,
    make_tiny_qwen3_cfg,
)
from toy_tasks import own_rows, write_cue_task  # noqa: E402

from ucse.config import BackboneConfig, TrainConfig, build_config  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point UCSE_CACHE_DIR at a temp folder so no test writes to ~/.cache/ucse."""
    path = tmp_path_factory.mktemp("ucse_cache")
    old = os.environ.get("UCSE_CACHE_DIR")
    os.environ["UCSE_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("UCSE_CACHE_DIR", None)
    else:
        os.environ["UCSE_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with a saved random 2-layer, 32-d BERT and its [CLS] ... [SEP] word-level tokenizer."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with a saved random 2-layer, 32-d Qwen3 decoder and its tokenizer (EOS, no pad token)."""
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))


@pytest.fixture
def tiny_bert_cfg(tiny_bert_dir: Path) -> BackboneConfig:
    """A fresh (mutable) BackboneConfig for the tiny BERT."""
    return make_tiny_bert_cfg(tiny_bert_dir)


@pytest.fixture
def tiny_qwen3_cfg(tiny_qwen3_dir: Path) -> BackboneConfig:
    """A fresh (mutable) BackboneConfig for the tiny Qwen3 decoder."""
    return make_tiny_qwen3_cfg(tiny_qwen3_dir)


@pytest.fixture(scope="session")
def tiny_bert_backbone(tiny_bert_dir: Path):
    """A loaded FrozenBackbone of the tiny BERT, shared by the session (treat as read-only)."""
    from ucse.backbone import FrozenBackbone

    return FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))


@pytest.fixture(scope="session")
def tiny_qwen3_backbone(tiny_qwen3_dir: Path):
    """A loaded FrozenBackbone of the tiny Qwen3, shared by the session (treat as read-only)."""
    from ucse.backbone import FrozenBackbone

    return FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir))


# Tiny end-to-end runs: a learnable 3-class task in the shared/data layout and a fast training config.
@pytest.fixture(scope="session")
def tiny_task_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cue_task(tmp_path_factory.mktemp("tiny-task"))


@pytest.fixture
def tiny_run_cfg(tiny_task_root: Path, tiny_bert_dir: Path, tmp_path: Path):
    """Factory: a fast config on the tiny BERT and the tiny task, with extra overrides."""

    def make(*overrides: str, model_dir: Path | None = None) -> TrainConfig:
        return build_config(
            [
                f"data.root={tiny_task_root}",
                f"backbone.model={model_dir or tiny_bert_dir}",
                "backbone.name=tiny-bert",
                "backbone.precision=fp32",
                "backbone.batch_size=16",
                "optim.lr=5e-3",
                "optim.epochs=3",
                "optim.batch_size=16",
                "progress_bar=false",
                f"output_dir={tmp_path / 'run'}",
                "recipe=paper",  # the tests of the Lightning path pin its epochs; recipe=auto has its own
                *overrides,
            ]
        )

    return make


# A tiny trained run on string-labelled data (via ``ucse.train`` on a DataFrame), shared by tests/cli and
# tests/inference (one training per session).
def tiny_overrides(tiny_bert_dir: Path, out: Path) -> dict:
    """``ucse.train`` keyword overrides for a fast run on the tiny BERT."""
    return {
        "output_dir": str(out),
        "backbone": {"model": str(tiny_bert_dir), "name": "tiny-bert", "precision": "fp32", "batch_size": 32},
        "optim": {"lr": 1e-2, "epochs": 4, "batch_size": 16},
        "progress_bar": False,
        "recipe": "paper",  # fast and fixed (recipe=auto is tested in tests/training/test_auto.py)
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
    return result.run_dir_
