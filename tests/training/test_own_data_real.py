"""Real MiniLM on real rows given as your own data: 5 Banking77 intents renamed to plain words, as a CSV."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from toy_tasks import REAL_ROOT, write_jsonl, write_rows

from ucse.config import build_config
from ucse.training import train

pytestmark = pytest.mark.slow

INTENTS = {  # Banking77 intent -> the word a user would call it
    "card_arrival": "delivery",
    "exchange_rate": "currency",
    "lost_or_stolen_card": "theft",
    "pin_blocked": "pin",
    "top_up_failed": "topup",
}
PER_INTENT = {"train": 60, "test": 40}


def _rows(root: Path, split: str) -> list[dict]:
    rows = [json.loads(line) for line in (root / "Banking77Classification" / f"{split}.jsonl").open()]
    picked = []
    for intent in INTENTS:
        picked += [r for r in rows if r["label_text"] == intent][: PER_INTENT[split]]
    return picked


def _common(out: Path) -> list[str]:
    return ["backbone=minilm-l6", "seed=0", "progress_bar=false", "recipe=paper", f"output_dir={out}"]


def test_minilm_on_a_csv_with_word_labels_matches_the_shared_route(tmp_path):
    root = Path(os.environ.get("UCSE_DATA_DIR") or REAL_ROOT)
    assert (root / "Banking77Classification" / "train.jsonl").is_file(), f"real data not found at {root}"
    splits = {s: _rows(root, s) for s in ("train", "test")}

    # Route 1, a new user's: train.csv / test.csv with word labels, no config file, no task.
    for split, rows in splits.items():
        write_rows(
            tmp_path / "own" / f"{split}.csv",
            [{"text": r["text"], "label": INTENTS[r["label_text"]]} for r in rows],
        )
    own = train(build_config([f"data.path={tmp_path / 'own'}", *_common(tmp_path / "run-own")]))

    # Route 2, the ../shared/data layout: the same rows with integer ids and the original intent names.
    names = sorted(INTENTS)
    for split, rows in splits.items():
        write_jsonl(
            tmp_path / "shared" / "Five" / f"{split}.jsonl",
            [
                {"text": r["text"], "label": names.index(r["label_text"]), "label_text": r["label_text"]}
                for r in rows
            ],
        )
    shared = train(
        build_config(
            ["task.name=Five", f"data.root={tmp_path / 'shared'}", *_common(tmp_path / "run-shared")],
            own_data=True,
        )
    )

    meta = json.loads((own.run_dir / "head" / "config.json").read_text())["meta"]
    assert meta["label_names"] == sorted(INTENTS.values()) and meta["task"] == "own"
    assert meta["instruction"] == ""
    assert own.metrics["data"]["sizes"]["test"] == shared.metrics["data"]["sizes"]["test"] == 200
    # Five distinct intents: MiniLM + TextCNN separates them well; both routes see the same rows.
    acc_own, acc_shared = own.metrics["test"]["accuracy"], shared.metrics["test"]["accuracy"]
    print(f"test accuracy: data.path {acc_own:.4f}  data.root {acc_shared:.4f}")
    assert acc_own > 0.85 and abs(acc_own - acc_shared) <= 0.05
