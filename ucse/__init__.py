"""ucse: uncertainty-aware classification heads on frozen embedding models, and UEC ensembles.

    import ucse
    run = ucse.train("reviews.csv", output_dir="runs/reviews")      # or a DataFrame, Dataset, (texts, labels)
    clf = ucse.UcseClassifier.from_pretrained(run.run_dir)
    clf.predict(["great value"]), clf.predict_with_uncertainty("broke after a week")

Heavy modules (torch, transformers) load on first use, not on ``import ucse``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["UcseClassifier", "__version__", "train"]

if TYPE_CHECKING:
    from ucse.inference.classifier import UcseClassifier
    from ucse.training.run import RunResult


def _tokens(overrides: dict[str, Any], prefix: str = "") -> list[str]:
    """``{"optim": {"epochs": 2}, "seed": 1, "optim.lr": 1e-3}`` -> ``["optim.epochs=2", "seed=1", ...]``."""
    out = []
    for key, value in overrides.items():
        if isinstance(value, dict):
            out += _tokens(value, f"{prefix}{key}.")
        else:
            text = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
            if isinstance(value, (list, tuple)):
                text = "[" + ",".join(str(v) for v in value) + "]"
            out.append(f"{prefix}{key}={text}")
    return out


def train(data: Any, **overrides: Any) -> RunResult:
    """Train an uncertainty-aware classifier on your labelled texts and return the run.

    The same as ``ucse train data.path=...``: the data's split files are used or stratified, seeded
    validation and test slices are carved; string or integer labels; the uncertainty profile
    (calibration, abstention threshold, conformal sets) is fitted and saved with the head.

    Args:
        data: a path (``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet`` file, a folder of split files or a
            ``save_to_disk`` folder), a ``datasets.Dataset``/``DatasetDict``, a pandas ``DataFrame``, or a
            ``(texts, labels)`` pair of lists.
        **overrides: config fields, nested (``optim={"epochs": 2}``) or dotted (``**{"optim.epochs": 2}``);
            ``backbone=``/``head=``/``task=`` pick config files as on the command line.

    Returns:
        The :class:`ucse.training.run.RunResult`.

    Raises:
        ValueError: a bad config key or value, or bad data (naming the file and line).
    """
    from pathlib import Path

    from ucse.cli.train import run_training
    from ucse.config import build_config

    tokens = _tokens(overrides)
    in_memory = not isinstance(data, (str, Path))
    if not in_memory:
        tokens.append(f"data.path={data}")
    cfg = build_config(tokens, own_data=in_memory)
    return run_training(cfg, data if in_memory else None)[0]


def __getattr__(name: str) -> Any:
    if name == "UcseClassifier":
        from ucse.inference.classifier import UcseClassifier

        return UcseClassifier
    raise AttributeError(f"module 'ucse' has no attribute {name!r}")
