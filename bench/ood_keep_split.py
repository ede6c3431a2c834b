"""Where the out-of-scope flag's over-keeping on small data comes from (issue 19): bank size, split, head.

With ``head=auto`` cross-validating a small set, the ``joint_knn`` threshold is the tpr-quantile of each
row's distance to the *other folds'* rows under the *fold head* that did not train on it, while ``predict``
scores a new text against *every* training row under the *shipped head*. This bench trains the default recipe
on ``shots`` examples per class (``bench/peers.py``'s draw) and splits the test split's in-scope keep rate at
tpr 0.95 into:

- ``pooled_only``: the same rule on the frozen pooled vectors alone (no head), the threshold from the same
  folds; test texts scored against every row (``keep_full_bank``) and against a random 80 % of them
  (``keep_80pct_bank``, a bank the size of a fold's): the bank-size effect and what is left (the split);
- ``keep_now``: the shipped flag (joint space, shipped head, every row): the head's share is the rest;
- ``keep_norm``: one candidate fix, every distance divided by its head's median in-bank nearest-neighbour
  distance (the fold heads' on their banks, the shipped head's on its own), with the threshold recomputed.

The fold heads are read by wrapping ``ucse.training.auto._fold_distances`` (a diagnostic: the product does
not keep them). One JSON line per seed on stdout.

    UCSE_DATA_DIR=../shared/data python bench/ood_keep_split.py Banking77Classification 8 0 1 2
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

from ucse.training import auto  # noqa: E402
from ucse.training.auto_run import read_heldout  # noqa: E402
from ucse.training.neighbours import joint_features, neighbour_distances  # noqa: E402
from ucse.uncertainty.profile import load_uncertainty_profile  # noqa: E402

TPR = 0.95
SEEN: dict = {}  # what the wrapped _fold_distances saw: unit pooled vectors, folds, the fold banks' scales
_fold_distances = auto._fold_distances


def _wrapped(choice, rows, x, folds, heads, oof_mean, outputs=auto.run_head):
    scales = []
    for (tr, _), head in zip(folds, heads):
        if choice["weight"] > 0:
            bank = joint_features(outputs(head, auto.SubsetStates(rows, tr.tolist())).mean, x[tr])
        else:
            bank = auto._joint(choice, None, x[tr])
        scales.append(in_bank_scale(bank))
    SEEN.update(x=x, folds=folds, scales=scales)
    return _fold_distances(choice, rows, x, folds, heads, oof_mean, outputs)


def in_bank_scale(bank: torch.Tensor) -> float:
    """Median distance of a bank's rows to their nearest other row (the first neighbour is the row itself)."""
    return float(np.median(neighbour_distances(bank.float(), bank.float(), 2)[:, 1].numpy()))


def quantile(scores: np.ndarray) -> float:
    """The split-conformal keep threshold: the ceil((n + 1) tpr)-th smallest of n held-out scores."""
    n = len(scores)
    return float(np.sort(scores)[min(int(np.ceil((n + 1) * TPR)), n) - 1])


def measure(task: str, shots: str, seed: int, out: Path) -> dict:
    test = peers.read(task, "test")
    texts, y = peers.sample(*peers.read(task, "train"), shots, seed)
    train = {"texts": texts, "y": y, "shots": shots, "by_split": [("train", texts)]}
    run, cfg, data, _, _ = peers.train_ucse(task, train, test, seed, "auto", out)
    if "folds" not in SEEN:
        raise SystemExit(f"{task} {shots}: the run did not cross-validate with the joint flag")
    _, o = peers.outputs_on_test(run, cfg, data)
    c = len(data.label_names)
    det = load_uncertainty_profile(run / "head", c).ood
    d_test = det.scores(det.features(o.mean, o.pooled), None, None).numpy()  # (N,) shipped flag's distances
    d_held = read_heldout(run / "heldout.safetensors", c).distances[
        :, 0
    ]  # (n,) fold heads' nearest distances
    norm = d_held.copy()
    for (_, te), s in zip(SEEN["folds"], SEEN["scales"]):
        norm[te] = d_held[te] / s
    full_scale = in_bank_scale(det.stats.bank)
    # the same rule on the frozen pooled vectors alone
    xp = torch.nn.functional.normalize(torch.as_tensor(SEEN["x"]).float(), dim=1)
    tp = torch.nn.functional.normalize(torch.as_tensor(o.pooled).float(), dim=1)
    held_p = np.zeros(len(xp))
    for tr, te in SEEN["folds"]:
        held_p[te] = neighbour_distances(xp[te], xp[tr], 1)[:, 0].numpy()
    sub = np.random.default_rng(seed).choice(len(xp), int(0.8 * len(xp)), replace=False)
    full_p = neighbour_distances(tp, xp, 1)[:, 0].numpy()
    sub_p = neighbour_distances(tp, xp[sub], 1)[:, 0].numpy()
    fold_scales = [round(s, 4) for s in SEEN["scales"]]
    SEEN.clear()
    return {
        "task": task,
        "shots": shots,
        "seed": seed,
        "n_heldout": len(d_held),
        "pooled_only": {
            "keep_full_bank": float(np.mean(full_p <= quantile(held_p))),
            "keep_80pct_bank": float(np.mean(sub_p <= quantile(held_p))),
        },
        "keep_now": float(np.mean(d_test <= det.threshold)),
        "keep_norm": float(np.mean(d_test / full_scale <= quantile(norm))),
        "in_bank_scale": {"folds": fold_scales, "shipped": round(full_scale, 4)},
    }


def main() -> None:
    auto._fold_distances = _wrapped
    peers.print_seed_rows(measure, "ood-keep-split")


if __name__ == "__main__":
    main()
