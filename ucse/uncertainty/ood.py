"""Out-of-distribution detection metrics of a score: AUROC and FPR at 95 % TPR (via torchmetrics)."""

from __future__ import annotations

import torch
from scipy.stats import rankdata
from torchmetrics.functional.classification import binary_auroc, binary_roc

from ucse.uncertainty.scores import Array, scores_without_nan


def _stack(score_in: Array, score_out: Array) -> tuple[torch.Tensor, torch.Tensor]:
    s_in = scores_without_nan(score_in, "the in-distribution scores").reshape(-1)
    s_out = scores_without_nan(score_out, "the out-of-distribution scores").reshape(-1)
    if s_in.numel() == 0 or s_out.numel() == 0:
        raise ValueError("need at least one in-distribution and one out-of-distribution score")
    target = torch.cat([torch.zeros(s_in.numel()), torch.ones(s_out.numel())]).long()
    both = torch.cat([s_in, s_out])
    # Average ranks scaled into (0, 1]: the same ordering and ties as the raw scores, but inside [0, 1], where
    # torchmetrics reads them as probabilities (it applies a sigmoid to anything outside, which saturates to
    # exact ties in float for scores like a density in the thousands).
    ranks = torch.as_tensor(rankdata(both.numpy(), method="average"), dtype=torch.float64) / both.numel()
    return ranks, target


def ood_auroc(score_in: Array, score_out: Array) -> float:
    """P(score of a random OOD text > score of a random in-distribution text), ties counted half.

    Args:
        score_in: (N,) uncertainty of in-distribution texts (higher = more uncertain).
        score_out: (M,) uncertainty of out-of-distribution texts.

    Returns:
        AUROC in [0, 1] (thresholds=None: exact, unbinned); 0.5 = no separation.
    """
    s, t = _stack(score_in, score_out)
    return float(binary_auroc(s, t, thresholds=None))


def fpr_at_tpr(score_in: Array, score_out: Array, tpr: float = 0.95) -> float:
    """Share of OOD texts accepted as in-distribution when the threshold keeps ``tpr`` of in-distribution.

    The convention of ODIN (Liang et al. 2018) and most OOD papers: in-distribution is the positive class,
    detected by a *low* uncertainty. Lower is better.

    Args:
        score_in: (N,) uncertainty of in-distribution texts.
        score_out: (M,) uncertainty of OOD texts.
        tpr: the in-distribution recall to reach.

    Returns:
        FPR in [0, 1] at the first ROC point whose TPR >= ``tpr``.
    """
    s, t = _stack(score_in, score_out)
    # 1 - rank: ROC treats higher scores as more positive, and in-distribution (label 1 here) is positive.
    fpr, tpr_curve, _ = binary_roc(1.0 - s, 1 - t, thresholds=None)
    return float(fpr[torch.nonzero(tpr_curve >= tpr - 1e-12)[0, 0]])
