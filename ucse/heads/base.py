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

    host_checks: bool | None = None
    """Read the mask's checks back to the host, so that a refused mask (a row without real tokens; for the
    TextCNN also padding between real tokens) raises; otherwise no read stalls the device's queue and a
    refused row's outputs come out NaN (the training loop's finite check names the step; the backbone's own
    masks are never refused). ``None``: everywhere but CUDA. A runtime choice, not a hyperparameter."""

    def checks_on_host(self, hidden: torch.Tensor) -> bool:
        """Whether this forward reads its mask checks back to the host (:attr:`host_checks`)."""
        return self.host_checks if self.host_checks is not None else not hidden.is_cuda

    @classmethod
    def state_problem(cls, state: dict[str, torch.Tensor]) -> str | None:
        """What is wrong with the values of a state dict of this head type, or ``None``.

        The bounds the head's own setters enforce, checked again on weights read back from disk (names and
        shapes are checked before this is called). None here; a head type with bounded buffers overrides it.
        """
        return None

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


def check_inputs(hidden: torch.Tensor, mask: torch.Tensor, host_checks: bool = True) -> torch.Tensor:
    """Validate a head's inputs and return the mask as bool.

    Args:
        hidden: (B, T, H) token states.
        mask: (B, T) 1/True for real tokens, 0/False for padding.
        host_checks: also check for empty rows, a read back to the host (:attr:`Head.host_checks`); without
            it the shapes alone are checked and the head makes an empty row's outputs NaN.

    Returns:
        (B, T) bool mask.

    Raises:
        ValueError: on wrong ranks or shapes, or (with ``host_checks``) a row without any real token (every
            pooling would be undefined for it: a masked max or softmax over nothing).
    """
    keep = check_shapes(hidden, mask)
    if host_checks:
        raise_empty_rows((~keep.any(dim=1)).cpu())
    return keep
