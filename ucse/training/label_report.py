"""Per-label figures of one split: support, precision, recall, F1 and the label each is most mistaken for.

A macro-F1 hides the label a user most needs to hear about (a rare class recalled 0.17 of the time moved a
460-text run's macro-F1 by a few points): ``metrics.json`` (``test_per_label``), ``eval.json``
(``per_label``) and the summaries carry these rows. They are built from a confusion matrix, which the
Lightning test loop accumulates on the device (torchmetrics, reduced over ranks) and the in-memory heads
count from their predictions, so both paths share one definition.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchmetrics.functional.classification import multiclass_confusion_matrix


def confusion_counts(pred: np.ndarray | torch.Tensor, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """(C, C) int64 counts: row = true label, column = predicted label (torchmetrics' convention).

    Args:
        pred: (N,) predicted label ids, or (N, C) scores whose argmax is the prediction.
        labels: (N,) true label ids in [0, C).
        num_classes: C.
    """
    p = torch.as_tensor(np.asarray(pred) if not isinstance(pred, torch.Tensor) else pred).detach().cpu()
    if p.ndim == 2:
        p = p.argmax(1)
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    return multiclass_confusion_matrix(p.long(), y, num_classes).numpy().astype(np.int64)


def per_label(confusion: np.ndarray | torch.Tensor, label_names: Sequence[str]) -> list[dict]:
    """One row per label from a (C, C) confusion matrix (rows true, columns predicted).

    Derived here rather than by torchmetrics' per-class precision / recall: those would need the
    predictions again, and the Lightning test loop keeps only the matrix. The definitions are scikit-learn's
    ``precision_recall_fscore_support`` (tests compare them), except that a figure with a zero denominator
    is ``None`` (undefined: a label never predicted has no precision, one absent from the split no recall)
    where scikit-learn writes 0 with a warning.

    Returns:
        Per label, in label-id order: ``label``, ``support`` (true rows), ``predicted`` (rows given the
        label), ``precision``, ``recall``, ``f1`` (``2 tp / (2 tp + fp + fn)``; the mean of the defined
        ones is the macro-F1 the metrics report), ``confused_with`` (the label its rows are most often
        given instead; ``None`` without errors; the lowest id on a tie) and ``confused_count``.
    """
    m = np.asarray(confusion, dtype=np.int64)  # (C, C)
    c = len(label_names)
    if m.shape != (c, c):
        raise ValueError(f"confusion must be ({c}, {c}) for {c} labels, got {m.shape}")
    tp = np.diag(m)  # (C,)
    support, predicted = m.sum(1), m.sum(0)  # (C,) true rows, predicted rows
    off = m - np.diag(tp)  # (C, C) the errors: true label -> the label given instead
    rows = []
    for i, name in enumerate(label_names):
        fn, fp = int(support[i] - tp[i]), int(predicted[i] - tp[i])
        j = int(off[i].argmax())
        rows.append(
            {
                "label": str(name),
                "support": int(support[i]),
                "predicted": int(predicted[i]),
                "precision": _ratio(tp[i], predicted[i]),
                "recall": _ratio(tp[i], support[i]),
                "f1": _ratio(2 * tp[i], 2 * tp[i] + fp + fn),
                "confused_with": str(label_names[j]) if fn else None,
                "confused_count": int(off[i, j]) if fn else 0,
            }
        )
    return rows


def _ratio(num: int, den: int) -> float | None:
    return float(num) / float(den) if den else None


def weakest_labels(rows: object, k: int = 3) -> list[dict]:
    """The ``k`` labels with the lowest recall among those present and not all recalled.

    ``rows`` may come back from disk (``metrics.json``): rows that are not well-formed are skipped.
    Sorted by recall, then fewer rows first (the least evidence), then label order.
    """
    if not isinstance(rows, list):
        return []
    good = [
        (r["recall"], r["support"], i, r)
        for i, r in enumerate(rows)
        if isinstance(r, dict)
        and isinstance(r.get("recall"), (int, float))
        and isinstance(r.get("support"), int)
        and isinstance(r.get("label"), str)
        and r["recall"] < 1.0
    ]
    return [r for *_, r in sorted(good, key=lambda t: t[:3])[:k]]


def weakest_line(rows: object, split: str, k: int = 3) -> str | None:
    """``lowest recall on test: two_star 0.17 of 6 texts (4 read as three_star), ...``; ``None`` if none."""
    shown = weakest_labels(rows, k)
    if not shown:
        return None
    parts = []
    for r in shown:
        part = f"{r['label']} {r['recall']:.2f} of {r['support']} text{'s' if r['support'] != 1 else ''}"
        other, n = r.get("confused_with"), r.get("confused_count")
        if isinstance(other, str) and isinstance(n, int) and n > 0:
            part += f" ({n} read as {other})"
        parts.append(part)
    everyone = isinstance(rows, list) and len(shown) == len(rows)
    what = "recall by label" if everyone else "lowest recall by label"
    return f"{what} on {split}: " + ", ".join(parts)
