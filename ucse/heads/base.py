"""The one head contract: ``forward(hidden, mask) -> HeadOutput(mean, var | None, logits)``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class HeadOutput:
    """What every head returns for a batch.

    Attributes:
        mean: (B, D) the embedding mu; the sentence representation used at inference.
        var: (B, D) sigma^2 from the variance branch, or ``None`` for deterministic heads.
        logits: (B, C) class scores. In training mode with a variance branch they are computed on the
            reparameterised sample z; in eval mode on mu (deterministic).
        z: (B, D) the vector the logits were computed on (z in training with UCL, else mu); the
            contrastive losses act on it.
    """

    mean: torch.Tensor
    var: torch.Tensor | None
    logits: torch.Tensor
    z: torch.Tensor

    @property
    def log_var(self) -> torch.Tensor | None:
        """(B, D) log sigma^2, or ``None``."""
        return None if self.var is None else torch.log(self.var)


class Head(nn.Module, ABC):
    """Base class of all trainable heads.

    Subclasses implement ``forward(hidden, mask)`` where ``hidden`` is (B, T, H) token states of the
    frozen backbone (any float dtype; heads compute in their own parameter dtype) and ``mask`` is (B, T)
    with 1 for real tokens, 0 for padding, padding on either side.
    """

    @abstractmethod
    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """Map (B, T, H) token states and a (B, T) mask to a HeadOutput."""


def check_shapes(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Validate a head's input shapes (no device sync) and return the mask as bool (B, T).

    Raises:
        ValueError: on wrong ranks or shapes.
    """
    if hidden.dim() != 3 or mask.dim() != 2 or hidden.shape[:2] != mask.shape:
        raise ValueError(
            f"Head inputs must be hidden (B, T, H) and mask (B, T); got hidden {tuple(hidden.shape)} and "
            f"mask {tuple(mask.shape)}. Pass the backbone's last hidden state and its attention mask."
        )
    return mask.bool()


def raise_empty_rows(empty: torch.Tensor) -> None:
    """Raise for (B,) bool ``empty`` rows (already on the host) that hold no real token."""
    rows = empty.nonzero().flatten().tolist()
    if rows:
        raise ValueError(
            f"Rows {rows[:10]} of the mask have no real token; every row needs at least one "
            "(drop empty texts before encoding)."
        )


def check_inputs(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Validate a head's inputs and return the mask as bool.

    Args:
        hidden: (B, T, H) token states.
        mask: (B, T) 1/True for real tokens, 0/False for padding.

    Returns:
        (B, T) bool mask.

    Raises:
        ValueError: on wrong ranks or shapes, or a row without any real token (every pooling would be
            undefined for it: a masked max or softmax over nothing).
    """
    keep = check_shapes(hidden, mask)
    raise_empty_rows((~keep.any(dim=1)).cpu())
    return keep
