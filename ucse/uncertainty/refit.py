"""``ucse calibrate``'s library side: a finished run's profile refitted with new settings, no retraining."""

from __future__ import annotations

import logging
from pathlib import Path

from ucse.config import from_yaml
from ucse.config.run_layout import RunFolder
from ucse.config.uncertainty import (
    check_target_labels,
    check_uncertainty_config,
    decision_label,
    recorded_for_calibrate,
)
from ucse.core.encoder import UcseEncoder
from ucse.core.run_folder import check_same_splits, finished_run, run_data
from ucse.training.run import resolve_device
from ucse.uncertainty.fit import fit_for_run
from ucse.uncertainty.profile import UncertaintyProfile

log = logging.getLogger(__name__)


def refit_run_profile(
    run_dir: str | Path,
    overrides: list[str],
    data_root: str | None = None,
    trust_remote_code: bool = False,
    data_path: str | None = None,
) -> tuple[UncertaintyProfile, UncertaintyProfile]:
    """Refit a finished run's profile with changed ``uncertainty.*`` fields, without retraining the head.

    The head's outputs come from the hidden states the run cached (or its saved out-of-fold outputs), so
    this takes seconds. The new settings are checked before anything is read; the profile files and the
    ``uncertainty`` section of the run's ``config.yaml`` are then replaced, each atomically.

    Args:
        run_dir: a run folder written by ``ucse train``.
        overrides: ``uncertainty.<field>=<value>`` tokens (``uncertainty.abstain.target_error=0.1``).
        data_root: local data folder, when it moved since training.
        trust_remote_code: let the backbone's model code run (the caller's choice).
        data_path: the run's ``data.path`` file (or folder), when it moved since training.

    Returns:
        (the profile before, the profile saved now).

    Raises:
        ValueError: a token that is not an ``uncertainty.*`` field or a bad value (naming it).
        FileNotFoundError: ``run_dir`` is not a finished run.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from ucse import atomic
    from ucse.config import ConfigError, to_yaml
    from ucse.heads.io import saved_sizes
    from ucse.uncertainty.profile import load_uncertainty_profile

    run = finished_run(run_dir)
    for tok in overrides:
        if tok.startswith("uncertainty.enabled="):
            raise ConfigError(
                f"'{tok}': calibrate always fits a profile; a head without one is trained with "
                "uncertainty.enabled=false."
            )
        if "=" not in tok or not tok.startswith("uncertainty."):
            raise ConfigError(
                f"'{tok}': calibrate changes only uncertainty.<field>=<value> settings "
                "(e.g. uncertainty.abstain.target_error=0.1); see `ucse calibrate --help`."
            )
    folder = RunFolder(run)
    train_cfg = from_yaml(folder.config)
    base = recorded_for_calibrate(train_cfg.uncertainty, overrides)
    try:
        merged = OmegaConf.merge(
            OmegaConf.structured(base),
            OmegaConf.from_dotlist([t.removeprefix("uncertainty.") for t in overrides]),
        )
    except OmegaConfBaseException as err:
        key = str(getattr(err, "full_key", "") or "")
        problem = str(err).splitlines()[0]
        raise ConfigError(f"uncertainty.{key}: {problem}; see `ucse calibrate --help`.") from None
    ucfg = OmegaConf.to_object(merged)
    asks_error = any(t.startswith("uncertainty.abstain.target_error=") for t in overrides)
    if asks_error and not any(t.startswith("uncertainty.abstain.coverage=") for t in overrides):
        ucfg.abstain.coverage = None  # an error target replaces the run's coverage rule (coverage wins)
    check_uncertainty_config(ucfg)
    fix = "refit from Python with ucse.uncertainty.fit.fit_profile"
    recorded = (train_cfg.data.root, train_cfg.data.path)
    data = run_data(run, train_cfg, data_root, data_path, "calibrate", fix)
    encoder = UcseEncoder.from_dir(
        folder.head, device=resolve_device(train_cfg.accelerator), trust_remote_code=trust_remote_code
    )
    c = len(encoder.label_names) or None
    try:
        before = load_uncertainty_profile(folder.head, num_classes=c, lost_ok=True)
    except (ValueError, FileNotFoundError) as err:  # damaged: replacing the profile is what was asked
        log.warning(
            "the saved profile cannot be used (%s); fitting it afresh", str(err).splitlines()[0][:300]
        )
        before = UncertaintyProfile.plain(c if c is not None else saved_sizes(folder.head)[0])
    check_same_splits(run, data, ("train", "validation"), refuse=True)  # before anything is replaced
    check_target_labels(ucfg.calibration, data.label_names)
    decision_label(ucfg.decision, data.label_names, len(data.label_names))
    # a run stopped before its profile was fitted also lacks its label review: written where missing
    profile = fit_for_run(run, train_cfg, ucfg, data, encoder, previous=before, review=not before.fitted)
    train_cfg.uncertainty = ucfg
    train_cfg.data.root, train_cfg.data.path = recorded  # the run's record keeps its own
    atomic.write_text(folder.config, to_yaml(train_cfg))
    return before, profile
