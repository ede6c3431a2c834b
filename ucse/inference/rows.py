"""The rows ``predict`` returns: one dict per text with its label, confidence, uncertainty and flags."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ucse.uncertainty.profile import UncertaintyOutput


def prediction_rows(
    texts: list[str], out: UncertaintyOutput, names: list[str], k: int, sets: bool
) -> list[dict[str, Any]]:
    """One prediction row per text (``UcseClassifier.predict_with_uncertainty``) from the profile output.

    Python values are converted in bulk (``tolist``), not element by element: half the time of building the
    rows (~25 ms per 3000 texts of 77 labels).
    """
    top = out.rank_order[:, :k]  # (N, k)
    set_labels = out.set_labels(names) if sets else None
    label_of = np.asarray(names, dtype=object)
    top_names = label_of[top].tolist()  # (N, k) label names, most probable first
    top_probs = np.take_along_axis(out.probs, top, axis=1).astype(np.float64).tolist()  # (N, k)
    labels = label_of[out.prediction].tolist()
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
