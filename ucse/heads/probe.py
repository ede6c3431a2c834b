"""``head=logreg`` as a head: L2-normalised pooled state -> ``Linear(H, C)``.

The weights come from scikit-learn's ``LogisticRegressionCV`` (:mod:`ucse.training.logreg`); held as an
``nn.Module`` the probe is saved, loaded, calibrated and served exactly like every trained head.
"""

from __future__ import annotations

import torch
from torch import nn

from ucse.backbone.pooling import unit_pool
from ucse.config import Pooling
from ucse.heads.base import Head, HeadOutput, check_inputs


class ProbeHead(Head):
    """Pooled (``backbone.pooling``), L2-normalised sentence vector and a linear classifier.

    Args:
        hidden_size: H.
        num_classes: C.
        pooling: how the sentence vector is read from token states.
    """

    def __init__(self, hidden_size: int, num_classes: int, pooling: Pooling) -> None:
        super().__init__()
        self.pooling = Pooling(pooling)
        self.linear = nn.Linear(hidden_size, num_classes)

    def features(self, hidden: torch.Tensor, mask: torch.Tensor, host_checks: bool = True) -> torch.Tensor:
        """(B, H) unit-norm pooled vectors of (B, T, H) states under a (B, T) mask."""
        return unit_pool(hidden, mask, self.pooling, host_checks).to(self.linear.weight.dtype)  # (B, H)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """The (B, H) unit vector as mean and z, var ``None``, logits (B, C)."""
        host = self.checks_on_host(hidden)
        check_inputs(hidden, mask, host)
        x = self.features(hidden, mask, host)
        return HeadOutput(mean=x, var=None, logits=self.linear(x), z=x)
