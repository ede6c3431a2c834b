"""Losses of the UCSE objective (paper Eq. 3-6) and the contrastive baselines of Table 4."""

from ucse.losses.classification import cross_entropy, cross_entropy_rows, total_loss
from ucse.losses.kl import gaussian_kl
from ucse.losses.lcl import label_wise_contrastive
from ucse.losses.simcse import simcse
from ucse.losses.supcon import supcon

__all__ = [
    "cross_entropy",
    "cross_entropy_rows",
    "gaussian_kl",
    "label_wise_contrastive",
    "simcse",
    "supcon",
    "total_loss",
]
