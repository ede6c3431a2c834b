"""Next week's precision / recall / F1 of 'abusive' for ucse's default, ucse's operating points, and the
logistic regression at 0.5 and at thresholds chosen on its out-of-fold probabilities for the same targets."""

import json
import sys

import numpy as np
import pandas as pd
from sklearn.metrics import average_precision_score, precision_recall_curve, precision_recall_fscore_support

y = (pd.read_csv("next_week.csv").moderation_label == "abusive").astype(int).values


def prf(pred):
    p, r, f, _ = precision_recall_fscore_support(y, pred, labels=[1], zero_division=0)
    return f"P {p[0]:.3f}  R {r[0]:.3f}  F1 {f[0]:.3f}  answered {int(pred.sum())}"


def ucse(path):
    rows = [json.loads(line) for line in open(path)]
    return np.array([r["label"] == "abusive" for r in rows], int), np.array([r["probs"]["abusive"] for r in rows])


def threshold(oof, labels, precision=None, recall=None):
    """The rule ucse's decision uses, applied to the baseline's out-of-fold probabilities."""
    pr, rc, th = precision_recall_curve(labels, oof)
    pr, rc = pr[:-1], rc[:-1]
    if precision is not None:
        met = np.flatnonzero(pr >= precision)
        return th[met[0]] if met.size else th[np.argmax(pr)]
    return th[np.flatnonzero(rc >= recall)[-1]]


tag = sys.argv[1]
oof, ytr, nw = (np.load(f"logreg_{k}.npy") for k in ("oof", "train_y", "next_week"))
pred, p = ucse("pred_default.jsonl")
print(f"{tag} next week: {len(y)} texts, {y.sum()} abusive; AP ucse {average_precision_score(y, p):.3f}, "
      f"logreg {average_precision_score(y, nw):.3f}")
print(f"{tag} ucse default (most probable)     {prf(pred)}")
print(f"{tag} logreg at 0.5                    {prf((nw >= 0.5).astype(int))}")
for name, kw in (("precision=0.75", {"precision": 0.75}), ("recall=0.8", {"recall": 0.8})):
    pred, _ = ucse(f"pred_{name.split('=')[0]}.jsonl")
    print(f"{tag} ucse decision {name:16s}  {prf(pred)}")
    t = threshold(oof, ytr, **kw)
    print(f"{tag} logreg oof threshold {name:9s} {prf((nw >= t).astype(int))} (t {t:.3f})")
