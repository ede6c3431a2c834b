"""Labels held out of training for out-of-distribution benchmarks (``data.exclude_labels``).

The held-out labels leave the label space: their train and validation rows are removed, their test rows are
kept apart as ``TaskData.ood`` (texts and their original label names) so uncertainty scores can be checked
on inputs of classes the head never saw, and the remaining labels are renumbered 0..C'-1 in their order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets
import numpy as np

from ucse.config import did_you_mean
from ucse.data.tasks import DataError

MIN_KEPT = 2
"""Labels that must remain for a classifier to make sense."""


def excluded_names(spec: Any, label_names: Sequence[str], seed: int) -> list[str]:
    """Resolve ``data.exclude_labels`` to label names, in label-id order.

    Args:
        spec: ``None`` or an empty list (nothing held out), a list of label names (or one name), or a
            fraction in (0, 1): that share of the train labels (rounded, at least one) drawn with ``seed``.
        label_names: the train label names, in id order.
        seed: seed of the draw for a fraction.

    Raises:
        DataError: on an unknown name, a bad fraction, or when fewer than two labels would remain.
    """
    if spec is None:
        return []
    key = "data.exclude_labels"
    n = len(label_names)
    if isinstance(spec, float):
        if not 0.0 < spec < 1.0:
            raise DataError(f"{key}={spec} must be a fraction in (0, 1) or a list of label names.")
        k = max(1, round(spec * n))
        picked = np.random.default_rng(seed).choice(n, size=min(k, n), replace=False)
        names = {label_names[i] for i in picked}
    elif isinstance(spec, (str, list, tuple)):
        wanted = [spec] if isinstance(spec, str) else [str(v) for v in spec]
        unknown = [w for w in wanted if w not in label_names]
        if unknown:
            hint = did_you_mean(unknown[0], list(label_names))
            shown = ", ".join(list(label_names)[:20]) + (", ..." if n > 20 else "")
            raise DataError(
                f"{key}: {', '.join(map(repr, unknown))} not among the {n} train labels ({shown}).{hint}"
            )
        names = set(wanted)
    else:
        raise DataError(
            f"{key}={spec!r} must be a list of label names (e.g. [cat,dog]) or a fraction such as 0.25."
        )
    if n - len(names) < MIN_KEPT:
        raise DataError(
            f"{key} holds out {len(names)} of {n} labels, leaving {n - len(names)}; at least {MIN_KEPT} "
            "must remain to train a classifier."
        )
    return [name for name in label_names if name in names]


def exclude_labels(
    splits: dict[str, datasets.Dataset], label_names: list[str], spec: Any, seed: int
) -> tuple[dict[str, datasets.Dataset], list[str], datasets.Dataset | None, list[str]]:
    """Remove held-out labels from the label space (see the module docstring).

    Args:
        splits: ``train``, ``validation``, ``test``: ``text`` + ``label`` (ClassLabel over ``label_names``).
        label_names: names of ids 0..C-1.
        spec: ``data.exclude_labels`` (see :func:`excluded_names`).
        seed: seed of a fractional draw.

    Returns:
        (splits renumbered over the kept labels, kept names, OOD test rows or ``None``, held-out names).
    """
    held = excluded_names(spec, label_names, seed)
    if not held:
        return splits, label_names, None, []
    kept = [n for n in label_names if n not in held]
    new_id = np.full(len(label_names), -1, dtype=np.int64)
    for i, name in enumerate(label_names):
        if name in kept:
            new_id[i] = kept.index(name)
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=kept)})
    out = {}
    ood = None
    for split, ds in splits.items():
        labels = np.asarray(ds["label"][:], dtype=np.int64)  # (N,)
        texts = ds["text"][:]
        inside = new_id[labels] >= 0
        out[split] = datasets.Dataset.from_dict(
            {"text": [t for t, k in zip(texts, inside) if k], "label": new_id[labels[inside]].tolist()},
            features=features,
        )
        if split == "test":
            ood = datasets.Dataset.from_dict(
                {
                    "text": [t for t, k in zip(texts, inside) if not k],
                    "label_text": [label_names[y] for y in labels[~inside]],
                },
                features=datasets.Features(
                    {"text": datasets.Value("string"), "label_text": datasets.Value("string")}
                ),
            )
    return out, kept, ood, held
