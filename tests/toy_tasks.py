"""Small classification task folders in the shared/data layout, for data-layer tests."""

import json
import random
from pathlib import Path

from tiny_models import generated_words

from ucse.config import DataConfig, TaskConfig

REAL_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"

# Imbalanced toy classes: name -> row count. Names are unsorted here on purpose.
TOY_COUNTS = {"delta": 41, "alpha": 26, "charlie": 13, "bravo": 7}
TOY_NAMES = sorted(TOY_COUNTS)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def toy_rows(prefix: str, scale: float = 1.0) -> list[dict]:
    """Unique texts; ids follow the sorted label names, as in the shared layout."""
    rows = []
    for name, count in TOY_COUNTS.items():
        for i in range(max(2, round(count * scale))):
            rows.append({"text": f"{prefix} {name} {i}", "label": TOY_NAMES.index(name), "label_text": name})
    return rows


def make_task(root: Path, splits: dict[str, list[dict]], name: str = "ToyClassification") -> Path:
    for split, rows in splits.items():
        write_jsonl(root / name / f"{split}.jsonl", rows)
    return root


def toy_task(**kw) -> TaskConfig:
    kw.setdefault("name", "ToyClassification")
    kw.setdefault("hf_path", "ucse-tests/not-a-dataset")
    return TaskConfig(**kw)


def toy_data(root: Path, **kw) -> DataConfig:
    return DataConfig(root=str(root), **kw)


# Enough optimiser steps for the tiny heads to learn the cue tasks on any CPU, precision and seed. Measured
# test accuracy over seeds x fp32/bf16 heads (tests that check learning assert a floor well below these):
# default TextCNN >= 0.71 (seeds 0-4), with normalize_states >= 0.82, on-the-fly states >= 0.78 (seeds 0-2),
# own data (30 test rows) >= 0.87; with the fixture's 3 epochs x 7 steps the TextCNN ranged 0.36-0.64, so any
# floor there asserted which way one CPU's float path happened to go. A chance-level head (1/3) clears 0.5
# on 45 texts with p = 1% (binomial).
LEARNS = ("optim.lr=1e-2", "optim.epochs=6", "optim.batch_size=8", "recipe=paper")

CUES = {0: "bank", 1: "dog", 2: "guitar"}  # each class's texts carry its cue word among noise words


def write_cue_task(
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


# Your own data: string labels, learnable on the tiny BERT (each class's texts carry its cue word).
OWN_CUES = {"money": "bank", "pets": "dog", "music": "guitar"}
OWN_FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "xlsx")


def own_rows(n: int = 90, seed: int = 0) -> list[dict]:
    """``n`` rows ``{"text", "label"}`` with string labels, balanced over ``OWN_CUES``, unique texts."""
    rng = random.Random(seed)
    noise = generated_words(120)
    names = list(OWN_CUES)
    rows = []
    for i in range(n):
        name = names[i % len(names)]
        words = [rng.choice(noise) for _ in range(rng.randint(2, 6))]
        words.insert(rng.randint(0, len(words)), OWN_CUES[name])
        rows.append({"text": " ".join(words) + f" {noise[i % 120]} {i}", "label": name})
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    """Write ``rows`` in the format named by ``path``'s suffix (csv, tsv, jsonl, json, parquet, xlsx)."""
    import csv

    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix[1:]
    if fmt in ("csv", "tsv"):
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), delimiter="\t" if fmt == "tsv" else ",")
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "jsonl":
        write_jsonl(path, rows)
    elif fmt == "json":
        path.write_text(json.dumps(rows, indent=1))
    elif fmt == "parquet":
        pd.DataFrame(rows).to_parquet(path, index=False)
    elif fmt == "xlsx":
        pd.DataFrame(rows).to_excel(path, index=False)
    else:
        raise ValueError(fmt)
    return path


def train_rows(tmp: Path, tiny_bert_dir: Path, rows: list[dict], *extra: str):
    """``ucse train``'s pipeline on ``rows`` written to ``tmp/rows.csv``, tiny BERT in fp32, into ``tmp/run``.

    Returns:
        ``run_training``'s (RunResult, profile).
    """
    from ucse.config import build_config
    from ucse.pipeline import run_training

    data = write_rows(tmp / "rows.csv", rows)
    cfg = build_config(
        [
            f"data.path={data}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "progress_bar=false",
            f"output_dir={tmp / 'run'}",
            *extra,
        ]
    )
    return run_training(cfg)


def train_in_memory(tmp: Path, tiny_bert_dir: Path):
    """``ucse.train`` on 120 own rows passed as (texts, labels), the tiny BERT's probe, into ``tmp/mem``.

    Returns:
        The fitted ``UcseClassifier`` (its run folder records no data source to read again).
    """
    import ucse

    rows = own_rows(120, seed=2)
    backbone = {"model": str(tiny_bert_dir), "name": "tiny-bert", "precision": "fp32"}
    return ucse.train(
        ([r["text"] for r in rows], [r["label"] for r in rows]),
        backbone=backbone,
        head="logreg",
        output_dir=str(tmp / "mem"),
        progress_bar=False,
        device="cpu",
    )
