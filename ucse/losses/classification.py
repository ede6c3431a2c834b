"""Softmax classification loss (paper Eq. 4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ucse.losses.precision import at_least_fp32


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean softmax cross-entropy, ``L_softmax`` of Eq. 4.

    ``1/n sum_i -log softmax(W z_i)[y_i]``; the classifier ``W`` lives in the head, so this is exactly
    ``F.cross_entropy`` on the head's logits (computed on z in training, on mu in eval).

    Args:
        logits: (B, C) class scores.
        labels: (B,) integer labels in [0, C).

    Returns:
        Scalar loss (fp32 even for half-precision logits).
    """
    return F.cross_entropy(at_least_fp32(logits), labels)


def cross_entropy_rows(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(B,) softmax cross-entropy of each row: :func:`cross_entropy` before its mean.

    Args:
        logits: (B, C) class scores.
        labels: (B,) integer labels in [0, C).

    Returns:
        (B,) losses, fp32 even for half-precision logits.
    """
    return F.cross_entropy(at_least_fp32(logits), labels, reduction="none")


def total_loss(
    ce: torch.Tensor,
    contrastive: torch.Tensor | None,
    kl: torch.Tensor | None,
    lcl_weight: float,
    kl_weight: float,
) -> torch.Tensor:
    """The training objective of Eq. 6: ``(1 - l_lcl) * CE + l_lcl * contrastive + l_kl * KL``.

    Args:
        ce: scalar classification loss (Eq. 4).
        contrastive: scalar contrastive loss (LCL, SupCon or SimCSE), or ``None`` when
            ``loss.contrastive=none``: then the CE term keeps weight 1 (the "Base" / "+UCL" ablations).
        kl: scalar KL term (Eq. 5), or ``None`` without a variance branch.
        lcl_weight: lambda_lcl in [0, 1] (paper: 0.6 Qwen3, 0.7 F2LLM, 0.9 Gemma).
        kl_weight: lambda_kl >= 0.

    Returns:
        Scalar loss.
    """
    if not 0.0 <= lcl_weight <= 1.0:
        raise ValueError(f"loss.lcl_weight must be in [0, 1], got {lcl_weight} (the paper uses 0.6-0.9).")
    if kl_weight < 0:
        raise ValueError(f"loss.kl_weight must be >= 0, got {kl_weight}.")
    loss = ce if contrastive is None else (1.0 - lcl_weight) * ce + lcl_weight * contrastive
    return loss if kl is None else loss + kl_weight * kl
