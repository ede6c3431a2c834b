import pytest
import torch

from ucse.backbone.pooling import first_token_index, last_token_index, pool
from ucse.config import Pooling


def _hidden() -> torch.Tensor:
    # (B=2, T=4, H=2) with distinct, easy numbers: hidden[b, t] = [10 b + t, -(10 b + t)]
    vals = torch.tensor([[0.0, 1.0, 2.0, 3.0], [10.0, 11.0, 12.0, 13.0]])
    return torch.stack([vals, -vals], dim=-1)


RIGHT = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
LEFT = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])


def test_right_padded_by_hand():
    h = _hidden()
    assert torch.equal(pool(h, RIGHT, Pooling.mean), torch.tensor([[1.0, -1.0], [10.5, -10.5]]))
    assert torch.equal(pool(h, RIGHT, Pooling.last), torch.tensor([[2.0, -2.0], [11.0, -11.0]]))
    assert torch.equal(pool(h, RIGHT, Pooling.cls), torch.tensor([[0.0, -0.0], [10.0, -10.0]]))


def test_left_padded_by_hand():
    h = _hidden()
    assert torch.equal(pool(h, LEFT, "mean"), torch.tensor([[2.0, -2.0], [12.5, -12.5]]))
    assert torch.equal(pool(h, LEFT, "last"), torch.tensor([[3.0, -3.0], [13.0, -13.0]]))
    assert torch.equal(pool(h, LEFT, "cls"), torch.tensor([[1.0, -1.0], [12.0, -12.0]]))
    assert first_token_index(LEFT).tolist() == [1, 2]
    assert last_token_index(LEFT).tolist() == [3, 3]
    assert last_token_index(RIGHT).tolist() == [2, 1]


def test_pads_cannot_leak_and_output_is_fp32():
    h = _hidden().to(torch.bfloat16)
    h[0, 3] = float("nan")  # a pad position under RIGHT
    h[1, 0] = float("inf")  # a pad position under LEFT
    for mask in (RIGHT, LEFT):
        for strategy in Pooling:
            out = pool(h, mask, strategy)
            assert out.dtype == torch.float32
    assert torch.isfinite(pool(h, RIGHT, "mean")[0]).all()
    assert torch.isfinite(pool(h, LEFT, "mean")[1]).all()


def test_bad_inputs():
    h = _hidden()
    with pytest.raises(ValueError, match="rows \\[1\\]"):
        pool(h, torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0]]), "mean")
    with pytest.raises(ValueError, match="valid: last, mean, cls"):
        pool(h, RIGHT, "max")
    with pytest.raises(ValueError, match="hidden \\(B, T, H\\)"):
        pool(h[:, :3], RIGHT, "mean")


@pytest.mark.parametrize("strategy", ["last", "mean", "cls"])
def test_without_host_checks_an_empty_row_is_nan_and_no_error(strategy):
    h = _hidden()
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    out = pool(h, mask, strategy, host_checks=False)
    assert torch.isnan(out[1]).all()
    torch.testing.assert_close(out[0], pool(h[:1], mask[:1], strategy)[0])
