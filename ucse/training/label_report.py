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


def per_label(confusion: np.ndarray | torch.Tensor, label_names: Sequence[str | int]) -> list[dict]:
    """One row per label from a (C, C) confusion matrix (rows true, columns predicted).

    Derived here rather than by torchmetrics' per-class precision / recall: those would need the
    predictions again, and the Lightning test loop keeps only the matrix. The definitions are scikit-learn's
    ``precision_recall_fscore_support`` (tests compare them), except that a figure with a zero denominator
    is ``None`` (undefined: a label never predicted has no precision, one absent from the split no recall)
    where scikit-learn writes 0 with a warning.

    Args:
        confusion: (C, C) counts.
        label_names: the C labels in id order, as the data wrote them: names, or ints for integer labels
            (each row's ``label`` and ``confused_with`` then match what ``predict`` answers).

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
                "label": _value(name),
                "support": int(support[i]),
                "predicted": int(predicted[i]),
                "precision": _ratio(tp[i], predicted[i]),
                "recall": _ratio(tp[i], support[i]),
                "f1": _ratio(2 * tp[i], 2 * tp[i] + fp + fn),
                "confused_with": _value(label_names[j]) if fn else None,
                "confused_count": int(off[i, j]) if fn else 0,
            }
        )
    return rows


def _value(name: str | int) -> str | int:
    """A label as JSON carries it: an int stays an int (not a bool), anything else its text."""
    return name if type(name) is int else str(name)


def _is_label(value: object) -> bool:
    """Whether a row read back from disk holds a label here: a name or an integer id."""
    return isinstance(value, str) or type(value) is int


def _ratio(num: int, den: int) -> float | None:
    return float(num) / float(den) if den else None


_OF = {
    "recall": ("support", "recall by label", " right"),
    "precision": ("predicted", "answers least often right", ""),
}
"""What a share is out of, the line's words for it, and what the count is of."""


def _rows(rows: object, of: str) -> list[tuple[int, int, int, dict]]:
    """(right, out of, index, row) of the well-formed rows whose share ``of`` is below 1.

    ``rows`` may come back from disk (``metrics.json``): rows that are not well-formed are skipped.
    """
    if not isinstance(rows, list):
        return []
    out = []
    for i, r in enumerate(rows):
        if not (isinstance(r, dict) and _is_label(r.get("label"))):
            continue
        share, n = r.get(of), r.get(_OF[of][0])
        if isinstance(share, (int, float)) and type(n) is int and n > 0 and 0 <= share < 1:
            out.append((round(share * n), n, i, r))
    return out


def _upper(right: int, n: int) -> float:
    """The upper end of Wilson's 95 % interval of ``right / n`` (scipy's ``binomtest``)."""
    from scipy.stats import binomtest

    return float(binomtest(right, n).proportion_ci(confidence_level=0.95, method="wilson").high)


def _ranked(rows: object, k: int, of: str) -> list[tuple[int, int, int, dict]]:
    """:func:`_rows`' ``k`` surest to be weak (see :func:`weakest_labels`)."""
    return sorted(_rows(rows, of), key=lambda t: (_upper(t[0], t[1]), t[0] / t[1], t[2]))[:k]


def weakest_labels(rows: object, k: int = 3, of: str = "recall") -> list[dict]:
    """The ``k`` labels surest to be weak: lowest upper end of the 95 % interval of their ``of`` share.

    ``of``: ``"recall"`` (right out of the label's texts) or ``"precision"`` (right out of the texts given
    the label). Ranked by the interval, not the share alone: a label missed on its one test text (0 of 1,
    interval 0-0.79) says less than one recalled 4 times in 20 (0.08-0.42), and came first by its share.
    Ties: lower share, then label order. Labels at 1 (or undefined) are never named.
    """
    return [r for *_, r in _ranked(rows, k, of)]


def _share(x: float) -> str:
    """``x`` to two decimals, never shown as 1.00 or 0.00 when it is not (508 of 510: 0.996)."""
    text = f"{x:.2f}"
    if text in ("1.00", "0.00") and 0 < x < 1:
        text = f"{x:.3f}"
        if text in ("1.000", "0.000"):
            text = ">0.999" if x > 0.5 else "<0.001"
    return text


def label_name(name: str | int) -> str:
    """A label as the lines show it: quoted, escapes for control characters (``'refunds, late'``, ``'7'``)."""
    return repr(str(name))


def weakest_line(rows: object, split: str, k: int = 3, of: str = "recall") -> str | None:
    """``lowest recall by label on test: 'two_star' 1 of 6 right (0.17; 4 read as 'three_star'), ...``.

    With ``of="precision"``: ``answers least often right on test: 'billing' 11 of 18 (0.61), ...``. A
    label without texts in the split (support 0) is said at the end. ``None`` when no label is below 1.
    """
    shown = _ranked(rows, k, of)
    if not shown:
        return None
    _, what, right_of = _OF[of]
    parts = []
    for right, n, _, r in shown:
        part = f"{label_name(r['label'])} {right} of {n}{right_of} ({_share(right / n)}"
        other, wrong = r.get("confused_with"), r.get("confused_count")
        if of == "recall" and _is_label(other) and type(wrong) is int and wrong > 0:
            part += f"; {wrong} read as {label_name(other)}"
        parts.append(part + ")")
    if of == "recall" and len(shown) < len(rows):  # a list: _rows read it
        what = f"lowest {what}"
    line = f"{what} on {split}: " + ", ".join(parts)
    absent = (
        [r["label"] for r in rows if isinstance(r, dict) and r.get("support") == 0] if of == "recall" else []
    )
    if absent and all(_is_label(a) for a in absent):
        more = f" and {len(absent) - 3} more" if len(absent) > 3 else ""
        line += f"; no {split} texts of {', '.join(map(label_name, absent[:3]))}{more}"
    return line
