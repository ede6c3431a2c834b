"""Pooling token states into one sentence vector; works for left and right padding alike."""

from __future__ import annotations

import torch

from ucse.config import Pooling

POOLINGS = tuple(p.value for p in Pooling)


def _check(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Validate shapes and return the mask as bool (B, T)."""
    if hidden.dim() != 3 or mask.dim() != 2 or hidden.shape[:2] != mask.shape:
        raise ValueError(
            f"pool expects hidden (B, T, H) and mask (B, T); got {tuple(hidden.shape)}, {tuple(mask.shape)}."
        )
    keep = mask.bool()
    empty = (~keep.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"pool: rows {empty} of the mask have no real token; every row needs at least one.")
    return keep


def first_token_index(mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of the first non-pad token of each row of a (B, T) mask."""
    return mask.bool().int().argmax(dim=1)  # argmax returns the first maximal position


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of the last non-pad token of each row of a (B, T) mask."""
    positions = torch.arange(mask.shape[1], device=mask.device)  # (T,)
    return (positions * mask.bool()).argmax(dim=1)  # the largest real position is the unique maximum


def pool(hidden: torch.Tensor, mask: torch.Tensor, strategy: Pooling | str) -> torch.Tensor:
    """Pool token states into sentence vectors.

    Args:
        hidden: (B, T, H) token states, any float dtype; padded positions may hold anything (even NaN).
        mask: (B, T) 1 for real tokens, 0 for padding, padding on either side.
        strategy: ``last`` (last real token, e.g. EOS), ``mean`` (masked mean) or ``cls`` (first real token).

    Returns:
        (B, H) float32 sentence vectors.

    Raises:
        ValueError: bad shapes, a row without real tokens, or an unknown strategy.
    """
    try:
        strategy = Pooling(strategy)
    except ValueError:
        raise ValueError(f"Unknown pooling '{strategy}'; valid: {', '.join(POOLINGS)}.") from None
    keep = _check(hidden, mask)  # (B, T)
    hidden = hidden.float()
    rows = torch.arange(hidden.shape[0], device=hidden.device)  # (B,)
    if strategy is Pooling.last:
        return hidden[rows, last_token_index(keep)]  # (B, H)
    if strategy is Pooling.cls:
        return hidden[rows, first_token_index(keep)]  # (B, H)
    # where() rather than multiply so that non-finite values at pads cannot leak in.
    summed = torch.where(keep.unsqueeze(-1), hidden, 0.0).sum(dim=1)  # (B, H)
    return summed / keep.sum(dim=1, keepdim=True).to(hidden.dtype)  # (B, H)


def unit_pool(hidden: torch.Tensor, mask: torch.Tensor, strategy: Pooling | str) -> torch.Tensor:
    """(B, H) float32 L2-normalised :func:`pool` vectors.

    The features of the linear probe (fitting and inference) and of the out-of-scope flag: one definition,
    so all of them read exactly the same vectors.
    """
    return torch.nn.functional.normalize(pool(hidden, mask, strategy), dim=-1)
