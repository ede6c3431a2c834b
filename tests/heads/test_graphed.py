"""The CUDA-graphed head (ucse.heads.graphed): its shape buckets, the padding it adds (outputs independent
of it for every head type), its eager path off CUDA, and on a CUDA device the replayed outputs against eager
ones."""

from __future__ import annotations

import logging

import pytest
import torch

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import GaussianTextCNN, Head, build_head
from ucse.heads import graphed as graphed_mod
from ucse.heads.graphed import GraphedHead, pad_batch, padded_length, padded_rows

TYPES = [t for t in HeadType if t is not HeadType.auto]
CUDA = torch.cuda.is_available()


def test_buckets_are_the_smallest_series_member_at_or_above_the_size():
    series = sorted({8 * 2**k for k in range(10)} | {12 * 2**k for k in range(10)})
    for t in range(1, 3000):
        want = next(s for s in series if s >= t)
        assert padded_length(t) == want
        assert t <= padded_length(t) <= max(8, 1.5 * t)  # at most half again beyond 8 positions
    for b in range(1, 1100):
        assert padded_rows(b) == next(2**k for k in range(12) if 2**k >= b)


def _batch(left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    lengths = [7, 3, 1, 5, 7]
    hidden = torch.randn(5, 7, 8, generator=g)  # (B, T, H)
    mask = torch.zeros(5, 7, dtype=torch.long)
    for i, n in enumerate(lengths):
        real = slice(7 - n, 7) if left else slice(0, n)
        mask[i, real] = 1
    return hidden.masked_fill(mask.unsqueeze(-1) == 0, 0.0), mask  # pads zero, as the backbone gives them


@pytest.mark.parametrize("cuda_paths", [False, True], ids=["cpu-paths", "cuda-paths"])
@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
@pytest.mark.parametrize("kind", TYPES, ids=[t.value for t in TYPES])
def test_padding_to_the_bucket_leaves_every_row_unchanged(kind, left, cuda_paths, monkeypatch):
    # What a graph replays is the head on the padded batch: its first B rows must be the head's own outputs.
    if cuda_paths:  # the paths the head takes on CUDA, where graphs run (fused widths, no host read)
        monkeypatch.setattr(GaussianTextCNN, "fuse_convs", True)
        monkeypatch.setattr(Head, "host_checks", False)
    torch.manual_seed(0)
    cfg = HeadConfig(type=kind, num_filters=4, embed_dim=4, kernel_sizes=[1, 2, 3])
    for pooling in (Pooling.last, Pooling.mean, Pooling.cls):
        head = build_head(cfg, 8, 3, pooling).eval()
        hidden, mask = _batch(left)
        with torch.inference_mode():
            want = head(hidden, mask)
            got = head(*pad_batch(hidden, mask, padded_rows(5), padded_length(7) + 4))  # 8 rows, 12 positions
        for name in ("mean", "var", "logits"):
            w, g = getattr(want, name), getattr(got, name)
            if w is None:
                assert g is None
                continue
            # float32 sums over more (zero) positions and rows: rounding only
            torch.testing.assert_close(g[:5], w, rtol=1e-5, atol=1e-5, msg=f"{kind.value} {pooling} {name}")
            assert torch.isfinite(g).all()  # the added rows are real (zero) rows, not empty ones


def test_pad_batch_by_hand():
    hidden = torch.arange(1.0, 7.0).view(1, 3, 2)
    mask = torch.tensor([[0, 1, 1]])
    h, m = pad_batch(hidden, mask, 2, 4)
    assert h.shape == (2, 4, 2) and m.tolist() == [[0, 1, 1, 0], [1, 1, 1, 1]]
    assert h[0, :3].equal(hidden[0]) and not h[0, 3:].any() and not h[1].any()


def test_off_cuda_it_is_the_eager_head():
    torch.manual_seed(0)
    head = build_head(
        HeadConfig(type=HeadType.textcnn, num_filters=4, kernel_sizes=[1, 2]), 8, 3, "mean"
    ).eval()
    hidden, mask = _batch(False)
    wrapped = GraphedHead(head)
    with torch.inference_mode():
        got, want = wrapped(hidden, mask), head(hidden, mask)
    assert got.logits.equal(want.logits) and got.mean.equal(want.mean)
    assert wrapped.graphs == {} and not wrapped.failed


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (run on a lent GPU)")
@pytest.mark.parametrize("kind", [HeadType.textcnn, HeadType.blend, HeadType.logreg], ids=lambda t: t.value)
def test_replayed_outputs_are_the_eager_ones_on_cuda(kind):
    torch.manual_seed(0)
    head = build_head(HeadConfig(type=kind), 64, 5, "mean").cuda().eval()
    wrapped = GraphedHead(head)
    g = torch.Generator(device="cuda").manual_seed(0)
    # batches of one bucket (64 rows, 48 positions) in falling length, then a smaller bucket, then the first
    # again: stale rows and positions of an earlier, longer batch must not reach a later one
    shapes = [(64, 45), (60, 40), (33, 33), (5, 9), (64, 45), (61, 34)]
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        for b, t in shapes:
            hidden = torch.randn(b, t, 64, device="cuda", generator=g)
            mask = torch.arange(t, device="cuda") < torch.randint(
                1, t + 1, (b, 1), device="cuda", generator=g
            )
            mask = mask.long()
            hidden = hidden.masked_fill(mask.unsqueeze(-1) == 0, 0.0)
            got = wrapped(hidden, mask)
            padded = head(*pad_batch(hidden, mask, padded_rows(b), padded_length(t)))
            plain = head(hidden, mask)
            for name in ("mean", "logits"):
                x, p, e = getattr(got, name), getattr(padded, name)[:b], getattr(plain, name)
                assert x.shape == e.shape
                torch.testing.assert_close(x, p, rtol=0, atol=0)  # the same kernels on the same inputs
                torch.testing.assert_close(x.float(), e.float(), rtol=2e-2, atol=2e-2)  # bf16 sums over pads
    assert len(wrapped.graphs) == 3 and not wrapped.failed


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (run on a lent GPU)")
def test_replaced_weights_drop_the_graphs_and_a_failed_capture_falls_back_once(monkeypatch, caplog):
    torch.manual_seed(0)
    head = build_head(HeadConfig(type=HeadType.logreg), 16, 3, "mean").cuda().eval()
    wrapped = GraphedHead(head)
    hidden, mask = torch.randn(4, 10, 16, device="cuda"), torch.ones(4, 10, dtype=torch.long, device="cuda")
    with torch.inference_mode():
        wrapped(hidden, mask)
        head.load_state_dict({k: v + 1 for k, v in head.state_dict().items()}, assign=True)  # new tensors
        got = wrapped(hidden, mask)
        torch.testing.assert_close(got.logits, head(hidden, mask).logits, rtol=0, atol=0)
        monkeypatch.setattr(graphed_mod, "MAX_GRAPHS", 1)
        wrapped(hidden[:, :3], mask[:, :3])  # a second shape beyond the cap: eager, nothing captured
        assert len(wrapped.graphs) == 1

        def no_capture(*args, **kwargs):
            raise RuntimeError("operation not permitted when stream is capturing")

        monkeypatch.setattr(torch.cuda, "CUDAGraph", no_capture)
        fresh = GraphedHead(head)
        with caplog.at_level(logging.WARNING, logger="ucse.heads.graphed"):
            out = fresh(hidden, mask)
            fresh(hidden, mask)
        torch.testing.assert_close(out.logits, head(hidden, mask).logits, rtol=0, atol=0)
    assert fresh.failed and len([r for r in caplog.records if "capture" in r.message]) == 1
