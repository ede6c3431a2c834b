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
    """Output folder of an export or an ensemble evaluation."""
    overwrite: bool = False
    """Let an export replace a non-empty ``out`` folder whole; without it such a folder is refused."""
    trust_remote_code: bool = False
    """Run the backbone's own model code (``auto_map``). Only this flag turns it on: a value stored in a run
    or head is ignored."""
    ensemble: str | None = None
    """Ensemble mode: a config under ``configs/ensemble/``."""
    task: str | None = None
    """Task of the ensemble evaluation (e.g. ``STSBenchmark``, ``SciFact``)."""
    data_root: str | None = None
    """Local data folder (else env ``UCSE_DATA_DIR``)."""
    accelerator: Device = Device.auto
    """Where to run (``auto``, ``cpu``, ``cuda``; the old spelling ``device=`` still works, with a
    warning)."""
    batch_size: int = 64
    """Encoding batch size."""


def build_eval_config(overrides: list[str] | None = None) -> EvalConfig:
    """Parse ``key=value`` tokens of ``eval.py`` into a validated ``EvalConfig``."""
    cfg: EvalConfig = parse_flat_config(EvalConfig, overrides, "ucse eval")
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
    if modes == ["run"]:  # accepted and ignored before: the report goes into the run folder
        stray = [k for k in ("out", "task") if getattr(cfg, k) is not None]
        if stray:
            raise ConfigError(
                f"{' and '.join(f'{k}=' for k in stray)}: not used when evaluating a run (its report is "
                "written into the run folder as eval.json); out= is for export= or ensemble=, task= for "
                "ensemble=."
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
