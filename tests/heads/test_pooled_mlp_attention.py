import pytest
import torch
from head_utils import make_seqs, pad_batch

from ucse.config import Pooling
from ucse.heads import AttentionPoolHead, GaussianTextCNN, MLPHead, PooledHead, matched_mlp_hidden


@pytest.fixture
def seqs():
    return make_seqs()


def _alone(head, x):
    return head(x.unsqueeze(0), torch.ones(1, len(x), dtype=torch.long))


@pytest.mark.parametrize("side", ["right", "left"])
def test_linear_head_last_token_reference(seqs, side):
    torch.manual_seed(0)
    head = PooledHead(8, 3, Pooling.last, embed_dim=5).eval()
    hidden, mask = pad_batch(seqs, side)
    out = head(hidden, mask)
    pooled = torch.stack([x[-1] for x in seqs])  # (B, H): the last real token
    torch.testing.assert_close(out.mean, head.bottleneck.mu(pooled))


@pytest.mark.parametrize("side", ["right", "left"])
def test_mean_head_masked_mean_reference(seqs, side):
    head = PooledHead(8, 3, Pooling.mean).eval()
    hidden, mask = pad_batch(seqs, side)
    pooled = torch.stack([x.mean(0) for x in seqs])
    torch.testing.assert_close(head(hidden, mask).mean, head.bottleneck.mu(pooled))


def test_linear_head_is_one_affine_map_without_ucl(seqs):
    head = PooledHead(8, 3, Pooling.cls, embed_dim=4).eval()
    hidden, mask = pad_batch(seqs, "right")
    proj, cls = head.bottleneck.mu, head.bottleneck.classifier
    w = cls.weight @ proj.weight  # (C, H)
    b = cls.weight @ proj.bias + cls.bias  # (C,)
    x = torch.stack([s[0] for s in seqs])  # the first token
    torch.testing.assert_close(head(hidden, mask).logits, x @ w.T + b)


@pytest.mark.parametrize("hidden", [1024, 768, 64])
@pytest.mark.parametrize("uncertainty", [False, True])
def test_mlp_default_width_matches_textcnn_params_within_5pct(hidden, uncertainty):
    width = matched_mlp_hidden(hidden, 77, uncertainty=uncertainty)
    d, n_b = hidden, 2 if uncertainty else 1
    mlp_params = width * (hidden + 1) + n_b * (width * d + d) + d * 77 + 77
    target = GaussianTextCNN.param_count(hidden, 77, uncertainty=uncertainty)
    assert abs(mlp_params - target) / target < 0.05
    if hidden == 64:  # count the real modules too (small enough to build quickly)
        head = MLPHead(hidden, 77, Pooling.mean, uncertainty=uncertainty)
        assert sum(p.numel() for p in head.parameters()) == mlp_params
        cnn = GaussianTextCNN(hidden, 77, uncertainty=uncertainty)
        assert abs(mlp_params - sum(p.numel() for p in cnn.parameters())) / target < 0.05


def test_mlp_head_forward_and_explicit_width(seqs):
    head = MLPHead(8, 3, Pooling.last, mlp_hidden=11, uncertainty=True).eval()
    hidden, mask = pad_batch(seqs, "left")
    out = head(hidden, mask)
    assert head.adapter[0].out_features == 11
    assert out.mean.shape == (5, 8) and out.var.shape == (5, 8) and out.logits.shape == (5, 3)
    torch.testing.assert_close(out.mean[1], _alone(head, seqs[1]).mean[0])


@pytest.mark.parametrize("side", ["right", "left"])
def test_attention_pads_get_zero_weight_and_padding_invariance(seqs, side):
    torch.manual_seed(0)
    head = AttentionPoolHead(8, 3, uncertainty=True).eval()
    hidden, mask = pad_batch(seqs, side, fill=float("nan"))
    weights = head.attention_weights(hidden, mask)
    assert torch.all(weights[mask == 0] == 0)
    torch.testing.assert_close(weights.sum(1), torch.ones(5))
    out = head(hidden, mask)
    for i, x in enumerate(seqs):
        alone = _alone(head, x)
        torch.testing.assert_close(out.mean[i], alone.mean[0], rtol=1e-5, atol=1e-5)
        # reference: w^T tanh(W h_t) softmax over the sequence alone
        a = torch.softmax(head.score(torch.tanh(head.proj(x))).squeeze(-1), dim=0)
        torch.testing.assert_close(out.mean[i], head.bottleneck.mu(a @ x), rtol=1e-5, atol=1e-5)
