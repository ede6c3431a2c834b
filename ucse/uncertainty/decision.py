"""An operating point for one label (``uncertainty.decision``): a threshold on its probability.

The most probable label is the right answer for accuracy, not for a label whose misses and false alarms cost
differently: a moderation team wants "flag at >= 90 % precision" or "catch 80 % of the abusive ones" (a trial
found no way to say either). The rule answers ``label`` where its calibrated probability is at or above the
threshold, and each other text its most probable other label. The threshold is chosen on the held-out rows the
profile is calibrated on (validation, or out-of-fold), from scikit-learn's precision-recall curve; the
precision and recall it reaches there are saved beside it as estimates, not guarantees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from sklearn.metrics import precision_recall_curve

from ucse.config.uncertainty import DecisionConfig, decision_label


@dataclass
class DecisionRule:
    """Answer label ``label`` where its probability is ``>= threshold``, else the most probable other label.

    Attributes:
        label: the label's id (its column in the probabilities).
        threshold: the probability at or above which the label is answered, in [0, 1].
        rule: ``precision``, ``recall`` or ``threshold``: what the user asked for.
        target: the value asked for.
        val_precision: the label's precision on the held-out rows under the rule (``None``: never answered).
        val_recall: its recall there.
        val_rows: the held-out rows of the label (what the two figures rest on).
        achievable: whether the asked precision or recall was reached on the held-out rows (else the rule
            keeps the nearest: the highest precision, with the recall it gives).
    """

    label: int
    threshold: float
    rule: str
    target: float
    val_precision: float | None
    val_recall: float
    val_rows: int
    achievable: bool

    def predict(self, probs: torch.Tensor) -> torch.Tensor:
        """(N,) answers for (N, C) probabilities: the label at or above the threshold, else the best other."""
        others = probs.clone()
        others[:, self.label] = -1.0  # below every probability: the best other label
        return torch.where(probs[:, self.label] >= self.threshold, self.label, others.argmax(1))

    def to_saved(self) -> dict[str, Any]:
        """The rule as ``calibration.json`` stores it."""
        return asdict(self)


def fit_decision(
    probs: torch.Tensor, labels: np.ndarray, cfg: DecisionConfig, label_names: Sequence[str] | None
) -> DecisionRule | None:
    """The rule ``cfg`` asks for, its threshold chosen on held-out rows (``None`` without ``cfg.label``).

    Args:
        probs: (N, C) calibrated held-out probabilities (under the class prior in force).
        labels: (N,) their labels.
        cfg: the label and one of precision, recall or threshold.
        label_names: the run's labels in id order (``None``: the ids).

    Returns:
        The :class:`DecisionRule`. For ``precision``: the lowest threshold whose held-out precision is at
        least the target (the most recall at that precision); for ``recall``: the highest threshold whose
        held-out recall is at least the target (the most precision at that recall).
    """
    c = decision_label(cfg, label_names, probs.shape[1])
    if c is None:
        return None
    y = np.asarray(labels) == c  # (N,)
    p = probs[:, c].double().numpy()  # (N,)
    rows = int(y.sum())
    if cfg.threshold is not None:
        rule, target, t, ok = "threshold", float(cfg.threshold), float(cfg.threshold), True
    elif rows == 0:
        raise ValueError(
            f"uncertainty.decision.label={cfg.label} has no held-out row to choose a threshold on; give "
            "uncertainty.decision.threshold=<a probability> instead."
        )
    else:
        # precision[i], recall[i] are those of "answer where p >= thresholds[i]"; the last point (precision
        # 1, recall 0) has no threshold and is dropped
        precision, recall, thresholds = precision_recall_curve(y, p)
        precision, recall = precision[:-1], recall[:-1]
        if cfg.precision is not None:
            rule, target = "precision", float(cfg.precision)
            met = np.flatnonzero(precision >= target)
            ok = met.size > 0
            # thresholds ascend: the lowest that meets it, else the highest precision
            i = int(met[0]) if ok else int(np.argmax(precision))
        else:
            rule, target = "recall", float(cfg.recall)
            met = np.flatnonzero(recall >= target)  # recall falls as the threshold rises
            ok = met.size > 0
            i = int(met[-1]) if ok else 0
        t = float(thresholds[i])
    answered = p >= t
    hits = int((answered & y).sum())
    return DecisionRule(
        label=c,
        threshold=t,
        rule=rule,
        target=target,
        val_precision=hits / int(answered.sum()) if answered.any() else None,
        val_recall=hits / rows if rows else 0.0,
        val_rows=rows,
        achievable=ok,
    )


def from_saved(saved: Any, num_classes: int, fail: Any) -> DecisionRule:
    """A saved rule, every field checked (``fail(key, value, allowed)`` raises naming the field)."""
    names = {f.name for f in fields(DecisionRule)}
    if not isinstance(saved, dict) or set(saved) != names:
        fail("decision", saved, f"an object with the keys {sorted(names)}")

    def number(v: Any) -> bool:
        return type(v) in (int, float) and bool(np.isfinite(v))

    checks = [
        ("label", lambda v: type(v) is int and 0 <= v < num_classes, f"an integer in [0, {num_classes})"),
        ("threshold", lambda v: number(v) and 0 <= v <= 1, "a number in [0, 1]"),
        ("rule", lambda v: v in ("precision", "recall", "threshold"), "precision | recall | threshold"),
        ("target", lambda v: number(v) and 0 < v < 1, "a number in (0, 1)"),
        ("val_precision", lambda v: v is None or (number(v) and 0 <= v <= 1), "null or a number in [0, 1]"),
        ("val_recall", lambda v: number(v) and 0 <= v <= 1, "a number in [0, 1]"),
        ("val_rows", lambda v: type(v) is int and v >= 0, "an integer >= 0"),
        ("achievable", lambda v: type(v) is bool, "true or false"),
    ]
    for key, ok, allowed in checks:
        if not ok(saved[key]):
            fail(f"decision.{key}", saved[key], allowed)
    return DecisionRule(**saved)


def describe_decision(rule: DecisionRule | None, label_names: Sequence[str] | None = None) -> str:
    """``'abusive' where its probability >= 0.3532 (held-out precision 0.75, recall 0.64 of its 104 rows)``.

    ``none (the most probable label)`` without a rule; the label's id where ``label_names`` lacks it.
    """
    if rule is None:
        return "none (the most probable label)"
    named = label_names is not None and 0 <= rule.label < len(label_names)
    name = repr(str(label_names[rule.label])) if named else str(rule.label)
    got = "no text" if rule.val_precision is None else f"precision {rule.val_precision:.2f}"
    missed = "" if rule.achievable else f"; {rule.rule} {rule.target:g} is not reached on them"
    return (
        f"{name} where its probability >= {rule.threshold:.4g} (held-out {got}, recall "
        f"{rule.val_recall:.2f} of its {rule.val_rows} rows{missed})"
    )
