"""A head that answers one label for every held-out text: said, not shipped in silence.

A named head keeps its best epoch by validation accuracy; on imbalanced data always answering the commonest
label can win that (a researcher's trial: AmazonCounterfactual, 300 training texts, ``head=textcnn`` kept
epoch 0, test accuracy 0.807 = the majority share, macro-F1 0.45, while later epochs reached macro-F1 0.65).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

log = logging.getLogger(__name__)

MIN_ROWS = 10
"""Fewer held-out texts say too little to warn on."""


def warn_if_one_label(
    logits: np.ndarray, labels: np.ndarray, label_names: Sequence[str] | None, run: object = None
) -> bool:
    """Warn where every held-out text gets the same label but they hold several; whether it warned.

    Args:
        logits: (N, C) held-out head outputs (array or CPU tensor).
        labels: (N,) their label ids.
        label_names: the labels in id order (``None``: the ids).
        run: the run folder, named in the warning (a sweep trains many).
    """
    pred, labels = np.asarray(logits).argmax(axis=1), np.asarray(labels)  # (N,), (N,)
    if len(pred) < MIN_ROWS or len(np.unique(labels)) < 2 or len(np.unique(pred)) > 1:
        return False
    only = int(pred[0])
    name = label_names[only] if label_names is not None else only
    log.warning(
        "%sthe head answers %r for every one of the %d held-out texts, which hold %d labels: it has learned "
        "no more than the commonest label (a named head keeps its best epoch by validation accuracy, which "
        "that answer can win on imbalanced data). Try the default head=auto, more epochs (optim.epochs=), or "
        "uncertainty.calibration.prior=balanced.",
        "" if run is None else f"{run}: ",
        name,
        len(pred),
        len(np.unique(labels)),
    )
    return True
