import pytest
import torch
import torch.nn.functional as F
from head_utils import make_seqs, pad_batch

from ucse.heads import GaussianTextCNN


@pytest.fixture
def seqs():
    return make_seqs()


def _trainable(m):
    return sum(p.numel() for p in m.parameters() if p.requires_grad)


@pytest.mark.parametrize(("hidden", "paper_millions"), [(1024, 19.0), (768, 10.6)])
def test_parameter_count_matches_paper_table6(hidden, paper_millions):
    head = GaussianTextCNN(hidden, 77)  # kernels (3, 4, 5), H filters, D = H, UCL on
    n = _trainable(head)
    assert abs(n / 1e6 - paper_millions) <= 0.1
    assert n == GaussianTextCNN.param_count(hidden, 77)


def test_param_count_closed_form_other_settings():
    for kw in ({"uncertainty": False}, {"num_filters": 5, "embed_dim": 3}, {"kernel_sizes": (2,)}):
        assert _trainable(GaussianTextCNN(16, 4, **kw)) == GaussianTextCNN.param_count(16, 4, **kw)


def _kim_reference(head, x):
    """Plain (unbatched, unpadded) TextCNN mu for a sequence with L >= max(k)."""
    xt = x.T.unsqueeze(0)  # (1, H, L)
    feats = [F.relu(F.conv1d(xt, c.weight, c.bias)).amax(dim=2) for c in head.convs]
    return head.bottleneck.mu(torch.cat(feats, dim=1))[0]


@pytest.mark.parametrize("side", ["right", "left"])
def test_masked_pool_padded_batch_equals_items_alone(seqs, side):
    torch.manual_seed(0)
    head = GaussianTextCNN(8, 3, num_filters=6, embed_dim=4).eval()
    hidden, mask = pad_batch(seqs, side)
    out = head(hidden, mask)
    for i, x in enumerate(seqs):
        alone = head(x.unsqueeze(0), torch.ones(1, len(x), dtype=torch.long))
        torch.testing.assert_close(out.mean[i], alone.mean[0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out.logits[i], alone.logits[0], rtol=1e-5, atol=1e-5)
        if len(x) >= 5:
            torch.testing.assert_close(alone.mean[0], _kim_reference(head, x), rtol=1e-5, atol=1e-5)


def test_short_sequence_uses_its_tokens_only():
    torch.manual_seed(0)
    head = GaussianTextCNN(4, 2, kernel_sizes=(3,), num_filters=2).eval()
    x = torch.randn(2, 4)  # L = 2 < k = 3: one window = the two tokens + a zero column
    ref_in = torch.cat([x, torch.zeros(1, 4)]).T.unsqueeze(0)  # (1, H, 3)
    feat = F.relu(F.conv1d(ref_in, head.convs[0].weight, head.convs[0].bias)).amax(dim=2)
    got = head(x.unsqueeze(0), torch.ones(1, 2)).mean[0]
    torch.testing.assert_close(got, head.bottleneck.mu(feat)[0])


def test_train_mode_samples_and_eval_is_deterministic(seqs):
    torch.manual_seed(0)
    head = GaussianTextCNN(8, 3, num_filters=6, embed_dim=4, dropout=0.0)
    hidden, mask = pad_batch(seqs, "right")
    out = head.train()(hidden, mask)
    assert out.var is not None and out.var.shape == (5, 4) and torch.all(out.var > 0)
    assert not torch.allclose(out.z, out.mean)
    torch.testing.assert_close(out.logits, head.bottleneck.classifier(out.z))
    ev1, ev2 = head.eval()(hidden, mask), head(hidden, mask)
    torch.testing.assert_close(ev1.z, ev1.mean)
    torch.testing.assert_close(ev1.logits, ev2.logits)
    torch.testing.assert_close(ev1.logits, head.bottleneck.classifier(ev1.mean))


def test_without_uncertainty_var_is_none_and_grads_flow(seqs):
    head = GaussianTextCNN(8, 3, num_filters=6, uncertainty=False).train()
    hidden, mask = pad_batch(seqs, "left")
    out = head(hidden.to(torch.bfloat16), mask)  # cached states may be half precision
    assert out.var is None and out.log_var is None and torch.equal(out.z, out.mean)
    out.logits.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in head.parameters())


def test_bad_masks_are_rejected():
    head = GaussianTextCNN(4, 2)
    with pytest.raises(ValueError, match="no real token"):
        head(torch.randn(2, 3, 4), torch.tensor([[1, 1, 0], [0, 0, 0]]))
    with pytest.raises(ValueError, match="contiguous"):
        head(torch.randn(1, 3, 4), torch.tensor([[1, 0, 1]]))
    with pytest.raises(ValueError, match="hidden"):
        head(torch.randn(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="kernel_sizes"):
        GaussianTextCNN(4, 2, kernel_sizes=[0])


@pytest.mark.parametrize("side", ["right", "left"])
def test_non_finite_padding_does_not_leak(seqs, side):
    head = GaussianTextCNN(8, 3, num_filters=6).eval()
    hidden, mask = pad_batch(seqs, side, fill=float("nan"))
    ref, _ = pad_batch(seqs, side, fill=0.0)
    out = head(hidden, mask)
    assert torch.isfinite(out.mean).all()
    torch.testing.assert_close(out.mean, head(ref, mask).mean)


MODES = [  # (fuse_convs, windows_matmul, host_checks)
    (False, True, True),
    (True, False, True),
    (False, True, False),
    (True, False, False),
    (False, False, False),
]


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize(("fuse", "matmul", "host"), MODES)
def test_fused_and_sync_free_paths_equal_the_per_item_reference(seqs, side, fuse, matmul, host):
    """Every execution path (one zero-padded convolution, one per width, or one matrix product per width over
    unfolded windows; host-read extension or the widest fixed one) gives each padded row the outputs of the
    row alone, and the same gradients."""
    torch.manual_seed(0)
    head = GaussianTextCNN(8, 3, num_filters=6, embed_dim=4).eval()
    hidden, mask = pad_batch(seqs, side)
    head.fuse_convs, head.windows_matmul, head.host_checks = False, False, True
    ref = head(hidden, mask)  # per-width convolutions, host checks
    grads_ref = torch.autograd.grad(ref.logits.square().sum(), [c.weight for c in head.convs])
    head.fuse_convs, head.windows_matmul, head.host_checks = fuse, matmul, host
    out = head(hidden, mask)
    # float32 sums of <= 5 * 8 products reordered: a few ulps of values of order 10 (atol: cancellations)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.var, ref.var, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(out.logits.square().sum(), [c.weight for c in head.convs])
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-4)
    for i, x in enumerate(seqs):
        if len(x) >= 5:
            torch.testing.assert_close(out.mean[i], _kim_reference(head, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("fuse", "matmul"), [(False, False), (True, False), (False, True)])
def test_sync_free_path_turns_refused_rows_into_nan(fuse, matmul):
    """Without the host read a refused row (no real token, a hole in the mask) comes out NaN, the rest as
    the checked path gives them."""
    torch.manual_seed(0)
    head = GaussianTextCNN(4, 2, num_filters=3).eval()
    hidden = torch.randn(4, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0], [1, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1]])
    head.fuse_convs, head.windows_matmul, head.host_checks = fuse, matmul, False
    out = head(hidden, mask)
    assert torch.isnan(out.logits[1:3]).all() and torch.isfinite(out.logits[[0, 3]]).all()
    head.host_checks = True
    torch.testing.assert_close(
        out.logits[[0, 3]], head(hidden[[0, 3]], mask[[0, 3]]).logits, rtol=1e-5, atol=1e-5
    )
    with pytest.raises(ValueError, match="no real token"):
        head(hidden, mask)


def test_the_cpu_runs_window_products_under_bf16_autocast_and_convolutions_in_fp32(seqs, monkeypatch):
    """The default path on the CPU: matrix products over unfolded windows where autocast runs bf16 (oneDNN's
    bf16 convolution weight gradient is slow), convolutions in fp32; both give the same outputs."""
    torch.manual_seed(0)
    head = GaussianTextCNN(8, 3, num_filters=6, embed_dim=4).eval()
    hidden, mask = pad_batch(seqs, "right")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        head.windows_matmul = False
        conv = head(hidden, mask)
        head.windows_matmul = None

        def refuse(*args, **kwargs):
            raise AssertionError("a convolution ran")

        monkeypatch.setattr(torch.nn.Conv1d, "forward", refuse)
        monkeypatch.setattr(torch.nn.functional, "conv1d", refuse)
        out = head(hidden, mask)
    # bf16 rounds each product's inputs to 8 bits of mantissa (relative 2^-8 ~ 4e-3); sums of <= 40 terms
    torch.testing.assert_close(out.logits.float(), conv.logits.float(), rtol=3e-2, atol=3e-2)
    with pytest.raises(AssertionError, match="a convolution ran"):
        head(hidden, mask)  # fp32: the convolutions
