"""``head=logreg``: scikit-learn LogisticRegression on pooled frozen embeddings.

The probe every user of embeddings reaches for first. Unlike MTEB's few-shot protocol (100 iterations
on 8-32 samples per label) it is fitted to convergence on the full train split, so it is the honest
reference a trained head has to beat.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score

from ucse import atomic
from ucse.backbone.cache import TokenStates
from ucse.backbone.pooling import pool
from ucse.config import TrainConfig


def pooled_embeddings(states: TokenStates, strategy: str, batch_size: int = 256) -> np.ndarray:
    """(N, H) pooled vectors of every row of ``states``, in row order."""
    out = []
    for start in range(0, len(states), batch_size):
        hidden, mask = states.batch(
            list(range(start, min(start + batch_size, len(states))))
        )  # (B, T, H), (B, T)
        out.append(pool(hidden.float(), mask, strategy).cpu().numpy())  # states may sit on a GPU
    return np.concatenate(out)


def fit_logreg(
    cfg: TrainConfig,
    states: dict[str, TokenStates],
    labels: dict[str, np.ndarray],
    num_classes: int,
    hidden_size: int,
    run_dir: Path,
    meta: dict,
) -> dict:
    """Fit on train, report validation and test accuracy / macro-F1, save the weights as safetensors."""
    x = {s: pooled_embeddings(st, cfg.backbone.pooling) for s, st in states.items()}
    clf = LogisticRegression(max_iter=cfg.head.logreg_max_iter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        clf.fit(x["train"], labels["train"])
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    scores = {}
    for split in ("validation", "test"):
        pred = clf.predict(x[split])
        scores[split] = {
            "accuracy": float(accuracy_score(labels[split], pred)),
            "f1_macro": float(f1_score(labels[split], pred, average="macro")),
        }
    with atomic.atomic_dir(run_dir / "logreg") as tmp:
        save_file(
            {
                "coef": torch.as_tensor(clf.coef_, dtype=torch.float32).contiguous(),
                "intercept": torch.as_tensor(clf.intercept_, dtype=torch.float32).contiguous(),
            },
            str(tmp / "model.safetensors"),
        )
        atomic.write_json(tmp / "config.json", {"type": "logreg", "hidden_size": hidden_size, **meta})
    return {
        "val": scores["validation"],
        "test": scores["test"],
        "logreg": {
            "n_iter": int(np.max(clf.n_iter_)),
            "converged": converged,
            "max_iter": cfg.head.logreg_max_iter,
        },
    }
