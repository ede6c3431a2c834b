import numpy as np
import pytest
import torch
from sklearn.metrics import (
    accuracy_score,
    brier_score_loss,
    f1_score,
    log_loss,
    roc_auc_score,
)

from ucse.evaluation.metrics import classification_metrics


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _ece_reference(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == labels).astype(float)
    ece = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        in_bin = (conf >= lo) & (conf < hi) if k < n_bins - 1 else (conf >= lo) & (conf <= hi)
        if in_bin.any():
            ece += in_bin.mean() * abs(correct[in_bin].mean() - conf[in_bin].mean())
    return ece


def _inputs(n: int, c: int, seed: int, scale: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.arange(c), rng.integers(0, c, n - c)])  # every class present
    logits = rng.normal(size=(n, c)) * scale
    logits[np.arange(n), labels] += 1.5  # better than chance, not perfect
    return logits, labels


def _assert_matches_sklearn(m: dict[str, float], logits: np.ndarray, labels: np.ndarray) -> None:
    c = logits.shape[1]
    probs = _softmax(logits)
    pred = probs.argmax(axis=1)
    assert m["accuracy"] == pytest.approx(accuracy_score(labels, pred), abs=1e-6)
    assert m["f1_macro"] == pytest.approx(f1_score(labels, pred, average="macro"), abs=1e-6)
    if c == 2:
        auroc = roc_auc_score(labels, probs[:, 1])
    else:
        auroc = roc_auc_score(labels, probs, multi_class="ovr", average="macro")
    assert m["auroc"] == pytest.approx(auroc, abs=1e-5)
    assert m["nll"] == pytest.approx(log_loss(labels, probs, labels=list(range(c))), abs=1e-6)
    onehot = np.eye(c)[labels]
    brier = ((probs - onehot) ** 2).sum(axis=1).mean()
    assert m["brier"] == pytest.approx(brier, abs=1e-6)
    assert m["brier"] == pytest.approx(
        brier_score_loss(labels, probs, labels=list(range(c)), scale_by_half=False), abs=1e-6
    )
    assert m["ece"] == pytest.approx(_ece_reference(probs, labels), abs=1e-5)


@pytest.mark.parametrize(("n", "c", "seed"), [(300, 5, 0), (157, 7, 1), (200, 3, 2)])
def test_multiclass_matches_sklearn(n: int, c: int, seed: int) -> None:
    logits, labels = _inputs(n, c, seed)
    m = classification_metrics(torch.tensor(logits), torch.tensor(labels), c)
    assert set(m) == {"accuracy", "f1_macro", "auroc", "ece", "nll", "brier"}
    _assert_matches_sklearn(m, logits, labels)


def test_binary_goes_through_multiclass_path() -> None:
    logits, labels = _inputs(250, 2, 3)
    m = classification_metrics(logits, labels, 2)  # numpy inputs accepted too
    _assert_matches_sklearn(m, logits, labels)


def test_probabilities_input_equals_logits_input() -> None:
    logits, labels = _inputs(120, 4, 4)
    from_logits = classification_metrics(logits, labels, 4)
    from_probs = classification_metrics(_softmax(logits), labels, 4, from_probs=True)
    for k, v in from_logits.items():
        assert from_probs[k] == pytest.approx(v, abs=1e-6), k


def test_logits_inside_unit_interval_are_still_softmaxed() -> None:
    # torchmetrics would take such values for probabilities; the metrics must not.
    rng = np.random.default_rng(5)
    logits = rng.uniform(0.0, 1.0, size=(200, 3))
    labels = np.concatenate([np.arange(3), rng.integers(0, 3, 197)])
    m = classification_metrics(logits, labels, 3)
    _assert_matches_sklearn(m, logits, labels)


def test_perfect_confident_predictions() -> None:
    labels = np.array([0, 1, 2, 1, 0])
    logits = np.eye(3)[labels] * 50.0
    m = classification_metrics(logits, labels, 3)
    assert m["accuracy"] == 1.0
    assert m["f1_macro"] == 1.0
    assert m["auroc"] == 1.0
    assert m["nll"] < 1e-10
    assert m["brier"] < 1e-10
    assert m["ece"] < 1e-6


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match="scores"):
        classification_metrics(np.zeros((4, 3)), np.zeros(4, dtype=int), 5)
    with pytest.raises(ValueError, match="labels"):
        classification_metrics(np.zeros((4, 3)), np.zeros(3, dtype=int), 3)


def test_rows_that_cannot_be_scored_are_refused() -> None:
    # Before: one NaN row made torchmetrics softmax every row again (ECE 0.10 -> 0.35 on 1000 rows), and
    # negative "probabilities" did the same to a perfect set.
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 3))
    y = rng.integers(0, 3, 50)
    for value in (np.nan, np.inf):
        bad = logits.copy()
        bad[7, 1] = value
        with pytest.raises(
            ValueError, match="1 of 50 rows cannot be scored .scores must be finite.; first row 7"
        ):
            classification_metrics(bad, y, 3)
    probs = np.eye(3)[y]
    probs[[3, 9]] = [[1.2, -0.2, 0.0], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="2 of 50 rows cannot be scored .probabilities must be finite"):
        classification_metrics(probs, y, 3, from_probs=True)


def test_auroc_averages_over_the_classes_the_labels_hold():
    # A small test slice without one of the labels: sklearn's macro one-vs-rest AUROC over the labels
    # present (each class's AUROC from its own column; the absent label has no positives, no AUROC).

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(40, 4))
    labels = rng.choice([0, 1, 3], 40)  # label 2 absent
    logits[np.arange(40), labels] += 1.0
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    want = np.mean([roc_auc_score(labels == c, probs[:, c]) for c in (0, 1, 3)])
    assert classification_metrics(logits, labels, 4)["auroc"] == pytest.approx(want, abs=1e-6)
    assert classification_metrics(logits[:5], np.zeros(5, dtype=int), 4)["auroc"] is None  # one class


@pytest.mark.parametrize(
    "labels, message",
    [
        ([0, 3, 1], r"label 3 at row 1 is outside 0..2 \(3 classes\)"),
        ([0, -1, 1], r"label -1 at row 1 is outside 0..2"),
    ],
)
def test_labels_outside_the_classes_are_named_not_a_reshape_error(labels, message):
    with pytest.raises(ValueError, match=message):
        classification_metrics(np.zeros((3, 3)), np.array(labels), 3)


def test_no_rows_is_refused_in_words():
    with pytest.raises(ValueError, match="no rows to score"):
        classification_metrics(np.zeros((0, 3)), np.zeros(0, int), 3)


def test_the_decisions_macro_f1_is_the_headline_macro_f1():
    # ucse eval printed two "macro-F1" lines: the headline over labels true or predicted (scikit-learn's
    # default), the decisions' over true labels only (0.78 against 0.58 for the same predictions).
    from ucse.uncertainty.class_prior import decision_scores

    y = np.array([0, 0, 1, 1, 2, 2])  # label 3 absent from the split...
    pred = np.array([0, 0, 1, 3, 2, 3])  # ...but predicted twice
    headline = classification_metrics(np.eye(4)[pred] * 5.0, y, 4)["f1_macro"]
    assert headline == pytest.approx(f1_score(y, pred, average="macro"))
    assert decision_scores(y, pred)["f1_macro"] == pytest.approx(headline)


def test_an_absent_class_warns_nothing() -> None:
    # torchmetrics' "No positive samples in targets" reached every `ucse eval` of a split missing a label,
    # though the macro AUROC leaves such classes out itself
    import warnings

    logits = np.random.default_rng(0).normal(size=(12, 4))
    labels = np.array([0, 1, 2] * 4)  # class 3 absent
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = classification_metrics(logits, labels, 4)
    assert m["auroc"] is not None
