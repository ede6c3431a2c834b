import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss

from ucse.config.uncertainty import CalibrationMethod
from ucse.uncertainty import calibration as cal

RNG = np.random.default_rng(0)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _sample_labels(probs):
    u = RNG.uniform(size=(len(probs), 1))
    return (probs.cumsum(1) < u).sum(1).clip(max=probs.shape[1] - 1)


@pytest.mark.parametrize("true_t", [0.5, 2.0])
def test_temperature_fit_recovers_a_known_temperature(true_t):
    logits = RNG.normal(size=(20_000, 5)) * 3
    labels = _sample_labels(_softmax(logits / true_t))
    assert cal.fit_temperature(logits, labels) == pytest.approx(true_t, rel=0.05)
    c = cal.fit_calibrator(logits, labels, CalibrationMethod.temperature)
    assert c.temperature == pytest.approx(true_t, rel=0.05)
    assert cal.ece(c.probs(logits), labels) < cal.ece(_softmax(logits), labels)


def _map_log_t_by_scipy(logits, labels, prior_std):
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    n = len(labels)

    def objective(u):
        nll = -log_softmax(logits / np.exp(u), axis=1)[np.arange(n), labels].mean()
        return nll + u**2 / (2 * prior_std**2 * n)

    best = minimize_scalar(objective, bounds=(-10, 10), method="bounded", options={"xatol": 1e-9})
    return best.x, objective


@pytest.mark.parametrize("n", [12, 300])
def test_map_temperature_is_scipys_minimiser_of_the_penalised_nll(n):
    labels = RNG.integers(0, 3, n)
    logits = RNG.normal(size=(n, 3)) * 2 + 3.0 * np.eye(3)[labels]  # informative, overconfident
    t = cal.fit_temperature(logits, labels)
    u_ref, objective = _map_log_t_by_scipy(logits, labels, cal.LOG_T_PRIOR_STD)
    assert np.log(t) == pytest.approx(u_ref, abs=1e-3)
    assert objective(np.log(t)) <= objective(u_ref) + 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tiny_logits_reach_the_global_minimum_not_a_false_one_near_t_1(seed):
    # A probe fitted at C = 0.01 on 3 texts per class: logits ~1e-2, the best T ~1e-2. From T = 1 the fit
    # stopped at a false minimum (T ~0.8, the probe rated as a coin) and head=auto shipped the TextCNN alone.
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(4), 3)
    logits = 0.01 * (rng.normal(size=(12, 4)) + 4 * np.eye(4)[labels])
    t = cal.fit_temperature(logits, labels)
    _, objective = _map_log_t_by_scipy(logits, labels, cal.LOG_T_PRIOR_STD)
    grid = np.linspace(-15, 8, 23_001)  # brute force over log T: the global minimiser
    u_ref = grid[np.argmin([objective(u) for u in grid])]
    assert np.log(t) == pytest.approx(u_ref, abs=2e-3)
    assert objective(np.log(t)) <= objective(u_ref) + 1e-9
    assert t < 0.05


def test_the_prior_keeps_a_handful_of_wrong_predictions_from_erasing_the_softmax():
    # 16 two-class out-of-fold predictions, 10 of them wrong: the likelihood keeps falling as T grows
    # (probability 1/2 for everything); the prior stops it at a finite, moderate softening.
    labels = np.array([0, 1] * 8)
    logits = np.zeros((16, 2))
    logits[np.arange(16), np.where(np.arange(16) < 10, 1 - labels, labels)] = 2.0
    mle = cal.fit_temperature(logits, labels, prior_std=None)
    t = cal.fit_temperature(logits, labels)
    assert mle > 1e3  # no finite optimum: L-BFGS walks off towards infinity
    assert 1.0 < t < 30.0
    p = cal.fit_calibrator(logits, labels, CalibrationMethod.temperature).probs(logits)
    assert float(p.max()) > 0.5 + 1e-3  # the predictions still say which class the model prefers


def test_the_prior_moves_a_well_determined_temperature_by_a_fraction_of_a_percent():
    logits = RNG.normal(size=(5000, 5)) * 3
    labels = _sample_labels(_softmax(logits / 2.0))
    mle, t = cal.fit_temperature(logits, labels, prior_std=None), cal.fit_temperature(logits, labels)
    # At the optimum u = log T: f'(u) = -u / (s^2 N); with f'' of order 0.1 here the shift is ~1e-3 in u.
    assert abs(np.log(t) - np.log(mle)) < 5e-3 and t < mle  # pulled towards T = 1


def test_vector_scaling_recovers_known_scales_and_biases():
    a, b = np.array([0.5, 1.0, 2.0]), np.array([0.5, 0.0, -0.5])
    logits = RNG.normal(size=(30_000, 3)) * 2
    labels = _sample_labels(_softmax(logits * a + b))
    fa, fb = cal.fit_vector_scaling(logits, labels)
    np.testing.assert_allclose(fa, a, atol=0.08)
    # Softmax is invariant to a common bias shift: compare centred biases.
    np.testing.assert_allclose(fb - fb.mean(), b - b.mean(), atol=0.08)
    assert cal.fit_calibrator(logits, labels, "vector").temperature is None


def _ece_by_hand(probs, labels, n_bins=15):
    conf, pred = probs.max(1), probs.argmax(1)
    total = 0.0
    for lo, hi in zip(np.linspace(0, 1, n_bins + 1)[:-1], np.linspace(0, 1, n_bins + 1)[1:], strict=True):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            total += m.mean() * abs((pred[m] == labels[m]).mean() - conf[m].mean())
    return total


def _adaptive_by_hand(probs, labels, n_bins):
    conf, ok = probs.max(1), probs.argmax(1) == labels
    order = np.argsort(conf, kind="stable")
    return sum(len(i) * abs(ok[i].mean() - conf[i].mean()) for i in np.array_split(order, n_bins)) / len(conf)


def test_calibration_metrics_against_hand_and_sklearn():
    probs = _softmax(RNG.normal(size=(997, 4)) * 2)
    labels = RNG.integers(0, 4, size=997)
    assert cal.ece(probs, labels) == pytest.approx(_ece_by_hand(probs, labels), abs=1e-6)
    assert cal.adaptive_ece(probs, labels, 15) == pytest.approx(_adaptive_by_hand(probs, labels, 15))
    assert cal.nll(probs, labels) == pytest.approx(log_loss(labels, probs, labels=range(4)))
    assert cal.brier(probs, labels) == pytest.approx(((probs - np.eye(4)[labels]) ** 2).sum(1).mean())
    bins = cal.reliability_bins(probs, labels)
    assert sum(bins["count"]) == 997
    gaps = [
        n / 997 * abs(a - c)
        for n, a, c in zip(bins["count"], bins["accuracy"], bins["confidence"], strict=True)
        if n
    ]
    assert sum(gaps) == pytest.approx(cal.ece(probs, labels), abs=1e-6)


def test_reliability_bins_add_up_to_the_ece_on_bin_edges():
    # Top confidences exactly on edges (0.5, 0.75: exact in binary with 4 bins) and exactly 1.
    top = np.array([0.5, 0.5, 0.75, 0.75, 1.0, 1.0, 0.6, 0.9, 0.55, 0.8])
    probs = np.stack([top, 1 - top], 1)
    labels = np.array([0, 1, 0, 0, 1, 0, 0, 1, 1, 0])
    bins = cal.reliability_bins(probs, labels, n_bins=4)
    gaps = [n / 10 * abs(a - c) for n, a, c in zip(bins["count"], bins["accuracy"], bins["confidence"]) if n]
    assert sum(gaps) == pytest.approx(cal.ece(probs, labels, n_bins=4), abs=1e-6)  # torchmetrics: float32
    # By hand: [0.5, 0.75) holds 0.5, 0.5, 0.6, 0.55 (2 right); 0.75 opens [0.75, 1); 1.0 is its own bin.
    assert bins["count"] == [0, 0, 4, 4, 2] and bins["edges"] == [0, 0.25, 0.5, 0.75, 1, 1]
    assert bins["accuracy"][2] == 0.5 and bins["accuracy"][3] == 0.75 and bins["accuracy"][4] == 0.5


def test_identity_calibrator_is_plain_softmax():
    logits = torch.randn(5, 3)
    c = cal.Calibrator.identity(3)
    assert c.temperature == 1.0
    np.testing.assert_allclose(c.probs(logits), torch.softmax(logits.double(), 1))


@pytest.mark.parametrize("method", [CalibrationMethod.temperature, CalibrationMethod.vector])
def test_error_free_validation_keeps_the_softmax(method, caplog):
    # No error: the NLL keeps falling as T -> 0, so a fit would return a degenerate T. The softmax is kept.
    logits = RNG.normal(size=(17, 3)) * 2
    labels = logits.argmax(1)
    grid = [
        float(torch.nn.functional.cross_entropy(torch.tensor(logits / t), torch.tensor(labels)))
        for t in (1.0, 0.5, 0.1, 0.01)
    ]
    assert grid == sorted(grid, reverse=True)  # the premise: monotone, no finite optimum
    c = cal.fit_calibrator(logits, labels, method)
    assert c.method == CalibrationMethod.none and c.temperature == 1.0
    assert "all classified correctly" in caplog.text
    # One error gives the fit an optimum again: a finite T, different from 1.
    labels[0] = (labels[0] + 1) % 3
    t = cal.fit_calibrator(logits, labels, CalibrationMethod.temperature).temperature
    assert 0.05 < t < 20 and t != pytest.approx(1.0)


def test_an_error_free_validation_is_said_once_with_cross_fitted_vector_scaling(caplog):
    # Vector scaling cross-fits the conformal quantile's probabilities over 5 folds of the same rows: every
    # fold is error-free too, and used to repeat the warning five more times, with the fold's size.
    from ucse.config.uncertainty import UncertaintyConfig
    from ucse.core.encoder import EncodedBatch
    from ucse.uncertainty.fit import fit_profile

    logits = RNG.normal(size=(40, 3)) * 2
    labels = logits.argmax(1)
    cfg = UncertaintyConfig()
    cfg.calibration.method = CalibrationMethod.vector
    cfg.abstain.coverage, cfg.abstain.target_error = 0.9, None
    with caplog.at_level("DEBUG", logger="ucse.uncertainty.calibration"):
        fit_profile(EncodedBatch(RNG.normal(size=(40, 4)), None, logits), labels, cfg)
    said = [r for r in caplog.records if "all classified correctly" in r.getMessage()]
    levels = [r.levelname for r in said]
    assert levels.count("WARNING") == 1 and "the 40 held-out texts" in said[0].getMessage()
    assert levels.count("DEBUG") == 5  # the folds, still on record for a debugging user


@pytest.mark.parametrize("n", [300, 1200])
def test_ece_floor_is_the_mean_ece_of_a_perfectly_calibrated_model(n):
    # Reference, independent of the floor's shortcut (Bernoulli right / wrong, binned by hand): whole label
    # sets drawn from the probabilities themselves (a model calibrated in every class, not only the top one),
    # each scored by torchmetrics' ECE. 400 sets: the mean's standard error is ~sd/20, sd ~0.2 x the mean.
    rng = np.random.default_rng(n)
    probs = rng.dirichlet(np.full(6, 0.4), size=n)  # confident and unsure rows alike
    cum = probs.cumsum(1)
    sets = [(cum < rng.uniform(size=(n, 1))).sum(1).clip(max=5) for _ in range(400)]
    reference = np.array([cal.ece(probs, y) for y in sets])
    floor = cal.ece_floor(probs, draws=400)
    assert floor == pytest.approx(reference.mean(), abs=5 * reference.std() / np.sqrt(400) + 5e-4)
    # certain predictions are never wrong under perfect calibration: nothing to see
    assert cal.ece_floor(np.eye(6)[rng.integers(0, 6, n)]) == 0.0


def test_ece_floor_shrinks_like_one_over_root_n():
    # Sampling noise: four times the texts (the same confidences repeated) halves the floor, up to the
    # bias of |mean| near 0 and the Monte-Carlo error (20 %).
    probs = np.random.default_rng(3).dirichlet(np.full(5, 0.5), size=500)
    small, large = cal.ece_floor(probs), cal.ece_floor(np.tile(probs, (4, 1)))
    assert large == pytest.approx(small / 2, rel=0.2)


def test_concurrent_fits_leave_the_thread_count_as_they_found_it():
    # Each fit runs L-BFGS on one thread and restores the count after; two at once must not restore each
    # other's 1 (the count is process-wide).
    from concurrent.futures import ThreadPoolExecutor

    before = torch.get_num_threads()
    logits = RNG.normal(size=(400, 5)) * 3
    labels = RNG.integers(0, 5, 400)
    with ThreadPoolExecutor(4) as pool:
        ts = list(pool.map(lambda _: cal.fit_temperature(logits, labels), range(8)))
    assert torch.get_num_threads() == before
    assert max(ts) - min(ts) < 1e-9


def test_out_of_fold_probabilities_of_a_single_row():
    # KFold(1) raised; a vector-calibrated profile on one held-out row reached it
    logits, labels = np.array([[2.0, 0.5, -1.0]]), np.array([0])
    probs = cal.out_of_fold_probs(logits, labels, CalibrationMethod.vector, folds=5, seed=0)
    assert probs.shape == (1, 3) and float(probs.sum()) == pytest.approx(1.0)


def _two_class(conf: np.ndarray) -> np.ndarray:
    return np.stack([conf, 1.0 - conf], axis=1)


def test_reliability_bins_bucket_as_the_reported_ece_does_within_float32_of_one():
    # torchmetrics buckets float32 confidences: 1 - 1e-9 is 1.0 there, in the [1, 1] bin. Bucketed in float64
    # it fell in [14/15, 1): the bins no longer added up to the ECE when the two groups erred in opposite ways
    # (0.225 against the reported 0.275).
    conf = np.r_[np.full(50, 1 - 1e-9), np.full(50, 0.95)]
    labels = np.r_[np.zeros(25, int), np.ones(25, int), np.zeros(50, int)]  # 50 % right at ~1, all at 0.95
    p = _two_class(conf)
    bins = cal.reliability_bins(p, labels)
    count = np.asarray(bins["count"])
    assert count[-1] == 50  # the [1, 1] bin, as torchmetrics puts them
    acc, mean_conf = np.nan_to_num(bins["accuracy"]), np.nan_to_num(bins["confidence"])
    from_bins = float((count / count.sum() * np.abs(acc - mean_conf)).sum())
    by_hand = 0.5 * 0.5 + 0.5 * 0.05  # |0.5 - 1| and |1 - 0.95|, half the texts each
    assert cal.ece(p, labels) == pytest.approx(by_hand, abs=1e-6)  # torchmetrics' float32 sums
    assert from_bins == pytest.approx(by_hand, abs=1e-6)


def test_adaptive_ece_keeps_ties_in_one_bin_so_the_rows_order_does_not_matter():
    # 30 texts at one confidence, 70 % right: equal-mass bins cut the tie, and the figure moved from 0.0 to
    # 0.47 with the order of the rows. Whole, the tie's bin is |0.7 - 0.7| = 0.
    conf = np.full(30, 0.7)
    right = np.r_[np.ones(21, bool), np.zeros(9, bool)]
    labels = np.where(right, 0, 1)
    p = _two_class(conf)
    rng = np.random.default_rng(0)
    for _ in range(5):
        perm = rng.permutation(30)
        assert cal.adaptive_ece(p[perm], labels[perm]) == pytest.approx(0.0, abs=1e-12)
    # without ties it is still the equal-mass definition: 4 texts, 2 bins of 2, by hand
    q = _two_class(np.array([0.6, 0.7, 0.8, 0.9]))
    y = np.array([0, 1, 0, 0])
    assert cal.adaptive_ece(q, y, n_bins=2) == pytest.approx(0.5 * abs(0.5 - 0.65) + 0.5 * abs(1.0 - 0.85))
