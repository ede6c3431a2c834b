"""The head contract's input checks: with the host read a refused mask raises; without it (CUDA's default) no
read happens and exactly the refused rows come out NaN, every other row as the checked path gives it."""

from __future__ import annotations

import pytest
import torch

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import Head, build_head

# every head type that is a module (``auto`` is a choice made in training)
TYPES = [t for t in HeadType if t is not HeadType.auto]


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(4, 6, 8, generator=g)  # (B, T, H)
    mask = torch.tensor(
        [[1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]]
    )  # rows 1 and 3 hold no real token
    return hidden, mask


@pytest.mark.parametrize("kind", TYPES, ids=[t.value for t in TYPES])
@pytest.mark.parametrize("pooling", [Pooling.last, Pooling.mean, Pooling.cls])
def test_without_host_checks_empty_rows_are_nan_and_the_rest_unchanged(kind, pooling, monkeypatch):
    torch.manual_seed(0)
    cfg = HeadConfig(type=kind, num_filters=4, embed_dim=4, kernel_sizes=[1, 2])
    head = build_head(cfg, 8, 3, pooling).eval()
    hidden, mask = _batch()
    ok = [0, 2]
    with pytest.raises(ValueError, match=r"\[1, 3\] .*no real token"):
        head(hidden, mask)  # the CPU default reads the checks back
    ref = head(hidden[ok], mask[ok])
    monkeypatch.setattr(Head, "host_checks", False)  # what CUDA does; on the base, so a blend's parts follow
    out = head(hidden, mask)
    for name in ("logits", "mean", "var"):
        got, want = getattr(out, name), getattr(ref, name)
        if want is None:
            assert got is None
            continue
        assert torch.isnan(got[[1, 3]]).all(), f"{kind.value}: {name} of an empty row is not NaN"
        # the same arithmetic on the same rows, batched with other rows: a convolution library may pick
        # another algorithm for another batch size (AVX2 vs AVX-512 too), so float32 rounding of values of
        # order 1 summed over <= 2 * 8 products: within 1e-5
        torch.testing.assert_close(got[ok], want, rtol=1e-5, atol=1e-5)
