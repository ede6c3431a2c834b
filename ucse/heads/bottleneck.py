"""The Gaussian bottleneck shared by every head: features -> (mu, log sigma^2) -> z -> logits (Eq. 1-2)."""

from __future__ import annotations

import torch
from torch import nn

from ucse.heads.base import HeadOutput

# log sigma^2 is clamped to [LOG_VAR_MIN, LOG_VAR_MAX] so that sigma = exp(0.5 * log_var) stays within
# [6.7e-3, 148]: an unbounded branch can overflow exp() in half precision (fp16 max 65504 = e^11.1) early in
# training, and a vanishing variance sends log(var) in HeadOutput.log_var and the KL term to -inf.
LOG_VAR_MIN = -10.0
LOG_VAR_MAX = 10.0


class GaussianBottleneck(nn.Module):
    """Dropout, the mu / log-variance branches, reparameterisation and the classifier.

    With ``uncertainty`` (UCL) the bottleneck has a second branch ``log_var = Linear(F, D)``; in training
    mode it draws ``z = mu + eps * sigma`` with ``eps ~ N(0, I)`` (the reparameterisation trick), in eval
    mode ``z = mu`` (deterministic inference, paper Sec. 5.3). Without UCL ``z = mu`` and ``var`` is None.
    The classifier ``Linear(D, C)`` always acts on ``z``.

    Args:
        in_features: F, width of the extractor's features.
        embed_dim: D, width of mu, sigma and z.
        num_classes: C.
        uncertainty: add the variance branch and sample z in training.
        dropout: dropout probability on the features before both branches.
    """

    def __init__(self, in_features: int, embed_dim: int, num_classes: int, uncertainty: bool, dropout: float):
        super().__init__()
        self.uncertainty = uncertainty
        self.dropout = nn.Dropout(dropout)
        self.mu = nn.Linear(in_features, embed_dim)
        self.log_var = nn.Linear(in_features, embed_dim) if uncertainty else None
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, features: torch.Tensor) -> HeadOutput:
        """Map (B, F) features to a HeadOutput with (B, D) mean/var/z and (B, C) logits."""
        features = self.dropout(features)  # (B, F)
        mu = self.mu(features)  # (B, D)
        var = None
        z = mu
        if self.log_var is not None:
            log_var = self.log_var(features).clamp(LOG_VAR_MIN, LOG_VAR_MAX)  # (B, D)
            var = torch.exp(log_var)  # (B, D)
            if self.training:
                z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var)  # (B, D)
        return HeadOutput(mean=mu, var=var, logits=self.classifier(z), z=z)
