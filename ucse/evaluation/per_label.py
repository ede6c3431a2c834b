"""``eval.json``'s ``per_label`` and ``confusion``: what ``predict`` answers, label by label.

Marginal figures hide the labels where a guarantee or the accuracy fails: conformal sets cover 90 % of
texts on average while one rare label's texts are covered far less (APS / RAPS promise marginal coverage,
not coverage per label), and abstention can fall on one label's texts alone. The rows add, per true label,
the share of its texts answered, the error among them and the share whose set holds the true label.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ucse.training.label_report import confusion_counts, label_name, per_label

DENSE_LABELS = 200
"""Up to this many labels ``eval.json``'s confusion matrix is written whole, else its nonzero cells."""


def label_breakdown(
    labels: np.ndarray,
    prediction: np.ndarray,
    label_names: Sequence[str | int],
    abstain: np.ndarray | None = None,
    sets: np.ndarray | None = None,
) -> dict:
    """Per-label rows and the confusion matrix of one split's decisions.

    Args:
        labels: (N,) true label ids.
        prediction: (N,) the label ids answered (the profile's top label, as ``predict`` gives it).
        label_names: the C labels in label-id order, as the data wrote them (ints for integer labels, as
            ``predict`` answers them).
        abstain: (N,) bool, texts the abstention rule holds back (``None``: no rule).
        sets: (N, C) bool conformal sets (``None``: no sets).

    Returns:
        ``{"per_label": [...], "confusion": {"labels", "counts"}}``: the rows of
        :func:`ucse.training.label_report.per_label` plus, per label with texts, ``answered`` (share not
        held back), ``answered_error`` (error among those; ``None`` when none is answered) and
        ``set_coverage`` (share whose set holds the label); ``counts`` rows are true labels, columns answers.
        Above :data:`DENSE_LABELS` labels ``counts`` is ``None`` and ``nonzero`` lists the matrix's nonzero
        cells as ``[true id, answered id, count]`` (3,000 labels would write 9 million cells).
    """
    y, p = np.asarray(labels, dtype=np.int64), np.asarray(prediction, dtype=np.int64)
    c = len(label_names)
    m = confusion_counts(p, y, c)  # (C, C)
    rows = per_label(m, label_names)
    held = np.zeros(len(y), dtype=bool) if abstain is None else np.asarray(abstain, dtype=bool)  # (N,)
    for i, row in enumerate(rows):
        mine = y == i  # (N,)
        if not mine.any():
            row |= {"answered": None, "answered_error": None}
            row |= {} if sets is None else {"set_coverage": None}
            continue
        kept = mine & ~held
        row["answered"] = float(kept.sum() / mine.sum())
        row["answered_error"] = float((p[kept] != i).mean()) if kept.any() else None
        if sets is not None:
            row["set_coverage"] = float(np.asarray(sets, dtype=bool)[mine, i].mean())
    confusion = {"labels": [row["label"] for row in rows]}
    if c <= DENSE_LABELS:
        confusion["counts"] = m.tolist()
    else:
        true, answered = np.nonzero(m)
        confusion |= {"counts": None, "nonzero": np.stack([true, answered, m[true, answered]], 1).tolist()}
    return {"per_label": rows, "confusion": confusion}


def lowest_coverage_line(rows: object, alpha: float, k: int = 3, level: float = 0.05) -> str | None:
    """``set coverage below 0.90 beyond chance for 2 labels (...): b 0.21 of 14 texts, ...``, or ``None``.

    A label's coverage on a few texts is noisy: with 7 texts and a true coverage of 0.94, about one label in
    three reads below 0.90 by chance (a first try named 24 of Banking77's 77 labels so). Named are the labels
    whose one-sided binomial test (scipy's ``binomtest``) rejects coverage >= 1 - alpha at ``level``,
    Bonferroni-corrected over the labels with texts; lowest coverage first.
    """
    from scipy.stats import binomtest

    if not isinstance(rows, list):
        return None
    good = [
        r
        for r in rows
        if isinstance(r, dict)
        and isinstance(r.get("set_coverage"), float)
        and isinstance(r.get("support"), int)
    ]
    tested = [r for r in good if r["support"] > 0]
    low = sorted(
        (r["set_coverage"], r["support"], i, r)
        for i, r in enumerate(tested)
        if r["set_coverage"] < 1 - alpha
        and binomtest(round(r["set_coverage"] * r["support"]), r["support"], 1 - alpha, "less").pvalue
        < level / len(tested)
    )
    if not low:
        return None
    shown = ", ".join(
        f"{label_name(r['label'])} {r['set_coverage']:.2f} of {r['support']} texts" for *_, r in low[:k]
    )
    many = f"{len(low)} label{'s' if len(low) != 1 else ''}"
    # APS / RAPS promise 1 - alpha over all texts, not per label (class-conditional sets would)
    return (
        f"  set coverage below {1 - alpha:.2f} beyond chance for {many} (binomial test at {level:g}, "
        f"Bonferroni over {len(tested)} labels; the sets promise coverage over all texts, not per label): "
        + shown
    )
