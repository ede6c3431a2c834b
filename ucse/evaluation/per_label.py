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
    ood: np.ndarray | None = None,
    training_rows: Sequence[int] | None = None,
) -> dict:
    """Per-label rows and the confusion matrix of one split's decisions.

    Args:
        labels: (N,) true label ids.
        prediction: (N,) the label ids answered (the profile's top label, as ``predict`` gives it).
        label_names: the C labels in label-id order, as the data wrote them (ints for integer labels, as
            ``predict`` answers them).
        abstain: (N,) bool, texts the abstention rule holds back (``None``: no rule).
        sets: (N, C) bool conformal sets (``None``: no sets).
        ood: (N,) bool, texts the out-of-scope flag raises (``None``: no flag).
        training_rows: (C,) rows per label the head was trained on (``None``: not known).

    Returns:
        ``{"per_label": [...], "confusion": {"labels", "counts"}}``: the rows of
        :func:`ucse.training.label_report.per_label` plus, per label with texts, ``answered`` (share not
        held back), ``answered_error`` (error among those; ``None`` when none is answered) and
        ``set_coverage`` (share whose set holds the label), ``flagged`` (share the out-of-scope flag raises)
        and ``training_rows``; ``counts`` rows are true labels, columns answers.
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
        row |= {} if training_rows is None else {"training_rows": int(training_rows[i])}
        if not mine.any():
            row |= {"answered": None, "answered_error": None}
            row |= {} if sets is None else {"set_coverage": None}
            row |= {} if ood is None else {"flagged": None}
            continue
        kept = mine & ~held
        row["answered"] = float(kept.sum() / mine.sum())
        row["answered_error"] = float((p[kept] != i).mean()) if kept.any() else None
        if sets is not None:
            row["set_coverage"] = float(np.asarray(sets, dtype=bool)[mine, i].mean())
        if ood is not None:
            row["flagged"] = float(np.asarray(ood, dtype=bool)[mine].mean())
    confusion = {"labels": [row["label"] for row in rows]}
    if c <= DENSE_LABELS:
        confusion["counts"] = m.tolist()
    else:
        true, answered = np.nonzero(m)
        confusion |= {"counts": None, "nonzero": np.stack([true, answered, m[true, answered]], 1).tolist()}
    return {"per_label": rows, "confusion": confusion}


def _judged(rows: object, share: str) -> list[dict]:
    """The per-label rows with texts whose ``share`` is a number in [0, 1] (read back: any may be damaged)."""
    if not isinstance(rows, list):
        return []
    return [
        r
        for r in rows
        if isinstance(r, dict)
        and isinstance(r.get(share), float)
        and 0.0 <= r[share] <= 1.0
        and isinstance(r.get("support"), int)
        and r["support"] > 0
    ]


def lowest_coverage_line(rows: object, alpha: float, k: int = 3, level: float = 0.05) -> str | None:
    """``set coverage below 0.90 beyond chance for 2 labels (...): b 0.21 of 14 texts, ...``, or ``None``.

    A label's coverage on a few texts is noisy: with 7 texts and a true coverage of 0.94, about one label in
    three reads below 0.90 by chance (a first try named 24 of Banking77's 77 labels so). Named are the labels
    whose one-sided binomial test (scipy's ``binomtest``) rejects coverage >= 1 - alpha at ``level``,
    Bonferroni-corrected over the labels with texts; lowest coverage first.
    """
    from scipy.stats import binomtest

    tested = _judged(rows, "set_coverage")
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


def most_flagged_line(
    rows: object, tpr: float, weighted: bool = False, k: int = 3, level: float = 0.05
) -> str | None:
    """The labels the out-of-scope flag raises beyond its promise, in one line (``None``: no label).

    The flag keeps ``tpr`` of in-scope texts mixed like its held-out rows, not ``tpr`` of every label's: a
    label with few training rows has texts far from its few examples, and a trial's 5-row labels had 7-35 %
    of their texts flagged where 40-row ones had 1-5 %. Named as :func:`lowest_coverage_line` names labels:
    a one-sided binomial test of flagged <= 1 - tpr at ``level``, Bonferroni over the labels with texts; the
    most flagged first, each with its training rows where known. ``None`` when no label is. ``weighted``: the
    flag's keep rate is weighted to a mix already (a prior), so the balanced prior is not offered.
    """
    from scipy.stats import binomtest

    tested = _judged(rows, "flagged")
    high = sorted(
        (-r["flagged"], i, r)
        for i, r in enumerate(tested)
        if r["flagged"] > 1 - tpr
        and binomtest(round(r["flagged"] * r["support"]), r["support"], 1 - tpr, "greater").pvalue
        < level / len(tested)
    )
    if not high:
        return None

    def said(r: dict) -> str:
        n = r.get("training_rows")
        rows = f" ({n} training rows)" if isinstance(n, int) and not isinstance(n, bool) else ""
        return f"{label_name(r['label'])} {r['flagged']:.2f} of {r['support']} texts{rows}"

    many = f"{len(high)} label{'s' if len(high) != 1 else ''}"
    fix = (
        "more rows of it lower it"
        if weighted
        else (
            "more rows of it, or uncertainty.calibration.prior=balanced (every label alike; it also moves "
            "answers towards rare labels, and a label with one held-out row or none leaves the flag no "
            "threshold), lower it"
        )
    )
    return (
        f"  out-of-scope flag above {1 - tpr:.2f} beyond chance for {many} (binomial test at {level:g}, "
        f"Bonferroni over {len(tested)} labels): " + ", ".join(said(r) for *_, r in high[:k]) + ". "
        f"It keeps {tpr:.2f} of in-scope texts over all labels, not per label: a label's texts far from its "
        f"few training rows are flagged more; {fix}"
    )
