"""``backbone.layer``: the token states of a chosen layer, checked against transformers' own hidden_states."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModel

from ucse.backbone import FrozenBackbone
from ucse.backbone.cache import HiddenStateCache
from ucse.heads.meta import stored_backbone

TEXTS = ["the bank card", "a dog and a guitar here", "hello"]


def _reference(model_dir, texts, layer):
    """transformers directly: hidden_states[layer] of each text alone (no padding), fp32."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    with torch.inference_mode():
        return [
            model(**tok(t, return_tensors="pt"), output_hidden_states=True).hidden_states[layer][0]
            for t in texts
        ]


@pytest.mark.parametrize("layer", [0, 1, -2])
def test_a_layer_gives_that_layers_states(tiny_bert_cfg, tiny_bert_dir, layer):
    bb = FrozenBackbone(dataclasses.replace(tiny_bert_cfg, layer=layer, precision="fp32"))
    got = bb.token_states(TEXTS)
    for g, ref in zip(got, _reference(tiny_bert_dir, TEXTS, layer), strict=True):
        torch.testing.assert_close(g.float(), ref, atol=1e-5, rtol=1e-5)


def test_the_last_layer_by_index_is_the_default(tiny_bert_cfg):
    last = FrozenBackbone(dataclasses.replace(tiny_bert_cfg, precision="fp32")).token_states(TEXTS)
    by_index = FrozenBackbone(dataclasses.replace(tiny_bert_cfg, layer=-1, precision="fp32"))
    for a, b in zip(last, by_index.token_states(TEXTS), strict=True):
        torch.testing.assert_close(a, b)
    assert by_index.layer == 2  # 2 layers: index 2 of embeddings + 2 outputs


def test_layers_get_their_own_cache_entries(tiny_bert_cfg, tmp_path):
    cache = HiddenStateCache(tmp_path)
    keys = {
        cache.key(FrozenBackbone(dataclasses.replace(tiny_bert_cfg, layer=layer)), TEXTS, "t", "pool")
        for layer in (None, 1, 2, -1)
    }
    # None (last) keeps the key it always had; 2 and -1 are the same layer, so one entry; 1 differs.
    assert len(keys) == 3


def test_an_impossible_layer_fails_naming_the_range(tiny_bert_cfg):
    with pytest.raises(ValueError, match=r"backbone.layer=3 is out of range .* 2 layers"):
        FrozenBackbone(dataclasses.replace(tiny_bert_cfg, layer=3))


def test_a_stored_layer_is_range_checked(tmp_path):
    with pytest.raises(ValueError, match="meta.backbone.layer"):
        stored_backbone({"backbone": {"layer": 10**6}}, tmp_path / "config.json")
    assert stored_backbone({"backbone": {"layer": 3}}, tmp_path)["layer"] == 3


def test_cls_pooling_on_a_decoder_is_refused_naming_the_fix(tiny_qwen3_cfg, tiny_bert_cfg):
    # a decoder trial: head=logreg on a decoder's first-token vectors answered one label for every text
    for layer in (None, 1):
        with pytest.raises(
            ValueError, match=f"first token, but in .* at backbone.layer={layer or 'null'}.*a decoder"
        ):
            FrozenBackbone(dataclasses.replace(tiny_qwen3_cfg, pooling="cls", layer=layer))
    # an encoder's embedding layer (0) mixes nothing in yet: refused too, the message naming both causes
    with pytest.raises(ValueError, match="or the embedding layer, 0"):
        FrozenBackbone(dataclasses.replace(tiny_bert_cfg, pooling="cls", layer=0))
    # the check by hand: the decoder's first-position states do not see the tokens after them
    from ucse.backbone.pooling import first_token_sees_ahead

    bb = FrozenBackbone(dataclasses.replace(tiny_qwen3_cfg, pooling="last"))
    assert not first_token_sees_ahead(bb.model, None, False)
    enc = FrozenBackbone(dataclasses.replace(tiny_bert_cfg, pooling="cls"))  # an encoder's CLS sees the text
    assert first_token_sees_ahead(enc.model, None, True) and enc.forward_calls == 0  # not a pass over texts
