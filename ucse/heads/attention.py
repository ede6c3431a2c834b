"""Additive attention pooling over token states (paper Table 3/4 "Attention")."""

from __future__ import annotations

import torch
from torch import nn

from ucse.heads.base import Head, HeadOutput, check_inputs
from ucse.heads.bottleneck import GaussianBottleneck


class AttentionPoolHead(Head):
    """Learned attention pooling, then the Gaussian bottleneck and classifier.

    Token scores are ``s_t = w^T tanh(W h_t + b)`` (Yang et al. 2016); padding gets score -inf, so after the
    softmax over time it has exactly zero weight. The sentence vector is ``sum_t a_t h_t`` (B, H).

    Args:
        hidden_size: H.
        num_classes: C.
        embed_dim: D; ``None`` means H.
        attention_dim: width of ``W``; ``None`` means H.
        uncertainty: UCL variance branch.
        dropout: dropout on the pooled vector.
    """

    def __init__(
        self,
        hidden_size: int,
        num_classes: int,
        embed_dim: int | None = None,
        attention_dim: int | None = None,
        uncertainty: bool = False,
        dropout: float = 0.5,
    ):
        super().__init__()
        self.proj = nn.Linear(hidden_size, attention_dim or hidden_size)
        self.score = nn.Linear(attention_dim or hidden_size, 1, bias=False)
        self.bottleneck = GaussianBottleneck(
            hidden_size, embed_dim or hidden_size, num_classes, uncertainty, dropout
        )

    def attention_weights(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T) softmax weights over real tokens; padding gets exactly 0."""
        # without the host check an empty row's softmax is over -inf alone: NaN weights, NaN outputs
        keep = check_inputs(hidden, mask, self.checks_on_host(hidden))  # (B, T)
        x = hidden.to(self.proj.weight.dtype)  # (B, T, H)
        scores = self.score(torch.tanh(self.proj(x))).squeeze(-1)  # (B, T)
        # softmax in fp32: under bf16 autocast the normaliser of long sequences would lose precision
        scores = scores.float().masked_fill(~keep, float("-inf"))
        return torch.softmax(scores, dim=1)  # (B, T)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """Map (B, T, H) token states and a (B, T) mask to a HeadOutput (mean/var/z (B, D), logits (B, C))."""
        weights = self.attention_weights(hidden, mask)  # (B, T)
        # zero the padding states too: 0 weight times a non-finite pad state would still be NaN
        x = hidden.to(self.proj.weight.dtype).masked_fill(~mask.bool().unsqueeze(-1), 0.0)  # (B, T, H)
        pooled = torch.einsum("bt,bth->bh", weights.to(x.dtype), x)  # (B, H)
        return self.bottleneck(pooled)
