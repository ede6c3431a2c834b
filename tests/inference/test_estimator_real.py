"""The estimator with the real MiniLM on real Banking77 rows, inside scikit-learn's model selection.

Reference: scikit-learn's own ``LogisticRegressionCV`` on the *same* frozen features (ucse's pooled,
L2-normalised MiniLM embeddings), scored by the same ``cross_val_score`` folds: the estimator's tuned probe
must land within a few points of it (the probe is that model, with its own C grid and a calibration step).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold, cross_val_score
from toy_tasks import REAL_ROOT

from ucse.inference.classifier import UcseClassifier

pytestmark = pytest.mark.slow

INTENTS = (
    "card_arrival",
    "exchange_rate",
    "lost_or_stolen_card",
    "pin_blocked",
    "top_up_failed",
    "age_limit",
)
PER_INTENT = 40


def _rows() -> tuple[list[str], np.ndarray]:
    root = Path(os.environ.get("UCSE_DATA_DIR") or REAL_ROOT)
    path = root / "Banking77Classification" / "train.jsonl"
    assert path.is_file(), f"real data not found at {path}"
    rows = [json.loads(line) for line in path.open()]
    picked = [r for i in INTENTS for r in [r for r in rows if r["label_text"] == i][:PER_INTENT]]
    return [r["text"] for r in picked], np.asarray([r["label_text"] for r in picked], dtype=object)


def test_minilm_estimator_in_cross_val_score_tracks_sklearn_on_the_same_features():
    texts, y = _rows()
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    est = UcseClassifier(backbone="minilm-l6", head="logreg", device="cpu")
    ours = cross_val_score(est, texts, y, cv=folds)

    # The same features, from the fitted estimator's backbone: mean-pooled, L2-normalised states.
    fitted = est.fit(texts, y)
    from ucse.training.logreg import probe_features

    feats = probe_features(fitted.encoder_.states_for(texts), fitted.encoder_.backbone.cfg.pooling)
    ref = cross_val_score(LogisticRegressionCV(Cs=10, max_iter=2000), feats, y, cv=folds)
    assert ours.mean() > 0.8  # 6 intents, chance 1/6
    # Each fold trains on 90% of its train part (10% validates the profile): allow 5 points.
    assert ours.mean() >= ref.mean() - 0.05, (ours, ref)
