"""Typed configuration of ``ucse predict`` (texts in, labels with uncertainty out)."""

from __future__ import annotations

from dataclasses import dataclass

from ucse.config import ConfigError, Device, parse_flat_config

ROW_FIELDS = ("text", "label", "confidence", "uncertainty", "abstain", "ood", "ood_score", "probs", "set")
"""The fields of a prediction row (``ucse.inference.rows``), which ``id_column`` may not shadow."""


@dataclass
class PredictConfig:
    """``ucse predict``: label texts with a trained run and say how sure it is."""

    run: str | None = None
    """Run folder written by ``ucse train`` / ``train.py``, or its ``head/`` folder."""
    input: str | None = None
    """Texts to label: ``.txt`` (one text per line), ``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``
    (a text column), or ``-`` for stdin (one text per line)."""
    out: str = "-"
    """Where the predictions go: ``.jsonl`` or ``.csv`` (by extension), or ``-`` for stdout (JSON lines).
    One row per input text, in input order. An existing file is refused unless ``overwrite``."""
    overwrite: bool = False
    """Replace an existing ``out`` file (written to a temporary sibling, renamed when complete)."""
    trust_remote_code: bool = False
    """Let the backbone's own model code run (a run or head asking for it is ignored)."""
    text_column: str | None = None
    """Text column of a table input; ``None`` means the column the run was trained on (``text``)."""
    id_column: str | None = None
    """A column of a table input copied into each output row, first and under its own name (e.g. ``id``), to
    join the predictions back to your records (rows keep the input's order either way)."""
    top_k: int | None = None
    """Keep only the ``top_k`` most probable labels in each row's ``probs``; ``None`` keeps all."""
    sets: bool = True
    """Add ``set`` (conformal prediction set, label names) when the head has a fitted conformal quantile."""
    accelerator: Device = Device.auto
    """Where the backbone and head run (``auto``, ``cpu``, ``cuda``; the old spelling ``device=`` still works,
    with a warning)."""
    batch_size: int | None = None
    """Texts per backbone forward pass; ``None`` keeps the run's backbone setting."""
    compile_head: bool = False
    """Run the head through ``torch.compile`` (compiled on first use, 1-6 s; eager again, with a warning,
    where compilation fails). On an H100 it cut the served head's share of inference from 1.9 % to 1.1 % at
    batch 512: for large inputs on a GPU, not for a few texts."""
    progress: bool = True
    """Show a progress bar (texts/s, ETA) on stderr for inputs of 1,000 texts or more."""


def build_predict_config(overrides: list[str] | None = None) -> PredictConfig:
    """Parse ``key=value`` tokens of ``ucse predict`` into a validated ``PredictConfig``."""
    cfg: PredictConfig = parse_flat_config(PredictConfig, overrides, "predict", dash_is_text=True)
    if not cfg.run:
        raise ConfigError("predict needs run=<run folder or its head/ folder> (written by ucse train).")
    if not cfg.input:
        raise ConfigError("predict needs input=<texts.txt | .csv | .jsonl | .parquet | - for stdin>.")
    if cfg.top_k is not None and cfg.top_k < 1:
        raise ConfigError(f"top_k={cfg.top_k} must be >= 1 (or null for all labels).")
    if cfg.batch_size is not None and cfg.batch_size < 1:  # 0 was taken as "the run's setting"
        raise ConfigError(f"batch_size={cfg.batch_size} must be >= 1 (or null for the run's setting).")
    return cfg
