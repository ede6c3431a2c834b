import pytest
import torch
from tiny_models import make_tiny_bert_cfg, make_tiny_qwen3_cfg, sample_texts

from ucse.backbone import FrozenBackbone, TextValidationError
from ucse.config import PaddingSide, Precision

TEXTS = sample_texts(9, seed=3, min_words=1, max_words=14)


def _reference_states(fb: FrozenBackbone, text: str) -> torch.Tensor:
    """(T, H) states of one text by calling the HF model directly on its unpadded ids."""
    ids = fb.tokenizer(fb.format([text]), truncation=True, max_length=fb.max_length)["input_ids"][0]
    with torch.no_grad():
        return fb.model(input_ids=torch.tensor([ids])).last_hidden_state[0]


@pytest.mark.parametrize(
    ("kind", "side"), [("bert", "right"), ("bert", "left"), ("qwen3", "left"), ("qwen3", "right")]
)
def test_padded_batch_equals_each_sentence_alone(kind, side, tiny_bert_dir, tiny_qwen3_dir):
    make = make_tiny_bert_cfg if kind == "bert" else make_tiny_qwen3_cfg
    folder = tiny_bert_dir if kind == "bert" else tiny_qwen3_dir
    fb = FrozenBackbone(make(folder, padding_side=PaddingSide(side)))
    assert fb.tokenizer.padding_side == side
    batched = fb.token_states(TEXTS, batch_size=4)  # mixed lengths -> real padding in each batch
    assert len({t.shape[0] for t in batched}) > 3
    for text, got in zip(TEXTS, batched, strict=True):
        ref = _reference_states(fb, text)
        assert got.shape == ref.shape
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-4)


def test_left_padding_needs_position_ids_for_bert(tiny_bert_dir):
    """Guard that the test above is sensitive: a left-padded BERT without position ids is wrong."""
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, padding_side=PaddingSide.left))
    short, long = "a man", "a man is eating a piece of bread"
    enc = fb.tokenizer([short, long], padding=True, return_tensors="pt")
    with torch.no_grad():
        naive = fb.model(**enc).last_hidden_state[0, enc["attention_mask"][0].bool()]
    assert (naive - _reference_states(fb, short)).abs().max() > 1e-2
    torch.testing.assert_close(fb.token_states([short, long])[0], _reference_states(fb, short))


def test_iter_states_sorted_dynamic_padding_and_index(tiny_qwen3_backbone):
    fb = tiny_qwen3_backbone
    lengths = fb.token_lengths(TEXTS)
    seen, previous_max = [], None
    for idx, hidden, mask in fb.iter_states(TEXTS, batch_size=2):
        assert hidden.dtype == torch.float32 and mask.dtype == torch.long
        assert hidden.shape[:2] == mask.shape and hidden.shape[2] == fb.hidden_size == 32
        assert mask.sum(1).tolist() == lengths[idx.numpy()].tolist()
        assert mask.shape[1] == lengths[idx.numpy()].max()  # padded only to this batch's longest
        assert (mask[:, -1] == 1).all()  # left padding: every row ends with a real token
        assert (hidden[mask == 0] == 0).all()
        if previous_max is not None:
            assert lengths[idx.numpy()].max() <= previous_max  # longest first
        previous_max = lengths[idx.numpy()].min()
        seen += idx.tolist()
    assert sorted(seen) == list(range(len(TEXTS)))


def test_iter_states_reads_a_given_tokenisation_as_its_own(tiny_qwen3_backbone):
    fb = tiny_qwen3_backbone
    tok = fb.tokenized(TEXTS)
    assert fb.token_lengths(TEXTS, tok).tolist() == fb.token_lengths(TEXTS).tolist()
    own = list(fb.iter_states(TEXTS, batch_size=3))
    given = list(fb.iter_states(TEXTS, batch_size=3, tokenized=tok))
    assert len(own) == len(given)
    for (i, h, m), (j, g, n) in zip(own, given):
        assert i.equal(j) and m.equal(n) and h.equal(g)
    with pytest.raises(ValueError, match="tokenized holds 2 texts, not the"):
        next(fb.iter_states(TEXTS, tokenized=fb.tokenized(TEXTS[:2])))


def test_pooled_matches_token_states(tiny_bert_backbone, tiny_qwen3_backbone):
    per_text = tiny_bert_backbone.token_states(TEXTS)
    expect = torch.stack([t.mean(0) for t in per_text])
    torch.testing.assert_close(tiny_bert_backbone.pooled(TEXTS), expect)
    per_text = tiny_qwen3_backbone.token_states(TEXTS)
    torch.testing.assert_close(tiny_qwen3_backbone.pooled(TEXTS), torch.stack([t[-1] for t in per_text]))


def test_format_prompt_instruction_and_eos(tiny_qwen3_dir):
    cfg = make_tiny_qwen3_cfg(tiny_qwen3_dir, prompt="Instruct: {instruction}\nQuery: {text}")
    fb = FrozenBackbone(cfg, instruction="find the bank")
    assert fb.format(["a dog"]) == ["Instruct: find the bank\nQuery: a dog<|endoftext|>"]
    assert fb.with_instruction("x").format(["a"]) == ["Instruct: x\nQuery: a<|endoftext|>"]
    assert fb.with_instruction("x").model is fb.model
    ids = fb.tokenizer(fb.format(["a dog"]))["input_ids"][0]
    assert ids[-1] == fb.tokenizer.eos_token_id
    no_eos = FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir, append_eos=False))
    assert no_eos.format(["a dog"]) == ["a dog"]


def test_truncation_keeps_appended_eos(tiny_qwen3_dir):
    fb = FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir, max_length=4))
    text = "a man is eating a piece of bread"
    assert fb.token_lengths([text]).tolist() == [4]
    ids = fb.tokenizer.encode("a man is eating a piece of bread")[:3] + [fb.tokenizer.eos_token_id]
    with torch.no_grad():
        ref = fb.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    torch.testing.assert_close(fb.token_states([text])[0], ref, atol=1e-5, rtol=1e-4)


def test_bert_truncation_and_no_eos(tiny_bert_dir):
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, max_length=5))
    assert fb.token_lengths(["a man is eating a piece of bread", "a"]).tolist() == [5, 3]
    with pytest.raises(ValueError, match="no eos_token"):
        FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, append_eos=True))
    with pytest.raises(ValueError, match="placeholder"):
        FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, prompt="no text here"))


def test_frozen_eval_and_tokenizer_setup(tiny_bert_backbone, tiny_qwen3_backbone):
    for fb in (tiny_bert_backbone, tiny_qwen3_backbone):
        assert not fb.model.training
        assert not any(p.requires_grad for p in fb.model.parameters())
        assert fb.tokenizer.pad_token is not None
    assert tiny_bert_backbone.model.pooler is None
    assert tiny_qwen3_backbone.tokenizer.pad_token == tiny_qwen3_backbone.tokenizer.eos_token


def test_bf16_autocast_close_to_fp32(tiny_bert_dir):
    fp32 = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir)).pooled(TEXTS)
    bf16 = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, precision=Precision.bf16)).pooled(TEXTS)
    assert bf16.dtype == torch.float32
    assert not torch.equal(fp32, bf16)  # autocast really changed the computation
    assert torch.nn.functional.cosine_similarity(fp32, bf16).min() > 0.99


@pytest.mark.parametrize(
    ("texts", "match"),
    [
        ([], "empty"),
        (["ok", ""], r"texts\[1\] = ''"),
        (["ok", "  "], r"texts\[1\]"),
        ("a text", "list"),
        (["ok", 3], r"texts\[1\] = 3"),
    ],
)
def test_text_validation(tiny_bert_backbone, texts, match):
    with pytest.raises(TextValidationError, match=match):
        tiny_bert_backbone.pooled(texts)


def test_a_lone_surrogate_is_named_with_its_row_on_the_cached_path_too(tiny_bert_backbone, tmp_path):
    # half an emoji (JSON's "\ud83d" alone) failed inside the tokenizer ("TextEncodeInput must be ...") or,
    # through the cache, in the texts' hash ("surrogates not allowed"), neither naming the row
    from ucse.backbone.cache import HiddenStateCache

    texts = ["good food", "good food \ud83d"]
    message = r"texts\[1\] = 'good food \\ud83d' holds '\\ud83d' at position 10, half of a character"
    with pytest.raises(TextValidationError, match=message):
        tiny_bert_backbone.pooled(texts)
    with pytest.raises(TextValidationError, match=message):
        HiddenStateCache(tmp_path).get_or_build(tiny_bert_backbone, texts, "T", "train")


def test_forward_counter(tiny_bert_dir):
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    fb.token_states(TEXTS, batch_size=4)
    assert fb.forward_calls == 3  # ceil(9 / 4)


def test_texts_cut_at_max_length_are_reported_once(tiny_bert_dir, caplog):
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, max_length=8))
    texts = ["a b", "one two three four five six seven eight nine", "short text", "w " * 40]
    lengths = fb.token_lengths(texts)
    assert lengths.max() == 8  # [CLS] + 6 words + [SEP]: cut
    told = [r.getMessage() for r in caplog.records if "where longer ones are cut" in r.getMessage()]
    assert len(told) == 1 and told[0].startswith(
        f"{int((lengths >= 8).sum())} of 4 texts encoded together reach the 8-token limit"
    )
    assert "can go up to the model's" in told[0]  # the tiny model takes more than 8
    fb.token_lengths(texts)  # once per loaded backbone
    assert sum("where longer ones are cut" in r.getMessage() for r in caplog.records) == 1
    caplog.clear()
    FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, max_length=64)).token_lengths(texts[:3])
    assert not any("where longer ones are cut" in r.getMessage() for r in caplog.records)


def test_texts_of_mostly_unknown_tokens_are_reported_once(tiny_bert_dir, tiny_qwen3_dir, caplog):
    # WordPiece reads emoji (and words outside the tiny vocabulary) as [UNK]: such texts are one state to it
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    unk = fb.tokenizer.unk_token_id
    texts = ["a dog", "🙂", "a zzqx", "a dog zzqx"]  # known; all unknown; half unknown; a third unknown
    ids = [fb.tokenizer(t)["input_ids"] for t in texts]
    assert [row.count(unk) for row in ids] == [0, 1, 1, 1]  # the premise, by the tokenizer itself
    fb.token_lengths(texts)
    told = [r.getMessage() for r in caplog.records if "mostly tokens" in r.getMessage()]
    assert len(told) == 1 and told[0].startswith("2 of 4 texts encoded together are mostly tokens")
    assert "e.g. '🙂'" in told[0]
    fb.token_lengths(texts)  # once per loaded backbone
    assert sum("mostly tokens" in r.getMessage() for r in caplog.records) == 1
    assert fb.texts_unknown == 4  # but counted every time: predict's total over its blocks
    caplog.clear()
    FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir)).token_lengths(["a dog", "a dog zzqx"])
    # GPT-2-style tokenizers call their EOS the unknown token: the EOS appended for last-token pooling made
    # every one-word text "mostly unknown"
    qwen = FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir))
    qwen.tokenizer.unk_token = qwen.tokenizer.eos_token
    assert qwen.tokenizer.unk_token_id == qwen.tokenizer.eos_token_id and qwen.cfg.append_eos
    qwen.token_lengths(["dog", "a dog"])
    assert not any("mostly tokens" in r.getMessage() for r in caplog.records)
