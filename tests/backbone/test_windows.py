"""``backbone.long_texts=windows``: long texts read whole, window by window, against a by-hand reference."""

from __future__ import annotations

import pytest
import torch
from tiny_models import make_tiny_bert_cfg, make_tiny_qwen3_cfg

from ucse.backbone import FrozenBackbone
from ucse.backbone.cache import HiddenStateCache
from ucse.backbone.windows import framing, stitch, window_rows
from ucse.config import ConfigError, LongTexts, PaddingSide, build_config

WORDS = "the bank card was charged twice and the refund never came back to my account".split()
TOL = {"rtol": 1e-5, "atol": 1e-5}  # the same fp32 sums in batches of other shapes


def _text(n: int, shift: int = 0) -> str:
    return " ".join(WORDS[(i + shift) % len(WORDS)] for i in range(n))


def _windows(tiny_bert_dir, max_length=12, max_windows=8):
    cfg = make_tiny_bert_cfg(
        tiny_bert_dir, long_texts=LongTexts.windows, max_length=max_length, max_windows=max_windows
    )
    return FrozenBackbone(cfg)


def _by_hand(fb: FrozenBackbone, text: str, max_length: int) -> torch.Tensor:
    """(T, H): every window built from the untruncated ids and read alone; framing kept once.

    Windows of ``max_length - 2`` content tokens from the start; the last one ends at the text's end and
    its tokens that the window before it read are dropped.
    """
    ids = fb.tokenizer(text)["input_ids"]  # [CLS] content [SEP], untruncated
    content, step = ids[1:-1], max_length - 2
    if len(ids) <= max_length:
        with torch.inference_mode():
            return fb.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    starts = list(range(0, len(content), step))
    starts[-1] = len(content) - step  # end-aligned
    read, parts = 0, []  # content tokens laid down so far
    for k, start in enumerate(starts):
        window = [ids[0], *content[start : start + step], ids[-1]]
        with torch.inference_mode():
            out = fb.model(input_ids=torch.tensor([window])).last_hidden_state[0]  # (len, H)
        new = out[1 + (read - start) : 1 + step]  # this window's content not laid down yet
        parts += ([out[:1]] if k == 0 else []) + [new] + ([out[-1:]] if k == len(starts) - 1 else [])
        read = start + step
    return torch.cat(parts)


def test_framing_is_read_from_the_tokenizer(tiny_bert_backbone, tiny_qwen3_backbone):
    assert framing(tiny_bert_backbone.tokenizer) == (1, 1)  # [CLS] ... [SEP]
    assert framing(tiny_qwen3_backbone.tokenizer) == (0, 0)  # the appended EOS is part of the text


def test_long_texts_are_read_whole_as_their_windows_by_hand(tiny_bert_dir):
    fb = _windows(tiny_bert_dir)
    texts = [_text(5), _text(31, 1), _text(10, 2), _text(47, 3)]  # 7, 33, 12 and 49 tokens with framing
    got = fb.token_states(texts, batch_size=3)
    assert [len(t) for t in got] == [7, 33, 12, 49]  # every token, framing once
    assert fb.token_lengths(texts).tolist() == [7, 33, 12, 49]
    for text, states in zip(texts, got):
        torch.testing.assert_close(states, _by_hand(fb, text, 12), **TOL)
    # a text that fits is read exactly as with truncation
    plain = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, max_length=12)).token_states(
        texts[:1] + texts[2:3]
    )
    torch.testing.assert_close(got[0], plain[0], **TOL)
    torch.testing.assert_close(got[2], plain[1], **TOL)
    # mean pooling averages over every window's tokens
    pooled = fb.pooled(texts)
    torch.testing.assert_close(pooled[3], got[3].mean(0), **TOL)


def test_left_padding_and_the_max_windows_cut(tiny_bert_dir, caplog):
    fb = FrozenBackbone(
        make_tiny_bert_cfg(
            tiny_bert_dir,
            long_texts=LongTexts.windows,
            max_length=12,
            max_windows=2,
            padding_side=PaddingSide.left,
        )
    )
    texts = [_text(40), _text(3)]
    (idx, hidden, mask), *_ = list(fb.iter_states(texts, batch_size=2))
    assert mask.sum(1)[idx.argsort()].tolist() == [22, 5]  # 2 windows of 10 content tokens, framed once
    assert mask[:, -1].all()  # padded on the left
    assert "max_windows=2 windows of 12 tokens" in caplog.text and "reach the 22-token limit" in caplog.text


def test_stitch_and_window_rows_on_a_hand_made_batch():
    rows = [{"input_ids": [101, 1, 2, 3, 4, 5, 102]}, {"input_ids": [101, 9, 102]}]
    windows, owner, repeat = window_rows(rows, 1, 1, 4)  # 2 content tokens per window
    # the last window ends at the text's end, reaching back over token 4 (never a lone token 5)
    want = [[101, 1, 2, 102], [101, 3, 4, 102], [101, 4, 5, 102], [101, 9, 102]]
    assert [w["input_ids"] for w in windows] == want
    assert owner == [0, 0, 0, 1] and repeat == [0, 0, 1, 0]
    hidden = torch.zeros(4, 4, 1)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0]])
    for w, win in enumerate(windows):  # each state is its token id, tagged with its window
        hidden[w, : len(win["input_ids"]), 0] = torch.tensor(win["input_ids"], dtype=torch.float) + w / 10
    out, out_mask = stitch(hidden, mask, (owner, repeat), 1, 1, left_pad=False)
    assert out[0, :, 0].tolist() == pytest.approx([101.0, 1.0, 2.0, 3.1, 4.1, 5.2, 102.2])
    assert out_mask.tolist() == [[1] * 7, [1, 1, 1, 0, 0, 0, 0]]
    # content an exact multiple of the step: no reaching back
    assert window_rows([{"input_ids": [101, 1, 2, 3, 4, 102]}], 1, 1, 4)[2] == [0, 0]
    with pytest.raises(ValueError, match="no room"):
        window_rows(rows, 1, 1, 2)


def test_the_cache_keeps_windows_apart_and_stores_every_token(tiny_bert_dir, tmp_path):
    texts = [_text(31, i) for i in range(5)]
    cache = HiddenStateCache(tmp_path)
    whole = cache.get_or_build(_windows(tiny_bert_dir), texts, "Toy", "train")
    cut = cache.get_or_build(
        FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, max_length=12)), texts, "Toy", "train"
    )
    assert whole.path != cut.path and whole.lengths.tolist() == [33] * 5 and cut.lengths.tolist() == [12] * 5


def test_windows_with_a_prompt_are_refused_in_one_line(tiny_qwen3_dir):
    with pytest.raises(ConfigError, match="long_texts=windows reads each window on its own"):
        build_config(["backbone=qwen3-embedding-0.6b", "backbone.long_texts=windows"])
    make_tiny_qwen3_cfg(tiny_qwen3_dir, long_texts=LongTexts.windows)  # '{text}' alone: allowed


def test_a_saved_heads_window_settings_are_checked_as_untrusted(tmp_path):
    from ucse.heads.meta import stored_backbone

    ok = stored_backbone({"backbone": {"long_texts": "windows", "max_windows": 4}}, tmp_path / "config.json")
    assert ok["max_windows"] == 4
    with pytest.raises(ValueError, match=r"meta.backbone.max_windows=0 is out of range"):
        stored_backbone({"backbone": {"max_windows": 0}}, tmp_path / "config.json")
    with pytest.raises(ValueError, match=r"meta.backbone.long_texts='slices' is invalid"):
        stored_backbone({"backbone": {"long_texts": "slices"}}, tmp_path / "config.json")
    with pytest.raises(ValueError, match=r"meta.backbone.long_texts=windows with a prompt"):
        stored_backbone({"backbone": {"long_texts": "windows", "prompt": "Q: {text}"}}, tmp_path / "x.json")


def test_max_batch_tokens_counts_the_padded_windows(tiny_bert_dir):
    # 23 tokens read as 3 windows of 12: 36 tokens, so 72 takes two such texts a batch, not three
    cfg = make_tiny_bert_cfg(
        tiny_bert_dir, long_texts=LongTexts.windows, max_length=12, max_batch_tokens=72, batch_size=64
    )
    fb = FrozenBackbone(cfg)
    texts = [_text(21, i) for i in range(3)]
    assert fb.token_lengths(texts).tolist() == [23] * 3
    sizes = [len(idx) for idx, hidden, mask in fb.iter_states(texts)]
    assert sizes == [2, 1]


def test_a_decoders_last_window_never_reads_its_eos_alone(tiny_qwen3_dir):
    # (a review) 13-token texts in windows of 12: the last window was the EOS alone, the same state for every
    # text, so last-token pooling gave two different texts the same vector
    fb = FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir, long_texts=LongTexts.windows, max_length=12))
    texts = [_text(12), _text(12, 5)]
    assert fb.token_lengths(texts).tolist() == [13, 13]
    pooled = fb.pooled(texts)
    assert not torch.allclose(pooled[0], pooled[1], atol=1e-3)
    ids = fb.tokenizer(fb.format(texts[:1]))["input_ids"][0]
    with torch.inference_mode():  # the last window: the text's last 12 tokens, EOS last
        want = fb.model(input_ids=torch.tensor([ids[1:]])).last_hidden_state[0, -1]
    torch.testing.assert_close(pooled[0], want, **TOL)
