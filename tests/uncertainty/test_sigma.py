import numpy as np
import pytest
import torch

from ucse.uncertainty.sigma import (
    accuracy_rejection_curve,
    arc_area,
    confidence_from_probs,
    confidence_from_sigma,
    difficulty_bins,
    sigma_scores,
)

# Hand-made 10-sample case (index: sigma, correct):
# 0: 0.50 T  1: 0.90 T  2: 1.20 F  3: 0.70 T  4: 1.00 F
# 5: 0.85 F  6: 1.50 F  7: 0.30 T  8: 0.95 T  9: 1.10 T
SIGMA = np.array([0.5, 0.9, 1.2, 0.7, 1.0, 0.85, 1.5, 0.3, 0.95, 1.1])
CORRECT = np.array([1, 1, 0, 1, 0, 0, 0, 1, 1, 1], dtype=bool)


def test_sigma_scores_is_mean_of_std_not_of_var() -> None:
    var = torch.tensor([[0.25, 1.0], [4.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(sigma_scores(var), [0.75, 1.0, 1.0])
    with pytest.raises(ValueError):
        sigma_scores(np.array([[-1.0, 1.0]]))
    with pytest.raises(ValueError):
        sigma_scores(np.ones(3))


def test_difficulty_bins_by_hand() -> None:
    bins = difficulty_bins(SIGMA, CORRECT)
    assert list(bins) == ["Easy", "Semi-hard", "Hard"]
    # Easy (< 0.8): 0, 3, 7 -> all correct.
    assert bins["Easy"] == {"count": 3, "errors": 0, "accuracy": 1.0, "error_share": 0.0}
    # Semi-hard [0.8, 1.0): 1, 5, 8 -> one error (5).
    assert bins["Semi-hard"]["count"] == 3
    assert bins["Semi-hard"]["errors"] == 1
    assert bins["Semi-hard"]["accuracy"] == pytest.approx(2 / 3)
    assert bins["Semi-hard"]["error_share"] == pytest.approx(1 / 4)
    # Hard (>= 1.0, so sigma == 1.0 is Hard): 2, 4, 6, 9 -> three errors.
    assert bins["Hard"]["count"] == 4
    assert bins["Hard"]["errors"] == 3
    assert bins["Hard"]["accuracy"] == pytest.approx(0.25)
    assert bins["Hard"]["error_share"] == pytest.approx(3 / 4)


def test_difficulty_bins_custom_thresholds_and_empty_bin() -> None:
    bins = difficulty_bins(SIGMA, CORRECT, thresholds=(0.0, 2.0))
    assert bins["Easy"]["count"] == 0
    assert np.isnan(bins["Easy"]["accuracy"])
    assert bins["Semi-hard"]["count"] == 10
    assert bins["Semi-hard"]["error_share"] == 1.0
    no_errors = difficulty_bins(SIGMA, np.ones(10, dtype=bool))
    assert [b["error_share"] for b in no_errors.values()] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        difficulty_bins(SIGMA, CORRECT, thresholds=(1.0, 0.8))


def test_arc_by_hand() -> None:
    # Least confident first (sigma descending): 6 F, 2 F, 9 T, 4 F, 8 T, 1 T, 5 F, 3 T, 0 T, 7 T.
    rates, accs = accuracy_rejection_curve(confidence_from_sigma(SIGMA), CORRECT, [0.0, 0.1, 0.2, 0.3, 0.5])
    np.testing.assert_allclose(rates, [0.0, 0.1, 0.2, 0.3, 0.5])
    np.testing.assert_allclose(accs, [6 / 10, 6 / 9, 6 / 8, 5 / 7, 4 / 5])
    expected_area = (
        0.1 * (6 / 10 + 6 / 9) / 2
        + 0.1 * (6 / 9 + 6 / 8) / 2
        + 0.1 * (6 / 8 + 5 / 7) / 2
        + 0.2 * (5 / 7 + 4 / 5) / 2
    )
    assert arc_area(rates, accs) == pytest.approx(expected_area)
    assert arc_area(rates, accs) == pytest.approx(np.trapezoid(accs, rates))


def test_arc_default_rates_and_floor() -> None:
    rates, accs = accuracy_rejection_curve(confidence_from_sigma(SIGMA), CORRECT)
    assert rates[0] == 0.0
    assert rates[-1] == pytest.approx(0.9)
    assert np.all(np.diff(rates) > 0)
    assert accs[0] == pytest.approx(0.6)
    # r = 0.9 rejects 9 of 10, keeping sample 7 (sigma 0.3, correct); r = 0.95 floors to 9 too.
    assert accs[-1] == 1.0
    _, accs = accuracy_rejection_curve(confidence_from_sigma(SIGMA), CORRECT, [0.95])
    assert accs[0] == 1.0
    with pytest.raises(ValueError):
        accuracy_rejection_curve(SIGMA, CORRECT, [0.5, 0.2])
    with pytest.raises(ValueError):
        accuracy_rejection_curve(SIGMA, CORRECT, [1.0])


def test_confidence_from_probs_rejects_least_certain() -> None:
    probs = np.array([[0.9, 0.1], [0.55, 0.45], [0.2, 0.8], [0.6, 0.4]])
    np.testing.assert_allclose(confidence_from_probs(probs), [0.9, 0.55, 0.8, 0.6])
    correct = np.array([1, 0, 1, 0], dtype=bool)
    _, accs = accuracy_rejection_curve(confidence_from_probs(probs), correct, [0.0, 0.25, 0.5])
    np.testing.assert_allclose(accs, [0.5, 2 / 3, 1.0])


def test_informative_confidence_gives_rising_curve() -> None:
    rng = np.random.default_rng(0)
    sigma = rng.uniform(0.2, 1.5, 2000)
    correct = rng.uniform(size=2000) > sigma / 1.6  # errors more likely at high sigma
    rates, accs = accuracy_rejection_curve(-sigma, correct)
    assert accs[-1] > accs[0] + 0.2
    _, random_accs = accuracy_rejection_curve(rng.permutation(-sigma), correct)
    assert arc_area(rates, accs) > arc_area(rates, random_accs) + 0.05


def test_the_accuracy_rejection_curve_is_the_expectation_over_the_orders_of_tied_confidences():
    # With one confidence for every text the stable sort rejected the first rows: 0.85 or 0.34 of area for the
    # same rows in another order. Now each cut inside a tie is its expectation: brute force over every order.
    import itertools

    conf = np.array([0.2, 0.5, 0.5, 0.5, 0.5, 0.9])
    right = np.array([False, True, False, True, False, True])
    rates = [0.0, 0.2, 0.34, 0.5, 0.67]
    expected = np.zeros(len(rates))
    orders = list(itertools.permutations(range(6)))
    for order in orders:  # reject the least confident first, ties in this order
        ranked = sorted(range(6), key=lambda i: (conf[i], order.index(i)))
        for j, r in enumerate(rates):
            kept = ranked[int(np.floor(r * 6 + 1e-9)) :]
            expected[j] += right[kept].mean() / len(orders)
    for perm in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [1, 3, 0, 5, 2, 4]):
        _, accs = accuracy_rejection_curve(conf[perm], right[perm], rates)
        np.testing.assert_allclose(accs, expected, rtol=0, atol=1e-12)


def test_a_nan_confidence_is_refused_by_the_accuracy_rejection_curve():
    # each NaN was a tie group of its own: the curve changed with the order of the NaN rows
    with pytest.raises(ValueError, match=r"1 NaN value\(s\) \(the first at index 2\)"):
        accuracy_rejection_curve(np.array([0.2, 0.3, np.nan]), np.array([True, False, True]), [0.5])
