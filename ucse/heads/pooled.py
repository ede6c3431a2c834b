"""Pooled-state heads: the reproduced linear-probe baseline (``linear``) and mean pooling (``mean``)."""

from __future__ import annotations

import torch

from ucse.backbone.pooling import pool
from ucse.config import Pooling
from ucse.heads.base import Head, HeadOutput, check_inputs
from ucse.heads.bottleneck import GaussianBottleneck


class PooledHead(Head):
    """Backbone sentence vector -> projection ``Linear(H, D)`` -> classifier ``Linear(D, C)``.

    ``head=linear`` reads the sentence vector the way the backbone does (``backbone.pooling``: the EOS/last
    token for Qwen3 / F2LLM, CLS for Gemma; paper App. A.1); ``head=mean`` always mean-pools.

    Without UCL the composition ``classifier(projection(x))`` is a single affine map of the pooled state, so
    the hypothesis class is exactly the linear probe (MTEB's logistic regression on frozen embeddings). The
    factorisation through D still matters: it gives LCL and UCL an embedding z (and a variance branch) to act
    on, which a bare ``Linear(H, C)`` would not have (App. A.1: "provides the necessary trainable parameters
    for the label-wise contrastive learning objective").

    Args:
        hidden_size: H.
        num_classes: C.
        pooling: how the sentence vector is read from token states (``ucse.backbone.pooling.pool``).
        embed_dim: D; ``None`` means H.
        uncertainty: UCL variance branch.
        dropout: dropout on the pooled state.
    """

    def __init__(
        self,
        hidden_size: int,
        num_classes: int,
        pooling: Pooling,
        embed_dim: int | None = None,
        uncertainty: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.pooling = Pooling(pooling)
        self.bottleneck = GaussianBottleneck(
            hidden_size, embed_dim or hidden_size, num_classes, uncertainty, dropout
        )

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """Map (B, T, H) token states and a (B, T) mask to a HeadOutput (mean/var/z (B, D), logits (B, C))."""
        host = self.checks_on_host(hidden)
        check_inputs(hidden, mask, host)
        pooled = pool(hidden, mask, self.pooling, host)  # (B, H) fp32
        return self.bottleneck(pooled.to(self.bottleneck.mu.weight.dtype))
