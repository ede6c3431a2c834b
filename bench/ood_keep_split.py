"""Where the out-of-scope flag's keep rate departs from its target with ``head=auto`` (issue 19).

``head=auto`` refits the shipped head on every labelled row, so the ``joint_knn`` threshold is set on held-out
distances measured under the *selection models* (the fold heads of a cross-validated small set, or the TextCNN
fitted before the refit), each row against *their* training rows, while ``predict`` scores a new text against
*every* row under the *shipped head*. Their banks are smaller and their rows spread wider, so the threshold
errs long and the flag keeps too much on small data. This bench trains the default recipe
(``bench/peers.py``'s draw: ``shots`` examples per class, or ``full``) and reports the test split's in-scope
keep rate at tpr 0.95:

- ``keep_raw``: the threshold on the held-out distances as measured (the rule before the spacing);
- ``keep_now``: the shipped flag: those distances rescaled to the shipped bank's spacing
  (``ucse.training.neighbours.in_bank_scale``, the median distance of a bank's rows to their nearest other);
- ``pooled_only`` (cross-validated runs): the same rule on the frozen pooled vectors alone, threshold from the
  same folds, test texts searched against every row (``keep_full_bank``) and against a random 80 % of them
  (``keep_80pct_bank``, a bank the size of a fold's): the bank's size alone, without any head.

The folds are read by wrapping ``ucse.training.auto._fold_distances`` (a diagnostic; the product does not keep
them). One JSON line per seed on stdout.

    UCSE_DATA_DIR=../shared/data python bench/ood_keep_split.py Banking77Classification 8 0 1 2
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

from ucse.training import auto  # noqa: E402
from ucse.training.auto_run import read_heldout  # noqa: E402
from ucse.training.neighbours import neighbour_distances  # noqa: E402
from ucse.uncertainty.profile import load_uncertainty_profile  # noqa: E402

TPR = 0.95
SEEN: dict = {}  # what the wrapped _fold_distances saw: the unit pooled vectors and the folds
_fold_distances = auto._fold_distances


def _wrapped(choice, rows, x, folds, heads, oof_mean, outputs=auto.run_head):
    SEEN.update(x=x, folds=folds)
    return _fold_distances(choice, rows, x, folds, heads, oof_mean, outputs)


def quantile(scores: np.ndarray) -> float:
    """The split-conformal keep threshold: the ceil((n + 1) tpr)-th smallest of n held-out scores."""
    n = len(scores)
    return float(np.sort(scores)[min(int(np.ceil((n + 1) * TPR)), n) - 1])


def pooled_only(o_pooled: np.ndarray, seed: int) -> dict:
    """Keep rates of the keep rule on the pooled vectors alone, with the folds the run used."""
    xp = torch.nn.functional.normalize(torch.as_tensor(SEEN["x"]).float(), dim=1)
    tp = torch.nn.functional.normalize(torch.as_tensor(o_pooled).float(), dim=1)
    held = np.zeros(len(xp))
    for tr, te in SEEN["folds"]:
        held[te] = neighbour_distances(xp[te], xp[tr], 1)[:, 0].numpy()
    sub = np.random.default_rng(seed).choice(len(xp), int(0.8 * len(xp)), replace=False)
    full = neighbour_distances(tp, xp, 1)[:, 0].numpy()
    part = neighbour_distances(tp, xp[sub], 1)[:, 0].numpy()
    t = quantile(held)
    return {"keep_full_bank": float(np.mean(full <= t)), "keep_80pct_bank": float(np.mean(part <= t))}


def measure(task: str, shots: str, seed: int, out: Path) -> dict:
    test = peers.read(task, "test")
    texts, y = peers.sample(*peers.read(task, "train"), shots, seed)
    by_split = [("train", texts)]
    if shots == "full":  # as bench/peers.py: train + validation where the task has one
        t_va, y_va = peers.read(task, "validation")
        if t_va:
            by_split.append(("validation", t_va))
            texts, y = texts + t_va, np.concatenate([y, y_va])
    train = {"texts": texts, "y": y, "shots": shots, "by_split": by_split}
    run, cfg, data, _, _ = peers.train_ucse(task, train, test, seed, "auto", out)
    _, o = peers.outputs_on_test(run, cfg, data)
    c = len(data.label_names)
    det = load_uncertainty_profile(run / "head", c).ood
    read = read_heldout(run / "heldout.safetensors", c)
    if det is None or read is None or read[2] is None:
        raise SystemExit(f"{task} {shots}: the run's flag is not joint_knn on held-out distances")
    d_test = det.scores(det.features(o.mean, o.pooled), None, None).numpy()  # (N,) the shipped flag's
    row = {
        "task": task,
        "shots": shots,
        "seed": seed,
        "mode": "cross-validation" if "folds" in SEEN else "holdout",
        "n_heldout": len(read[1]),
        "keep_raw": float(np.mean(d_test <= quantile(read[2][:, 0]))),
        "keep_now": float(np.mean(d_test <= det.threshold)),
        "spacing": det.info.get("spacing"),
    }
    if "folds" in SEEN:
        row["pooled_only"] = pooled_only(o.pooled, seed)
    SEEN.clear()
    return row


def main() -> None:
    task, shots, *seeds = sys.argv[1:]
    auto._fold_distances = _wrapped
    out = Path("bench/out/ood-keep-split")
    out.mkdir(parents=True, exist_ok=True)
    for seed in map(int, seeds):
        print(json.dumps(measure(task, shots, seed, out)), flush=True)


if __name__ == "__main__":
    main()
