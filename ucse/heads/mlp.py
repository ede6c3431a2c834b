"""MLP adapter on the pooled state, sized to the TextCNN's parameter count (paper Table 4 "MLP")."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ucse.backbone.pooling import pool
from ucse.config import Pooling
from ucse.heads.base import Head, HeadOutput, check_inputs
from ucse.heads.bottleneck import GaussianBottleneck
from ucse.heads.textcnn import GaussianTextCNN


def matched_mlp_hidden(
    hidden_size: int,
    num_classes: int,
    kernel_sizes: Sequence[int] = (3, 4, 5),
    num_filters: int | None = None,
    embed_dim: int | None = None,
    uncertainty: bool = False,
) -> int:
    """Adapter width M giving the MLP head the TextCNN head's parameter count (same H, C, D, UCL).

    The MLP head has ``M * (H + 1)`` adapter parameters, ``n_b * (M * D + D)`` in its ``n_b`` (1 or 2 with
    UCL) branches and ``D * C + C`` in the classifier, which is linear in M, so
    ``M = (P_textcnn - n_b * D - D * C - C) / (H + 1 + n_b * D)``, rounded to the nearest integer.

    Raises:
        ValueError: if the TextCNN budget is too small for even one adapter unit.
    """
    d = embed_dim or hidden_size
    n_b = 2 if uncertainty else 1
    target = GaussianTextCNN.param_count(
        hidden_size, num_classes, kernel_sizes, num_filters, embed_dim, uncertainty
    )
    width = round((target - n_b * d - d * num_classes - num_classes) / (hidden_size + 1 + n_b * d))
    if width < 1:
        raise ValueError(
            f"Cannot match the TextCNN's {target} parameters with an MLP (width {width}); "
            "set head.mlp_hidden."
        )
    return width


class MLPHead(Head):
    """Pooled state -> ``Linear(H, M)`` -> GELU -> dropout -> Gaussian bottleneck -> classifier.

    With ``mlp_hidden=None`` M is :func:`matched_mlp_hidden`, so the head has the TextCNN's parameter
    count (the paper's control for "gains stem from architecture, not parameter count", App. A.3).

    Args:
        hidden_size: H.
        num_classes: C.
        pooling: how the sentence vector is read from token states (``ucse.backbone.pooling.pool``).
        mlp_hidden: adapter width M; ``None`` matches the TextCNN.
        kernel_sizes: the TextCNN kernel sizes whose parameter count is matched.
        num_filters: the TextCNN filters per kernel size whose parameter count is matched.
        embed_dim: D; ``None`` means H.
        uncertainty: UCL variance branch.
        dropout: dropout on the adapter output.
    """

    def __init__(
        self,
        hidden_size: int,
        num_classes: int,
        pooling: Pooling,
        mlp_hidden: int | None = None,
        kernel_sizes: Sequence[int] = (3, 4, 5),
        num_filters: int | None = None,
        embed_dim: int | None = None,
        uncertainty: bool = False,
        dropout: float = 0.5,
    ):
        super().__init__()
        self.pooling = Pooling(pooling)
        width = mlp_hidden or matched_mlp_hidden(
            hidden_size, num_classes, kernel_sizes, num_filters, embed_dim, uncertainty
        )
        self.adapter = nn.Sequential(nn.Linear(hidden_size, width), nn.GELU())
        d = embed_dim or hidden_size
        self.bottleneck = GaussianBottleneck(width, d, num_classes, uncertainty, dropout)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """Map (B, T, H) token states and a (B, T) mask to a HeadOutput (mean/var/z (B, D), logits (B, C))."""
        host = self.checks_on_host(hidden)
        check_inputs(hidden, mask, host)
        pooled = pool(hidden, mask, self.pooling, host)  # (B, H) fp32
        return self.bottleneck(self.adapter(pooled.to(self.bottleneck.mu.weight.dtype)))  # adapter: (B, M)
