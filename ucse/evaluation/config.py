"""Typed configuration of ``eval.py`` (evaluate a run, export Gaussian embeddings, or run an ensemble)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ucse.config import ConfigError, Device, parse_flat_config


@dataclass
class EvalConfig:
    """``eval.py``: evaluate a run, export Gaussian embeddings, or run an ensemble (exactly one mode)."""

    run: str | None = None
    """Run folder written by ``ucse train`` (evaluation and export modes)."""
    split: str = "test"
    """Split to evaluate."""
    input: str | None = None
    """A labelled file (.csv/.tsv/.jsonl/.json/.parquet/.xlsx) to evaluate the run on instead of its own
    split: new data, e.g. a later month's labelled sample. Its labels must be among the run's; the report goes
    to ``eval-input-<file name>.json`` in the run folder (no plots)."""
    text_column: str | None = None
    """The input file's text column (default: the run's ``data.text_column``)."""
    label_column: str | None = None
    """The input file's label column (default: the run's ``data.label_column``)."""
    drop_bad_rows: bool = False
    """Drop the input file's bad rows (a missing text, a label the run was not trained on) instead of
    failing; the report counts them."""
    mteb: bool = False
    """Also run the official MTEB task on the trained encoder (mu) and the raw backbone."""
    plots: bool = True
    """Write arc.png, tsne.png and difficulty.png into the run folder."""
    tsne_samples: int = 2000
    """Class-balanced test samples in the t-SNE plot (paper Fig. 4)."""
    sigma_thresholds: list[float] = field(default_factory=lambda: [0.8, 1.0])
    """Easy / Semi-hard / Hard sigma thresholds (paper Sec. 5.8)."""
    efficiency: bool = False
    """Measure backbone vs backbone + head latency and throughput (paper Table 5); off by default, since
    timing takes most of an evaluation's minutes."""
    efficiency_batches: int = 10
    """Batches timed per configuration in the efficiency measurement."""
    export: str | None = None
    """Export mode: a ``.jsonl`` file of ``{"text": ...}`` rows or a split name of the run's task."""
    out: str | None = None
    """Output folder of an export or an ensemble evaluation; with ``input=``, the report's ``.json`` file
    (default: ``eval-input-<file name>.json`` in the run folder)."""
    overwrite: bool = False
    """Let an export replace a non-empty ``out`` folder whole, or ``input=``'s report an existing ``out``
    file; without it they are refused."""
    trust_remote_code: bool = False
    """Run the backbone's own model code (``auto_map``). Only this flag turns it on: a value stored in a run
    or head is ignored."""
    ensemble: str | None = None
    """Ensemble mode: a config under ``configs/ensemble/``."""
    task: str | None = None
    """Task of the ensemble evaluation (e.g. ``STSBenchmark``, ``SciFact``)."""
    data_root: str | None = None
    """Local data folder (else env ``UCSE_DATA_DIR``)."""
    data_path: str | None = None
    """Where the run's ``data.path`` training file (or folder) is now, when it moved since training (its rows
    are checked against the run's)."""
    accelerator: Device = Device.auto
    """Where to run (``auto``, ``cpu``, ``cuda``; the old spelling ``device=`` still works, with a
    warning)."""
    batch_size: int = 64
    """Encoding batch size."""


def build_eval_config(overrides: list[str] | None = None) -> EvalConfig:
    """Parse ``key=value`` tokens of ``eval.py`` into a validated ``EvalConfig``."""
    cfg: EvalConfig = parse_flat_config(EvalConfig, overrides, "ucse eval")
    if any(t.strip() == "input=" for t in overrides or []):  # read as null: the split would be evaluated
        raise ConfigError("input= is empty (an unset shell variable?); give the labelled file to evaluate.")
    modes = [
        m
        for m, on in (("run", cfg.run and not cfg.export), ("export", cfg.export), ("ensemble", cfg.ensemble))
        if on
    ]
    if len(modes) != 1:
        raise ConfigError(
            "ucse eval needs exactly one mode: run=<run folder> (evaluate), "
            "run=<run folder> export=<texts.jsonl|split> out=<dir> (export Gaussian embeddings), "
            f"or ensemble=<name> task=<task>; got {modes or 'none'}."
        )
    given = [k for k in ("text_column", "label_column") if getattr(cfg, k) is not None]
    given += ["drop_bad_rows"] if cfg.drop_bad_rows else []
    if given and not cfg.input:
        are = "are" if len(given) > 1 else "is"
        raise ConfigError(f"{'= and '.join(given)}= {are} for input=<labelled file>; give input= too.")
    if cfg.input and modes == ["run"]:
        odd = [f"{k}={v}" for k, v in (("split", cfg.split), ("mteb", cfg.mteb)) if v not in ("test", False)]
        if odd:
            raise ConfigError(
                f"{' and '.join(odd)}: input= evaluates the run on that file instead of a split (and MTEB "
                "runs the official task); drop one of them."
            )
    elif cfg.input:
        raise ConfigError(
            "input= evaluates a run on a labelled file: give it with run=, not export= or ensemble=."
        )
    if modes == ["run"]:  # accepted and ignored before: the report goes into the run folder
        # input='s report may go elsewhere (a read-only run folder, a dated folder of monthly samples)
        stray = [k for k in ("out", "task") if getattr(cfg, k) is not None and not (k == "out" and cfg.input)]
        if stray:
            raise ConfigError(
                f"{' and '.join(f'{k}=' for k in stray)}: not used when evaluating a run (its report is "
                "written into the run folder as eval.json); out= is for export=, ensemble= or input= (the "
                "report's file), task= for ensemble=."
            )
    # checked here, not after the whole evaluation has run (t-SNE needs perplexity 2 < its rows)
    for key, least in (("tsne_samples", 4), ("batch_size", 1), ("efficiency_batches", 1)):
        if getattr(cfg, key) < least:
            raise ConfigError(f"Invalid value {key}={getattr(cfg, key)}; it must be at least {least}.")
    low_high = list(cfg.sigma_thresholds)
    if len(low_high) != 2 or not 0 < low_high[0] < low_high[1]:
        raise ConfigError(
            f"Invalid value sigma_thresholds={low_high}; give two increasing positive numbers: [0.8,1.0]."
        )
    return cfg
