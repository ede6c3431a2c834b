"""``head=logreg``: the tuned linear probe every user of embeddings reaches for first.

L2-normalised pooled embeddings and scikit-learn's ``LogisticRegressionCV``: C from a log grid chosen by
stratified k-fold cross-validation accuracy on the training rows (ties to the smallest C), then refitted on
all of them. That is the baseline a trained head has to beat honestly (an untuned C=1 loses up to 4 points
on small sets); the fitted weights become a :class:`ucse.heads.probe.ProbeHead`.

Why accuracy and not log-loss: on unit vectors a small C gives near-uniform probabilities, so held-out
log-loss rewards a large C for its confidence, which the run's temperature sets anyway. Choosing by
log-loss picked C = 100 where accuracy picked 3 and cost 0.9 points on MassiveScenario at 32 examples per
class (10 seeds; docs/RESULTS.md section 1).

Why Newton-CG and not scikit-learn's default lbfgs: the same minimiser (the chosen C and the cross-validated
accuracies agree to 0.001 on Banking77), 2.5x faster on the multinomial problem (77 classes x 384 features:
``LogisticRegressionCV`` over the 13-point grid 49 s -> 20 s on 2 cores): at C = 31.6 it converges in 10
Newton steps (each solving with Hessian-vector products) where lbfgs takes 70 iterations.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

from ucse.backbone.cache import TokenStates
from ucse.backbone.pooling import pool, unit_pool
from ucse.config import Pooling
from ucse.heads.probe import ProbeHead

SOLVER = "newton-cg"
"""scikit-learn's solver for every probe fit (module docstring)."""
FEW_ROWS_C = float(np.sqrt(10.0))
"""C of a probe whose labels have one row each (no stratified CV can choose C; the inner folds of a tiny
cross-validated run): the grid point nearest the C cross-validation chose at 8 examples per class."""
C_GRID = np.logspace(-2, 4, 13)
"""Inverse regularisation strengths searched (1e-2 .. 1e4, half-decade steps); on unit vectors the best
C ranged from 3 (8 examples per class) to 300 (full sets) on the four local tasks."""


def pooled_embeddings(
    states: TokenStates, strategy: str, batch_size: int = 256, unit: bool = False
) -> np.ndarray:
    """(N, H) float32 pooled vectors of every row of ``states``, in row order (``unit``: L2-normalised)."""
    out = []
    for start in range(0, len(states), batch_size):
        hidden, mask = states.batch(
            list(range(start, min(start + batch_size, len(states))))
        )  # (B, T, H), (B, T)
        x = unit_pool(hidden, mask, strategy) if unit else pool(hidden, mask, strategy)
        out.append(x.cpu().numpy())  # states may sit on a GPU
    return np.concatenate(out)


def probe_features(states: TokenStates, strategy: str) -> np.ndarray:
    """(N, H) unit-norm pooled vectors (float64 for scikit-learn).

    What :class:`ProbeHead` computes before its linear layer, normalised in float32 as it does.
    """
    return pooled_embeddings(states, strategy, unit=True).astype(np.float64)


def cv_folds(labels: np.ndarray, folds: int) -> int:
    """Stratified folds: ``folds`` (at least 2, at most the largest class's rows), or 2 if a class has 1 row.

    Stratification spreads a class's rows over distinct folds, so a class of 2 rows is in every fold's
    training rows however many folds there are. Capping the folds at the smallest class's count (as
    scikit-learn's warning suggests) cut a 250-label catalog with a few 2-row labels to 2 folds for every
    label: the selection's models trained on half the rows, and its estimate (and calibration) read 6
    points below what the shipped model did on new texts. A class of one row sits out of its fold's training
    rows whatever k is: 2 folds then, as before.
    """
    counts = np.bincount(np.asarray(labels), minlength=1)  # (C,) rows per class
    return _fold_count(counts[counts > 0].tolist(), folds)


def _fold_count(sizes: list[int], folds: int) -> int:
    """:func:`cv_folds` from the classes' sizes (rows, or distinct texts where copies share a fold)."""
    if not sizes or min(sizes) < 2:
        return 2
    return max(2, min(folds, max(sizes)))  # more folds than any class has rows: none stratifies


def cv_splits(
    y: np.ndarray, folds: int, seed: int, groups: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified, shuffled k-fold splits of ``y`` (k from :func:`cv_folds`) that keep each group whole.

    ``groups``: (N,) ids of copies of one text (:func:`ucse.data.duplicates.text_groups`); ``None``, or ids
    with no copies, gives scikit-learn's ``StratifiedKFold``, the same folds as without this function. With
    copies the folds are ``StratifiedGroupKFold``'s over ``min(folds, fewest distinct texts of a label)``
    folds; where some label has a single distinct text, or a fold would train without a label, the plain
    folds are kept (its copies cannot be kept apart and still train every fold).
    """
    with warnings.catch_warnings():
        # a label of one row (k is at least 2) sits in one fold: expected here, not the user's to act on (it
        # printed scikit-learn's "least populated class" warning in the middle of `ucse train`'s output)
        warnings.filterwarnings("ignore", message="The least populated class in y has only")
        return _splits(np.asarray(y), folds, seed, groups)


def _splits(y: np.ndarray, folds: int, seed: int, groups: np.ndarray | None) -> list:
    plain = StratifiedKFold(cv_folds(y, folds), shuffle=True, random_state=seed)
    if groups is None or len(np.unique(groups)) == len(y):  # no copies (e.g. in a fold's training rows)
        return list(plain.split(np.zeros(len(y)), y))
    labels = np.unique(y)
    distinct = [len(np.unique(groups[y == label])) for label in labels]
    if min(distinct) >= 2:  # (each label's distinct texts in distinct folds, as cv_folds says of rows)
        k = _fold_count(distinct, folds)
        split = StratifiedGroupKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y, groups)
        grouped = list(split)
        if all(len(np.unique(y[tr])) == len(labels) for tr, _ in grouped):
            return grouped
    return list(plain.split(np.zeros(len(y)), y))


def fit_probe(
    x: np.ndarray,
    y: np.ndarray,
    num_classes: int,
    folds: int,
    seed: int,
    max_iter: int,
    c_value: float | None = None,
    groups: np.ndarray | None = None,
) -> tuple[LogisticRegression, dict]:
    """Fit the probe on (N, H) unit vectors ``x`` and (N,) labels ``y``.

    Args:
        x: (N, H) unit vectors (float64).
        y: (N,) class ids.
        num_classes: C; every class must have rows.
        folds: at most this many stratified folds to choose C (:func:`cv_folds`).
        seed: the folds' shuffle seed.
        max_iter: the solver's iterations.
        c_value: ``None`` chooses C from :data:`C_GRID` by ``LogisticRegressionCV`` (``folds``, ``seed``),
            or takes :data:`FEW_ROWS_C` when every label has a single row (no stratified folds exist);
            a value fits ``LogisticRegression`` at that C (``head=auto``'s refits, and the fold models its
            temperatures are fitted on, keep the shipped probe's C, so their logits share its scale).
        groups: (N,) ids of copies of one text, kept in one of the folds that choose C (:func:`cv_splits`;
            a copy scored in a fold beside its twin favours the least regularised C).

    Returns:
        The fitted estimator and what to report: the C, the folds (0 with a given C), whether the solver
        converged.
    """
    if c_value is None and np.bincount(np.asarray(y)).max() < 2:
        c_value = FEW_ROWS_C  # one row per label: no stratified fold split exists to choose C by
    if c_value is None:
        splits = cv_splits(y, folds, seed, groups)  # without groups: StratifiedKFold's, as before
        k = len(splits)
        clf = LogisticRegressionCV(
            Cs=C_GRID,
            cv=splits,
            scoring="accuracy",  # calibration is the temperature's job (module docstring)
            max_iter=max_iter,
            solver=SOLVER,
            n_jobs=None,
        )
    else:
        k, clf = 0, LogisticRegression(C=c_value, max_iter=max_iter, solver=SOLVER)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        clf.fit(x, y)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    if len(clf.classes_) != num_classes:
        raise ValueError(
            f"head=logreg: the training rows hold {len(clf.classes_)} of {num_classes} classes; every class "
            "needs training rows."
        )
    chosen = float(np.atleast_1d(clf.C_)[0]) if c_value is None else float(c_value)
    info = {"C": chosen, "folds": k, "converged": converged, "max_iter": max_iter}
    return clf, info


def probe_head(clf: LogisticRegression, hidden_size: int, pooling: Pooling) -> ProbeHead:
    """The fitted estimator as a :class:`ProbeHead` (binary: the two-logit form of the one-logit model)."""
    coef = np.asarray(clf.coef_, dtype=np.float64)  # (C, H), or (1, H) for two classes
    intercept = np.asarray(clf.intercept_, dtype=np.float64)
    if coef.shape[0] == 1:  # sklearn's binary model scores class 1 against 0: logits (0, s) give the same p
        coef = np.concatenate([np.zeros_like(coef), coef])
        intercept = np.concatenate([np.zeros_like(intercept), intercept])
    head = ProbeHead(hidden_size, coef.shape[0], pooling)
    with torch.no_grad():
        head.linear.weight.copy_(torch.as_tensor(coef, dtype=torch.float32))
        head.linear.bias.copy_(torch.as_tensor(intercept, dtype=torch.float32))
    return head
