"""Evaluation layer: metrics, uncertainty analyses, figures, efficiency, and (separately) MTEB.

``ucse.evaluation.mteb_eval`` is deliberately not re-exported here: it is the only module that imports
mteb, which is slow to import and not needed for training-time evaluation. Import it explicitly.

The names below load on first use (PEP 562 ``__getattr__``): ``ucse eval`` parses its arguments with
``ucse.evaluation.config``, and importing that must not import torch, matplotlib and scikit-learn through
this package, or a typo would take seconds to report.
"""

from __future__ import annotations

import importlib
from typing import Any

# Name -> the module that defines it (read by __getattr__ below).
_SOURCES = {
    "ucse.evaluation.efficiency": ("batch_size_of", "count_parameters", "measure_throughput"),
    "ucse.evaluation.encoder_protocol": ("TextEncoder",),
    "ucse.evaluation.metrics": ("classification_metrics",),
    "ucse.evaluation.plots": (
        "balanced_sample",
        "plot_arc",
        "plot_difficulty",
        "plot_tsne",
        "plot_weight_heatmap",
        "save_figure",
    ),
    "ucse.uncertainty.sigma": (
        "BIN_NAMES",
        "DEFAULT_REJECTION_RATES",
        "accuracy_rejection_curve",
        "arc_area",
        "confidence_from_probs",
        "confidence_from_sigma",
        "difficulty_bins",
        "sigma_scores",
    ),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:  # AttributeError lets `from ucse.evaluation import mteb_eval` import the submodule
        raise AttributeError(f"module 'ucse.evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access skips this function
    return value
