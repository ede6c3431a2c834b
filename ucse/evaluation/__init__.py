"""Evaluation layer: metrics, uncertainty analyses, figures, efficiency, and (separately) MTEB.

``ucse.evaluation.mteb_eval`` is deliberately not re-exported here: it is the only module that imports
mteb, which is slow to import and not needed for training-time evaluation. Import it explicitly.
"""

from ucse.evaluation.efficiency import batch_size_of, count_parameters, measure_throughput
from ucse.evaluation.encoder_protocol import TextEncoder
from ucse.evaluation.metrics import classification_metrics
from ucse.evaluation.plots import (
    balanced_sample,
    plot_arc,
    plot_difficulty,
    plot_tsne,
    plot_weight_heatmap,
    save_figure,
)
from ucse.uncertainty.sigma import (
    BIN_NAMES,
    DEFAULT_REJECTION_RATES,
    accuracy_rejection_curve,
    arc_area,
    confidence_from_probs,
    confidence_from_sigma,
    difficulty_bins,
    sigma_scores,
)

__all__ = [
    "BIN_NAMES",
    "DEFAULT_REJECTION_RATES",
    "TextEncoder",
    "accuracy_rejection_curve",
    "arc_area",
    "balanced_sample",
    "batch_size_of",
    "classification_metrics",
    "confidence_from_probs",
    "confidence_from_sigma",
    "count_parameters",
    "difficulty_bins",
    "measure_throughput",
    "plot_arc",
    "plot_difficulty",
    "plot_tsne",
    "plot_weight_heatmap",
    "save_figure",
    "sigma_scores",
]
