"""ucse: uncertainty-aware classification heads on frozen embedding models, and UEC ensembles.

    import ucse
    clf = ucse.train("reviews.csv", output_dir="runs/reviews")      # or a DataFrame, Dataset, (texts, labels)
    clf.predict(["great value"]), clf.predict_with_uncertainty("broke after a week"), clf.metrics_["test"]
    clf = ucse.UcseClassifier.from_pretrained("runs/reviews")       # later, or elsewhere
    clf = ucse.UcseClassifier(head="logreg").fit(texts, labels)      # a scikit-learn estimator

Heavy modules (torch, transformers) load on first use, not on ``import ucse``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# torch's CPU threads are GNU OpenMP's: a thread waiting at a barrier spins (300,000 turns) before it
# sleeps. On a shared machine, with another process busy on one of the cores, the spinning thread holds a
# core that the thread it waits for needs, at each of the head's many small ops: a 258-text run's fit took
# 534 s beside one busy loop on 2 cores, against 42 s alone. A short spin keeps nearly all of the quiet
# speed (within ~4-6 %) and took that run to 89 s beside the busy loop (32 s alone); sleeping at once
# (OMP_WAIT_POLICY=PASSIVE) is best beside other work but costs ~30 % alone (docs/RESULTS.md section 5,
# bench/shared_cpu.py). libgomp reads it when it loads, with torch's first import, so it is set here, before
# any; a setting of the user's own (either variable) is kept.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "10000"

from ucse.version import __version__

__all__ = ["UcseClassifier", "__version__", "train"]

if TYPE_CHECKING:
    from ucse.inference.classifier import UcseClassifier


def train(data: Any, **overrides: Any) -> UcseClassifier:
    """Train an uncertainty-aware classifier on your labelled texts; return it, fitted and loaded.

    The same as ``ucse train data.path=...``, with the same summary printed: the data's split files are
    used or stratified, seeded validation and test slices are carved; string or integer labels; the
    uncertainty profile (calibration, abstention threshold, conformal sets) is fitted and saved with the head.

    Args:
        data: a path (``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet`` file, a folder of split files or a
            ``save_to_disk`` folder), a ``datasets.Dataset``/``DatasetDict``, a pandas ``DataFrame``, or a
            ``(texts, labels)`` pair of lists.
        **overrides: config fields, nested (``optim={"epochs": 2}``) or dotted (``**{"optim.epochs": 2}``);
            ``backbone=``/``head=``/``task=`` pick config files as on the command line.

    Returns:
        The :class:`UcseClassifier` loaded from the run folder: ``run_dir_`` is that folder, ``metrics_``
        its ``metrics.json`` (test and validation figures, the head ``auto`` chose).

    Raises:
        ValueError: a bad config key or value, or bad data (naming the file and line).
    """
    from ucse.inference.classifier import UcseClassifier
    from ucse.pipeline import train_from
    from ucse.summary import train_summary

    result, profile = train_from(data, **overrides)
    print(train_summary(result.run_dir, result.metrics, profile))  # what `ucse train` prints
    device = str(overrides.get("device", "auto"))
    return UcseClassifier.from_pretrained(result.run_dir, device=device)


def __getattr__(name: str) -> Any:
    if name == "UcseClassifier":
        from ucse.inference.classifier import UcseClassifier

        return UcseClassifier
    raise AttributeError(f"module 'ucse' has no attribute {name!r}")
