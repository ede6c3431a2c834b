"""``head=blend``: the calibrated probability average of a Gaussian TextCNN and the logreg probe.

p(y|x) = w * softmax(a(x) / t_a) + (1 - w) * softmax(b(x) / t_b), with a the TextCNN's logits, b the
probe's, t_a and t_b their temperatures and w their weight, all fitted on held-out predictions by
:mod:`ucse.training.auto`. The logits returned are log p, so softmax(logits) is the blend exactly and every
consumer of ``HeadOutput.logits`` (calibration, scores, sets) sees the blended distribution.
"""

from __future__ import annotations

import torch

from ucse.heads.base import Head, HeadOutput
from ucse.heads.probe import ProbeHead

_TINY = 1e-12  # floor under p before the log: a probability below it is 0 to every consumer


TEMPERATURE_FLOOR = 1e-12
"""The smallest blend temperature (logits divided by less overflow float32); ``load_head`` checks it too."""


class BlendHead(Head):
    """Two heads over the same token states, mixed in probability space.

    Args:
        gaussian: the Gaussian TextCNN (its mu / sigma^2 are this head's mean / var).
        probe: the logreg probe.
    """

    def __init__(self, gaussian: Head, probe: ProbeHead) -> None:
        super().__init__()
        self.gaussian = gaussian
        self.probe = probe
        # Fitted after training; buffers so they travel in model.safetensors with the weights.
        self.register_buffer("weight", torch.tensor(0.5))  # w, the TextCNN's share
        self.register_buffer("temperatures", torch.ones(2))  # (t_a, t_b)

    def set_blend(self, weight: float, t_gaussian: float, t_probe: float) -> None:
        """Store the fitted weight w in [0, 1] and the two temperatures (> 0)."""
        if not (0.0 <= weight <= 1.0 and t_gaussian >= TEMPERATURE_FLOOR and t_probe >= TEMPERATURE_FLOOR):
            raise ValueError(
                f"blend needs 0 <= w <= 1 and temperatures >= {TEMPERATURE_FLOOR:g}, got {weight}, "
                f"{t_gaussian}, {t_probe}"
            )
        self.weight.fill_(weight)
        self.temperatures.copy_(torch.tensor([t_gaussian, t_probe]))

    @classmethod
    def state_problem(cls, state: dict[str, torch.Tensor]) -> str | None:
        """:meth:`set_blend`'s bounds on a state dict's ``weight`` and ``temperatures``."""
        w, temps = state["weight"], state["temperatures"]
        if bool(((w >= 0) & (w <= 1)).all()) and bool((temps >= TEMPERATURE_FLOOR).all()):
            return None
        return (
            f"a blend needs 0 <= weight <= 1 and temperatures >= {TEMPERATURE_FLOOR:g}, got {w.tolist()} and "
            f"{temps.tolist()}"
        )

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """The TextCNN's mean / var / z (B, D); logits (B, C) = log of the blended probabilities."""
        a = self.gaussian(hidden, mask)
        b = self.probe(hidden, mask)
        w = self.weight.to(a.logits.dtype)
        p = w * torch.softmax(a.logits / self.temperatures[0], -1) + (1 - w) * torch.softmax(
            b.logits.to(a.logits.dtype) / self.temperatures[1], -1
        )  # (B, C)
        return HeadOutput(mean=a.mean, var=a.var, logits=torch.log(p.clamp_min(_TINY)), z=a.z)
