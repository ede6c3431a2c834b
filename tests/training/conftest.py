"""A small learnable classification task in the shared/data layout, and a config factory for tiny runs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tiny_models import generated_words

from ucse.config import TrainConfig, build_config

CUES = {0: "bank", 1: "dog", 2: "guitar"}  # each class's texts carry its cue word among noise words


def write_task(
    root: Path, name: str = "Banking77Classification", n_train: int = 120, n_test: int = 45
) -> Path:
    """Write ``<root>/<name>/{train,test}.jsonl`` with 3 balanced, learnable classes."""
    rng = random.Random(0)
    noise = generated_words(120)
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        rows = []
        for i in range(n):
            label = i % 3
            words = [rng.choice(noise) for _ in range(rng.randint(3, 10))]
            words.insert(rng.randint(0, len(words)), CUES[label])
            rows.append({"text": " ".join(words), "label": label, "label_text": f"class_{label}"})
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="session")
def tiny_task_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_task(tmp_path_factory.mktemp("tiny-task"))


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
                *overrides,
            ]
        )

    return make
