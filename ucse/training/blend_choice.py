"""``head=auto``'s choice of the blend weight w from held-out logits of the TextCNN and the probe.

Each model gets its own temperature; the blend averages their calibrated probabilities; w is the one with
the lowest held-out NLL, taken back toward the probe by the one-standard-error rule (``ucse.training.auto``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_softmax

from ucse.losses.temperature import fit_temperature

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Candidate TextCNN shares w of the blend, the probe's end first."""


def _probs(logits: np.ndarray, t: float) -> np.ndarray:
    return np.exp(log_softmax(logits / t, axis=1))


def choose_blend(
    gaussian: np.ndarray, probe: np.ndarray, y: np.ndarray, weights: tuple[float, ...] = WEIGHTS
) -> dict:
    """Pick w among ``weights`` from held-out (N, C) logits of the TextCNN and the probe and (N,) labels.

    Returns:
        ``weight`` (chosen), ``best_weight`` (lowest NLL), the two temperatures and per-w NLL / accuracy.
    """
    y = np.asarray(y)
    t_a, t_b = fit_temperature(gaussian, y), fit_temperature(probe, y)
    p_a, p_b = _probs(gaussian, t_a), _probs(probe, t_b)
    rows = np.arange(len(y))
    losses, acc = {}, {}
    for w in weights:
        p = w * p_a + (1 - w) * p_b  # (N, C)
        losses[w] = -np.log(np.clip(p[rows, y], 1e-12, None))
        acc[w] = float((p.argmax(1) == y).mean())
    best = min(weights, key=lambda w: losses[w].mean())
    chosen = best
    for w in weights:  # the probe's end first: the simplest model within one standard error of the best
        d = losses[w] - losses[best]
        se = d.std(ddof=1) / math.sqrt(len(d)) if len(d) > 1 else 0.0
        if d.mean() <= se:
            chosen = w
            break
    return {
        "weight": chosen,
        "best_weight": best,
        "t_gaussian": t_a,
        "t_probe": t_b,
        "nll": {str(w): float(v.mean()) for w, v in losses.items()},
        "accuracy": {str(w): a for w, a in acc.items()},
    }


def blend_logits(choice: dict, gaussian: np.ndarray | None, probe: np.ndarray | None) -> np.ndarray:
    """(N, C) logits of the head :func:`compose` builds from ``choice``, given its parts' logits."""
    w = choice["weight"]
    if w == 0.0:
        return probe
    if w == 1.0:
        return gaussian
    p = w * _probs(gaussian, choice["t_gaussian"]) + (1 - w) * _probs(probe, choice["t_probe"])
    return np.log(np.clip(p, 1e-12, None))
