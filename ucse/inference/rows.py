"""The rows of ``UcseClassifier.predict_with_uncertainty``: label, confidence, decisions, probabilities."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ucse.uncertainty.profile import UncertaintyOutput


def uncertainty_rows(
    texts: list[str], out: UncertaintyOutput, ordered: np.ndarray, top_k: int | None, sets: bool
) -> list[dict[str, Any]]:
    """One row per text (the method's docstring says what each field holds).

    Args:
        texts: the (N,) texts.
        out: the profile's decisions for them.
        ordered: (C,) the labels in the head's column order.
        top_k: keep only the ``top_k`` most probable labels in ``probs``.
        sets: add ``set`` where a conformal quantile was fitted.
    """
    names = [str(c) for c in ordered]
    # integer labels stay integers in `label` and `set`, as in predict(); `probs` keys are names (JSON)
    values = ordered.tolist() if ordered.dtype.kind in "iu" else names  # uint labels were strings
    k = len(names) if top_k is None else min(top_k, len(names))
    top = out.rank_order[:, :k]  # (N, k)
    set_labels = out.set_labels(values) if sets else None
    # Python values converted in bulk (tolist), not element by element: half the time of building the rows
    # (~25 ms per 3000 texts of 77 labels), which a GPU's encode does not hide.
    top_names = np.asarray(names, dtype=object)[top].tolist()  # (N, k) label names, most probable first
    top_probs = np.take_along_axis(out.probs, top, axis=1).astype(np.float64).tolist()  # (N, k)
    labels = np.asarray(values, dtype=object)[out.prediction].tolist()
    confidence = np.asarray(out.confidence, dtype=np.float64).tolist()
    rows = []
    for i, text in enumerate(texts):
        row: dict[str, Any] = {
            "text": text,
            "label": labels[i],
            "confidence": confidence[i],
            "uncertainty": _finite(out.uncertainty[i]),
            "abstain": bool(out.abstain[i]),
            "ood": None if out.ood is None else bool(out.ood[i]),
            "ood_score": None if out.ood_score is None else _finite(out.ood_score[i]),
            "probs": dict(zip(top_names[i], top_probs[i])),
        }
        if set_labels is not None:
            row["set"] = set_labels[i]
        rows.append(row)
    return rows


def _finite(x: float) -> float | None:
    """A float for JSON, ``None`` for NaN/inf (strict JSON has neither)."""
    x = float(x)
    return x if math.isfinite(x) else None
