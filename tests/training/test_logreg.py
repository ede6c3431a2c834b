"""The probe's choice of C against a brute-force reference: every C refitted from scratch, fold by fold."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score

from ucse.training.logreg import C_GRID, cv_splits, fit_probe


def _few_shot(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """6 classes x 6 unit vectors in 8 dimensions: learnable, far from separable (CV accuracy ~0.5)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(6), 6)
    x = rng.normal(size=(6, 8))[y] * 0.6 + rng.normal(size=(len(y), 8))
    return x / np.linalg.norm(x, axis=1, keepdims=True), y


def test_c_is_chosen_by_cross_validated_accuracy_not_log_loss():
    # Seed 10 of this generator is a case where the two criteria disagree (checked below, so the test
    # cannot pass vacuously): log-loss prefers a larger C for its confidence, at lower accuracy.
    x, y = _few_shot(10)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)  # the folds fit_probe(seed=0) makes

    def cv_mean(c: float, scoring: str) -> float:
        return cross_val_score(LogisticRegression(C=c, max_iter=2000), x, y, cv=cv, scoring=scoring).mean()

    acc = np.array([cv_mean(c, "accuracy") for c in C_GRID])
    nll = np.array([cv_mean(c, "neg_log_loss") for c in C_GRID])
    by_acc, by_nll = C_GRID[acc.argmax()], C_GRID[nll.argmax()]
    # The best accuracy leads the next distinct value by ~2 of the 36 texts (each text moves a fold's
    # accuracy by 1/7, the mean over 5 folds by ~1/36): a warm-started path that flips one borderline
    # text cannot change the winner.
    assert acc.max() - np.sort(np.unique(acc))[-2] > 1.5 / 36
    assert by_acc != by_nll and acc[nll.argmax()] < acc.max() - 1.5 / 36

    _, info = fit_probe(x, y, 6, folds=5, seed=0, max_iter=2000)
    assert info["C"] == by_acc and info["folds"] == 5


def test_the_probe_solver_reaches_the_same_minimiser_as_lbfgs():
    """The probe's solver (module docstring: chosen for speed) fits the model scikit-learn's default fits."""
    x, y = _few_shot(3)
    for c in (0.1, 3.0, 100.0):
        clf, info = fit_probe(x, y, 6, folds=5, seed=0, max_iter=2000, c_value=c)
        ref = LogisticRegression(C=c, max_iter=10_000, tol=1e-10).fit(
            x, y
        )  # lbfgs, converged far past the default
        assert info["converged"]
        # a gradient tolerance of 1e-4 on a strictly convex problem: probabilities within 2e-5 (C = 0.1) to
        # 6e-4 (C = 100, the flattest objective near its minimum); a wrong minimiser is off by 1e-1
        np.testing.assert_allclose(clf.predict_proba(x), ref.predict_proba(x), atol=2e-3)


def test_one_row_per_label_takes_the_fixed_c_instead_of_failing_the_fold_split():
    # The inner folds of a tiny cross-validated run can hold one row of each label: no stratified split
    # exists (scikit-learn raised "n_splits=2 cannot be greater than the number of members in each class").
    from ucse.training.logreg import FEW_ROWS_C, SOLVER

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 16))
    y = np.arange(4)
    x = centres[y] + 0.1 * rng.normal(size=(4, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    clf, info = fit_probe(x, y, 4, folds=5, seed=0, max_iter=1000)
    assert info["C"] == FEW_ROWS_C and info["folds"] == 0
    ref = LogisticRegression(C=FEW_ROWS_C, max_iter=1000, solver=SOLVER, tol=1e-10).fit(x, y)
    # the same model fitted directly (the probe stops at the solver's default tolerance)
    np.testing.assert_allclose(clf.predict_proba(x), ref.predict_proba(x), atol=1e-3)
    assert FEW_ROWS_C == min(C_GRID, key=lambda c: abs(np.log(c) - np.log(3.0)))  # the grid point near 3
    # A label with two rows beside single ones still has C chosen by cross-validation, as before.
    y2 = np.array([0, 0, 1, 2, 3])
    x2 = np.vstack([x, x[:1] + 0.05 * rng.normal(size=(1, 16))])[[0, 4, 1, 2, 3]]
    assert fit_probe(x2, y2, 4, folds=5, seed=0, max_iter=1000)[1]["folds"] == 2


def test_cv_splits_keep_copies_in_one_fold_and_are_stratified_k_fold_without_them():
    # copies of one text split across folds let a held-out copy be scored by a model that trained on its twin:
    # a doubled file's cross-validated flag flagged 16 % of new in-scope texts against its promised 5 %
    from sklearn.model_selection import StratifiedKFold

    from ucse.training.logreg import cv_splits

    y = np.repeat(np.arange(3), 12)
    plain = list(StratifiedKFold(5, shuffle=True, random_state=4).split(np.zeros(36), y))
    got = cv_splits(y, 5, 4)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(got, plain))  # the same folds as before
    groups = np.arange(36) // 2  # every text twice, next to each other
    for train, test in cv_splits(y, 5, 4, groups):
        assert not set(groups[train]) & set(groups[test])
        assert set(y[train]) == {0, 1, 2}
    assert sorted(np.concatenate([te for _, te in cv_splits(y, 5, 4, groups)]).tolist()) == list(range(36))
    # a label whose rows are all one text cannot be kept apart and still train every fold: the plain folds
    one_text = np.where(y == 2, 100, np.arange(36))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(cv_splits(y, 5, 4, one_text), plain))


def test_the_probes_c_search_keeps_copies_in_one_fold():
    # labels at random, every text twice: with a copy's twin in the training folds the least regularised C
    # memorises it and wins the search (a C chosen on copies); with the copies in one fold no C can
    rng = np.random.default_rng(2)
    y = np.repeat(rng.integers(0, 2, 40), 2)  # (80,): 40 texts, each twice
    x = np.repeat(rng.normal(size=(40, 64)), 2, axis=0)  # 40 points in 64 dimensions: separable
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    groups = np.arange(80) // 2
    plain, plain_info = fit_probe(x, y, 2, folds=5, seed=0, max_iter=2000)
    grouped, grouped_info = fit_probe(x, y, 2, folds=5, seed=0, max_iter=2000, groups=groups)
    plain_best = plain.scores_[1].mean(axis=0).max()  # (C,) mean fold accuracy, its best
    grouped_best = grouped.scores_[1].mean(axis=0).max()
    # ~80 % of held-out copies have their twin in training (memorised), the rest are coin flips: ~0.9
    assert plain_best > 0.8 and plain_info["C"] >= 10
    # 40 coin-flip texts: the fold mean's standard deviation is ~0.5 / sqrt(40) = 0.08; 0.75 is 3 of them
    # above chance (seeds 0-5 of this generator: 0.53-0.68 grouped, 0.83-0.98 plain)
    assert grouped_best < 0.75
    # without copies the folds are StratifiedKFold's: the same model as with no groups given
    _, info = fit_probe(x[::2], y[::2], 2, folds=5, seed=0, max_iter=2000, groups=np.arange(40))
    _, same = fit_probe(x[::2], y[::2], 2, folds=5, seed=0, max_iter=2000)
    assert info == same


@pytest.mark.parametrize("groups", [None, np.array([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])])
def test_a_label_of_one_row_is_split_without_a_warning(groups):
    # scikit-learn's "least populated class" warning was printed in the middle of `ucse train`'s output
    y = np.array([0] * 6 + [1] * 6 + [2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        splits = cv_splits(y, 5, 0, groups)
    assert len(splits) == 2  # at least 2 folds, though a label has one row
    assert sorted(np.concatenate([te for _, te in splits]).tolist()) == list(range(13))  # a partition


@pytest.mark.parametrize("copies", [False, True])
def test_a_label_of_two_rows_keeps_every_fold_and_trains_in_each(copies):
    # a 250-label catalog with a few 2-row labels was cut to 2 folds for every label: the selection's models
    # trained on half the rows and its estimate read 6 points below the shipped model's on new texts
    y = np.array([0] * 20 + [1] * 20 + [2] * 2)  # (42,)
    groups = np.concatenate([np.arange(40) // 2, [40, 41]]) if copies else None  # label 0, 1 rows twice
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no "least populated class" warning in the run's output
        splits = cv_splits(y, 5, 0, groups)
    assert len(splits) == 5
    assert sorted(np.concatenate([te for _, te in splits]).tolist()) == list(range(42))  # a partition
    for train, test in splits:
        assert set(y[train]) == {0, 1, 2}  # each 2-row label's rows in two folds: every fold trains on it
        if copies:
            assert not set(groups[train]) & set(groups[test])
