"""Member-level reliability for ensembles of trained heads: relative variance scales fitted on labels.

Each member's own variance scale (``ucse/uec/calibration.py``) makes its variances comparable in *kind*, but
it is fitted on that member's positive pairs alone, so it normalises each member's traces to its own spread:
on the four local classification tasks the three heads' mean UEC weights came out within 0.25-0.38 although
their accuracies differ by up to 6 points (docs/RESULTS_UEC.md). For heads, the issue's other option applies:
the scale that maximises the held-out predictive likelihood of *labels*. With K heads of one task, the
relative scales (s_1 = 1, s_2..s_K on a log grid) are chosen jointly to minimise the validation NLL of the
UEC-weighted average of the heads' calibrated class probabilities,

    p(y | x) = sum_k pi_k(x) p_k(y | x),   pi_k(x) = softmax_k(-T log(s_k tr Sigma_k(x)))  (Eq. 4),

so pi_k keeps the per-input uncertainty term and gains a per-member one (the log s_k offsets). The validation
split is the runs' own (the one each head's temperature was fitted on), never the test split.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.convolution import convolve

SCALE_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def fused_nll(
    gaussians: Sequence[GaussianEmbeddings],
    probs: np.ndarray,
    labels: np.ndarray,
    scales: Sequence[float],
    rule: str,
    temperature: float,
    mode: str,
) -> float:
    """Mean NLL of the UEC-weighted average of member probabilities with member variances times ``scales``.

    Args:
        gaussians: K (N, D) member Gaussians of the same N texts (aligned).
        probs: (K, N, C) member class probabilities.
        labels: (N,) class ids.
        scales: K variance multipliers.
        rule: the ensemble's UEC coefficient rule.
        temperature: its T.
        mode: its temperature mode.
    """
    scaled = [GaussianEmbeddings(g.mean, g.var * s, g.meta) for g, s in zip(gaussians, scales)]
    w = convolve(scaled, rule, temperature, True, mode).weights.double().numpy()  # (N, K)
    fused = (w.T[..., None] * probs).sum(0)  # (N, C)
    return float(-np.log(np.clip(fused[np.arange(len(labels)), labels], 1e-12, None)).mean())


def fit_label_scales(
    gaussians: Sequence[GaussianEmbeddings],
    probs: np.ndarray,
    labels: np.ndarray,
    rule: str,
    temperature: float,
    mode: str,
    grid: Sequence[float] = SCALE_GRID,
) -> tuple[list[float], float]:
    """Relative scales (first member fixed at 1) minimising :func:`fused_nll` on a grid; and that NLL.

    Exhaustive over ``len(grid) ** (K - 1)`` points: K is a handful of members and each point is one
    convolution of N x K traces, so a grid is exact where a local optimiser could stall on the plateaus
    a softmax over members has.
    """
    if probs.shape[0] != len(gaussians):
        raise ValueError(f"{len(gaussians)} members but probabilities for {probs.shape[0]}")
    best, best_nll = None, float("inf")
    for rest in itertools.product(grid, repeat=len(gaussians) - 1):
        scales = [1.0, *rest]
        value = fused_nll(gaussians, probs, labels, scales, rule, temperature, mode)
        if value < best_nll - 1e-12:
            best, best_nll = scales, value
    assert best is not None
    return best, best_nll


def head_outputs(
    members: Sequence[Any], heads: Sequence[Any], data_root: Any, split: str = "validation"
) -> tuple[list, np.ndarray, np.ndarray]:
    """Aligned member Gaussians, calibrated head probabilities (K, N, C) and labels of one split of the runs.

    The split is the first head's run's. A task without a validation file gets one carved by the run's seed,
    so heads trained with other seeds may have trained on some of those texts: train the heads with one seed.

    Args:
        members: the K (possibly aligned) members the ensemble fuses.
        heads: the K underlying :class:`ucse.uec.members.HeadMember` objects (same order).
        data_root: where the runs' task data lives (``data.root`` override), or ``None``.
        split: ``validation`` (what the scales are fitted on) or ``test``.

    Raises:
        ValueError: a member is not a trained head, or the heads disagree on the task's labels.
    """
    from ucse.data import load_classification
    from ucse.evaluation.evaluate import load_run
    from ucse.uncertainty.profile import load_uncertainty_profile

    if not all(hasattr(h, "encoder") and hasattr(h, "head_dir") for h in heads):
        raise ValueError("member_scales: labels needs every member to be a trained head (kind: head)")
    names = {tuple(h.encoder.label_names) for h in heads}
    if len(names) != 1:
        raise ValueError("member_scales: labels needs heads of one task with the same label names")
    _, cfg = load_run(heads[0].head_dir.parent, str(data_root) if data_root else None)
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    texts, labels = data.texts(split), np.asarray(data.labels(split))
    probs = []
    for h in heads:
        calibrator = load_uncertainty_profile(h.head_dir).calibrator
        logits = calibrator.logits(h.encoder.encode_gaussian(texts).logits)
        probs.append(torch.softmax(logits.double(), dim=1).numpy())
    return [m.encode(texts) for m in members], np.stack(probs), labels
