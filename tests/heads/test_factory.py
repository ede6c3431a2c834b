import pytest
import torch
from head_utils import make_seqs, pad_batch

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import AttentionPoolHead, GaussianTextCNN, MLPHead, PooledHead, build_head

CLASSES = {
    HeadType.textcnn: GaussianTextCNN,
    HeadType.linear: PooledHead,
    HeadType.mean: PooledHead,
    HeadType.mlp: MLPHead,
    HeadType.attention: AttentionPoolHead,
}


@pytest.mark.parametrize("head_type", list(CLASSES))
@pytest.mark.parametrize("uncertainty", [False, True])
def test_build_each_head_and_run_it(head_type, uncertainty):
    cfg = HeadConfig(type=head_type, gaussian=uncertainty, num_filters=4, embed_dim=6, mlp_hidden=5)
    head = build_head(cfg, hidden_size=8, num_classes=3, pooling=Pooling.last)
    assert type(head) is CLASSES[head_type]
    assert head.spec.config is cfg and head.spec.pooling is Pooling.last
    hidden, mask = pad_batch(make_seqs(), "left")
    out = head.train()(hidden, mask)
    assert out.mean.shape == out.z.shape == (5, 6) and out.logits.shape == (5, 3)
    assert (out.var is not None) == uncertainty


def test_mean_head_ignores_backbone_pooling_and_linear_follows_it():
    assert build_head(HeadConfig(type=HeadType.mean), 8, 3, Pooling.last).pooling is Pooling.mean
    assert build_head(HeadConfig(type=HeadType.linear), 8, 3, "cls").pooling is Pooling.cls


def test_textcnn_defaults_follow_hidden_size():
    head = build_head(HeadConfig(), 16, 4, Pooling.mean)
    assert [c.kernel_size[0] for c in head.convs] == [3, 4, 5]
    assert head.convs[0].out_channels == 16 and head.bottleneck.mu.out_features == 16
    assert head.bottleneck.log_var is not None and head.bottleneck.dropout.p == 0.5


def test_bad_configs_are_rejected_with_guidance():
    with pytest.raises(ValueError, match="ucse.training.auto"):
        build_head(HeadConfig(type=HeadType.auto), 8, 3, Pooling.mean)
    with pytest.raises(ValueError, match="Did you mean 'textcnn'"):
        build_head(HeadConfig(type="textcnm"), 8, 3, Pooling.mean)
    with pytest.raises(ValueError, match="backbone.pooling"):
        build_head(HeadConfig(), 8, 3, "eos")
    with pytest.raises(ValueError, match="num_classes"):
        build_head(HeadConfig(), 8, 1, Pooling.mean)
    with pytest.raises(ValueError, match="head.dropout"):
        build_head(HeadConfig(dropout=1.0), 8, 3, Pooling.mean)
    with pytest.raises(ValueError, match="head.embed_dim"):
        build_head(HeadConfig(embed_dim=0), 8, 3, Pooling.mean)


def test_heads_run_in_bf16():
    head = build_head(HeadConfig(num_filters=4), 8, 3, Pooling.mean).to(torch.bfloat16).eval()
    hidden, mask = pad_batch(make_seqs(), "right")
    assert head(hidden.half(), mask).logits.dtype == torch.bfloat16
