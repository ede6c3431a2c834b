"""Typed configuration of ``ucse predict`` (texts in, labels with uncertainty out)."""

from __future__ import annotations

from dataclasses import dataclass

from ucse.config import ConfigError, Device, Precision, parse_flat_config
from ucse.uncertainty.acquisition import Strategy

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
    """Where the predictions go: ``.jsonl``, ``.csv`` or ``.parquet`` (by extension), or ``-`` for stdout
    (JSON lines). One row per input text (``drop_bad_rows`` aside), in input order. An existing file is
    refused unless ``overwrite``."""
    overwrite: bool = False
    """Replace an existing ``out`` file (written to a temporary sibling, renamed when complete)."""
    trust_remote_code: bool = False
    """Let the backbone's own model code run (a run or head asking for it is ignored)."""
    text_column: str | None = None
    """Text column of a table input; ``None`` means the column the run was trained on (``text``)."""
    id_column: str | None = None
    """A column of a table input copied into each output row, first and under its own name (e.g. ``id``), to
    join the predictions back to your records (rows keep the input's order either way)."""
    drop_bad_rows: bool = False
    """Leave out rows without a text to read (missing, empty, blank or invisible characters only), with a
    warning naming them, instead of failing the whole input (a nightly batch with one empty message)."""
    top_k: int | None = None
    """Keep only the ``top_k`` most probable labels in each row's ``probs``; ``None`` keeps all."""
    sets: bool = True
    """Add ``set`` (conformal prediction set, label names) when the head has a fitted conformal quantile."""
    accelerator: Device = Device.auto
    """Where the backbone and head run (``auto``, ``cpu``, ``cuda``; the old spelling ``device=`` still works,
    with a warning)."""
    batch_size: int | None = None
    """Texts per backbone forward pass; ``None`` keeps the run's backbone setting."""
    precision: Precision | None = None
    """The backbone's (and head's) arithmetic for these texts; ``None`` keeps the run's (``auto``: bf16 on a
    GPU or a CPU with AVX-512 BF16). ``fp32``: a text's probabilities no longer depend on the texts it is
    batched with (bf16 rounding of a padded batch moves them, by up to ~1e-2), at ~2x the CPU time."""
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


SUGGEST_FIELDS = ("guess", "confidence", "margin", "line")
"""The fields ``ucse suggest`` adds beside the text and the empty label (``ucse.inference.suggest``)."""


@dataclass
class SuggestConfig:
    """``ucse suggest``: pick the unlabelled texts worth labelling next (active learning, one batch)."""

    run: str | None = None
    """Run folder written by ``ucse train`` / ``train.py``, or its ``head/`` folder."""
    input: str | None = None
    """Unlabelled texts: ``.txt`` (one text per line), ``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``
    (a text column), or ``-`` for stdin (one text per line)."""
    n: int = 50
    """How many texts to pick (all of them when the input holds fewer; copies of a text count once)."""
    out: str = "-"
    """Where the picks go: ``.csv`` (to fill in) or ``.jsonl`` by extension, or ``-`` for stdout (JSON lines);
    the least sure first. An existing file is refused unless ``overwrite``."""
    strategy: Strategy = Strategy.diverse_margin
    """``diverse_margin`` (the smallest margins between the two likeliest labels, one per cluster of similar
    texts), ``margin`` (the smallest margins alone) or ``random`` (the baseline to compare with)."""
    seed: int = 0
    """Seed of ``random`` and of the clustering."""
    include_out_of_scope: bool = False
    """Keep the texts the run's out-of-scope flag raises among the candidates (left out by default: none of
    the run's labels fits them, so they would be the least sure and a labeller could only skip them)."""
    overwrite: bool = False
    """Replace an existing ``out`` file."""
    text_column: str | None = None
    """Text column of a table input; ``None`` means the column the run was trained on (``text``)."""
    id_column: str | None = None
    """A column of a table input copied into each output row, first and under its own name."""
    trust_remote_code: bool = False
    """Let the backbone's own model code run (a run or head asking for it is ignored)."""
    accelerator: Device = Device.auto
    """Where the backbone and head run (``auto``, ``cpu``, ``cuda``)."""
    batch_size: int | None = None
    """Texts per backbone forward pass; ``None`` keeps the run's backbone setting."""
    progress: bool = True
    """Show a progress bar on stderr for inputs of 1,000 texts or more."""
    skip_trained: bool = True
    """Leave out texts the run already has labels for: every row of its own data (train, validation and test:
    its ``rows.parquet``, or its training file read again), its out-of-scope examples (``data.ood_path``)
    and copies of them (up to case and punctuation), so a pool suggested from before need not be trimmed
    by hand."""
    data_path: str | None = None
    """The run's training file (or folder) where it is now, when it moved since training (for
    ``skip_trained``)."""


def build_suggest_config(overrides: list[str] | None = None) -> SuggestConfig:
    """Parse ``key=value`` tokens of ``ucse suggest`` into a validated ``SuggestConfig``."""
    cfg: SuggestConfig = parse_flat_config(SuggestConfig, overrides, "suggest", dash_is_text=True)
    if not cfg.run:
        raise ConfigError("suggest needs run=<run folder or its head/ folder> (written by ucse train).")
    if not cfg.input:
        raise ConfigError("suggest needs input=<unlabelled texts: .txt | .csv | .jsonl | .parquet | ->.")
    if cfg.n < 1:
        raise ConfigError(f"n={cfg.n} must be >= 1: how many texts to pick.")
    if cfg.batch_size is not None and cfg.batch_size < 1:
        raise ConfigError(f"batch_size={cfg.batch_size} must be >= 1 (or null for the run's setting).")
    return cfg
