"""ucse's conformal APS against MAPIE 1.6 (scikit-learn-contrib's conformal library) on the same rows.

MAPIE's ``SplitConformalClassifier`` wraps a fitted scikit-learn estimator; a prefit estimator returning fixed
probabilities lets it score exactly the rows ucse scores. MAPIE calibrates APS randomised, with the score
cum - u * p_y; ucse's randomised score is cum - (1 - u) * p_y, so the cross-check feeds ucse 1 - u for
MAPIE's draws (``RandomState(seed).uniform``). Compared: every calibration score and the conformal quantile.
The set rules differ on purpose (MAPIE draws new test uniforms inside ``predict_set``; ucse keeps a seeded
one per row and adds the top label by default), so sets are checked for the coverage both guarantee.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from ucse.uncertainty.conformal import calibrate, label_scores, prediction_sets

mapie_classification = pytest.importorskip("mapie.classification")


class FixedProbabilities(ClassifierMixin, BaseEstimator):
    """A 'fitted' classifier whose input is a row index into precomputed probabilities."""

    def __init__(self, probs: np.ndarray | None = None) -> None:
        self.probs = probs

    def fit(self, x: np.ndarray, y: np.ndarray | None = None) -> FixedProbabilities:
        self.classes_ = np.arange(self.probs.shape[1])
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.probs[np.asarray(x).ravel().astype(int)]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.predict_proba(x).argmax(1)


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_aps_scores_and_quantile_equal_mapie(alpha: float) -> None:
    rng = np.random.default_rng(0)
    n, m, c, seed = 600, 2000, 6, 7
    probs = rng.dirichlet(np.ones(c) * 0.7, size=n + m)
    y = np.array([rng.choice(c, p=p) for p in probs])  # labels drawn from the probabilities: calibrated
    rows = np.arange(n + m).reshape(-1, 1)
    scc = mapie_classification.SplitConformalClassifier(
        estimator=FixedProbabilities(probs).fit(rows),
        confidence_level=1 - alpha,
        conformity_score="aps",
        prefit=True,
        random_state=seed,
    )
    scc.conformalize(rows[:n], y[:n])
    fitted = scc._mapie_classifier  # noqa: SLF001 - MAPIE keeps the fitted scores on its inner estimator
    theirs = fitted.conformity_scores_.ravel()
    u = torch.as_tensor(1 - np.random.RandomState(seed).uniform(size=n))
    ours = label_scores(probs[:n], u).gather(1, torch.as_tensor(y[:n])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    q_theirs = fitted.conformity_score_function_.get_conformity_score_quantiles(
        fitted.conformity_scores_, np.array([alpha]), cv="prefit"
    )
    q_ours = calibrate(probs[:n], y[:n], alpha, u=u)
    assert q_ours == pytest.approx(float(np.ravel(q_theirs)[0]), abs=1e-12)
    # Both sets guarantee coverage >= 1 - alpha on exchangeable rows; on 2000 test rows the sampling sd of a
    # coverage near 0.9 is sqrt(0.9 * 0.1 / 2000) ~ 0.007: allow 4 sd below the target.
    u_test = torch.as_tensor(np.random.RandomState(seed + 1).uniform(size=m))
    ours_sets = prediction_sets(probs[n:], q_ours, u_test).numpy()
    _, their_sets = scc.predict_set(rows[n:], conformity_score_params={"include_last_label": "randomized"})
    band = 4 * np.sqrt(alpha * (1 - alpha) / m)
    for sets in (ours_sets, their_sets[:, :, 0]):
        assert sets[np.arange(m), y[n:]].mean() >= 1 - alpha - band
