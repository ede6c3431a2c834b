"""Tiny random backbones for fast tests: a 2-layer BERT encoder and a 2-layer Qwen3 decoder.

Both are saved with ``save_pretrained`` next to a word-level tokenizer built with the ``tokenizers``
library, so they load through exactly the same ``AutoModel`` / ``AutoTokenizer`` path as real models.
Building both takes well under a second on CPU.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

from ucse.config import BackboneConfig, PaddingSide, Pooling, Precision

HIDDEN = 32
MAX_POSITIONS = 128
SEED = 1234

# A few real words so hand-written test sentences tokenise to known ids, plus generated words.
_COMMON = (
    "a an the man woman dog cat is are was eating riding playing reading food bread horse guitar book "
    "piece of on in with and to my your card bank money transfer account balance help please what how "
    "why when where i you we they it not no yes good bad happy sad"
).split()
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "si", "to", "va", "ze", "po", "da", "fi")
_PUNCT = [".", ",", "?", "!"]


def generated_words(n: int = 300) -> list[str]:
    """Deterministic pseudo-words made of 2-3 syllables (``kalo``, ``mineru``, ...)."""
    words: list[str] = []
    for a in _SYLLABLES:
        for b in _SYLLABLES:
            words.append(a + b)
            for c in _SYLLABLES[:2]:
                words.append(a + b + c)
    return words[:n]


VOCAB_WORDS: list[str] = _COMMON + _PUNCT + generated_words()


def sample_texts(n: int, seed: int = 0, min_words: int = 2, max_words: int = 12) -> list[str]:
    """``n`` random sentences over the tiny vocabulary with varied lengths (seeded, deterministic)."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(VOCAB_WORDS[: len(_COMMON)] + generated_words()) for _ in range(k))
        for k in (rng.randint(min_words, max_words) for _ in range(n))
    ]


def _word_level(specials: list[str]) -> Tokenizer:
    vocab = {tok: i for i, tok in enumerate(specials + VOCAB_WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=specials[specials.index("[UNK]")]))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def build_tiny_bert(out_dir: str | Path, hidden: int = HIDDEN) -> Path:
    """Save a random 2-layer BERT (32-d by default, with pooler weights) and a [CLS] ... [SEP] tokenizer."""
    out = Path(out_dir)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = _word_level(specials)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=MAX_POSITIONS,
        padding_side="right",
    )
    config = BertConfig(
        vocab_size=len(specials) + len(VOCAB_WORDS),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = BertModel(config)  # keeps the pooler so loading exercises the "no pooler" path
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out


def build_tiny_qwen3(out_dir: str | Path) -> Path:
    """Save a random 2-layer, 32-d Qwen3 decoder and a tokenizer with an EOS but no pad token.

    The missing pad token is deliberate: loading must fall back to EOS, as for real decoders.
    """
    out = Path(out_dir)
    specials = ["<|endoftext|>", "[UNK]"]
    tok = _word_level(specials)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        eos_token="<|endoftext|>",
        model_max_length=MAX_POSITIONS,
        padding_side="left",
    )
    config = Qwen3Config(
        vocab_size=len(specials) + len(VOCAB_WORDS),
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        intermediate_size=64,
        max_position_embeddings=MAX_POSITIONS,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 1)
        model = Qwen3Model(config)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out


def make_tiny_bert_cfg(model_dir: str | Path, **overrides: object) -> BackboneConfig:
    """BackboneConfig for the tiny BERT: mean pooling, right padding, fp32."""
    values: dict = {
        "name": "tiny-bert",
        "model": str(model_dir),
        "pooling": Pooling.mean,
        "padding_side": PaddingSide.right,
        "precision": Precision.fp32,
        "max_length": 64,
        "batch_size": 4,
    }
    values.update(overrides)
    return BackboneConfig(**values)


def make_tiny_qwen3_cfg(model_dir: str | Path, **overrides: object) -> BackboneConfig:
    """BackboneConfig for the tiny Qwen3: last-token (EOS) pooling, left padding, appended EOS, fp32."""
    values: dict = {
        "name": "tiny-qwen3",
        "model": str(model_dir),
        "pooling": Pooling.last,
        "padding_side": PaddingSide.left,
        "append_eos": True,
        "precision": Precision.fp32,
        "max_length": 64,
        "batch_size": 4,
    }
    values.update(overrides)
    return BackboneConfig(**values)
