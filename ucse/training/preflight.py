"""What a training run can check before the training stack is imported.

Lightning and transformers take seconds to import (bench/cli_startup.py); a mistyped data path, a finished
run in the way or a label with too few rows must not wait for them. ``ucse.pipeline.run_training`` runs
:func:`check_run`, loads the data and runs :func:`check_data_rows` first, then imports
``ucse.training.run``, whose :func:`ucse.training.run.train` repeats both checks for callers that come
straight to it (they are cheap). Imports here: torch, numpy and ucse's config, data checks and run folder
only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ucse.backbone.cache_folder import check_cache_root
from ucse.backbone.device import resolve_device
from ucse.config import ConfigError, Device, HeadType, Strategy, TrainConfig
from ucse.config.build import resolve_group_copies, resolve_recipe_head
from ucse.config.checks import validate_config
from ucse.config.uncertainty import check_target_labels, decision_label
from ucse.data.checks import shown
from ucse.data.tasks import SPLITS, TaskData
from ucse.training.run_folder import check_run_dir

IN_MEMORY = (HeadType.auto, HeadType.blend, HeadType.logreg)
"""Heads fitted in one process on the cached states (no Lightning loop; ``devices`` does not apply)."""
HOLDOUT_MIN = 200
"""A validation split of at least max(HOLDOUT_MIN, 5C) texts selects on its own; smaller ones pool with
train into cross-validation (8 examples per class of 77 labels leave 0-1 validation texts per class)."""


def run_dir_for(cfg: TrainConfig) -> Path:
    """``output_dir`` or ``runs_dir/<task>/<backbone>/<name>``."""
    if cfg.output_dir:
        return Path(cfg.output_dir)
    # HeadType(...): a hand-built config may hold a string there
    name = cfg.name or f"{HeadType(cfg.head.type).value}-seed{cfg.seed}"
    return Path(cfg.runs_dir) / cfg.task.name / cfg.backbone.name / name


def is_distributed(cfg: TrainConfig) -> bool:
    """Whether the head is trained by several processes (logreg, blend, auto are fitted in one)."""
    return cfg.devices > 1 and HeadType(cfg.head.type) not in IN_MEMORY


def check_devices(cfg: TrainConfig) -> None:
    """Fail early, naming the fix, on a ``devices`` value Lightning would reject later (or hang on).

    Raises:
        ConfigError: ``devices`` < 1, more GPUs asked for than are visible, or FSDP without a GPU.
    """
    if cfg.devices < 1:
        raise ConfigError(f"devices={cfg.devices} must be >= 1 (the number of processes or GPUs).")
    gpus = torch.cuda.device_count()
    if cfg.strategy == Strategy.fsdp and (cfg.accelerator == Device.cpu or gpus == 0):
        raise ConfigError("strategy=fsdp needs CUDA GPUs (Lightning's FSDP); on CPU use strategy=ddp.")
    if cfg.accelerator == Device.cuda and cfg.devices > gpus:
        raise ConfigError(
            f"devices={cfg.devices} but only {gpus} CUDA GPU(s) are visible; use devices<={gpus}."
        )


def check_run(cfg: TrainConfig) -> tuple[torch.device, Path]:
    """Everything about a run that can be checked before anything is loaded or written.

    The config, the device, the cache folder, the process count and (on rank 0) what the run folder holds;
    the run folder is judged again once it is held (:func:`ucse.training.run.train`).

    Returns:
        The device to train on and the run folder.
    """
    validate_config(cfg)  # again: a config built by hand (Python API) skips build_config
    resolve_recipe_head(cfg)  # again, as validate_config: a config built by hand
    resolve_group_copies(cfg)  # config.yaml records the carve used
    device = resolve_device(cfg.accelerator)
    run_dir = run_dir_for(cfg)
    if cfg.cache.enabled:
        check_cache_root(cfg.cache.dir)  # a cache folder that is a file fails before any write
    check_devices(cfg)
    if is_distributed(cfg):
        # Lightning's launcher sets each process's rank in the environment; only a run of several processes
        # pays for importing Lightning to read it here.
        from ucse.training.distributed import is_rank_zero

        if not is_rank_zero():
            return device, run_dir
    check_run_dir(cfg, run_dir)
    return device, run_dir


def cross_validates(n_validation: int, num_classes: int) -> bool:
    """Whether ``head=auto`` selects by cross-validation over train + validation (a small validation)."""
    return n_validation < max(HOLDOUT_MIN, 5 * num_classes)


def check_label_rows(head_type: HeadType, labels: dict[str, np.ndarray], names: list[str]) -> None:
    """Fail before anything runs where a label has too few rows for the in-memory heads to be fitted.

    ``head=logreg`` and the holdout selection fit on train (a row of every label); the cross-validated
    selection (a small validation split) fits fold models on train + validation, so every label needs a row
    in some other fold: 2 rows. Labels with given splits can be that rare (a carved file keeps 2-row labels
    whole in train, and refuses 1-row ones). Other heads need no row counts: nothing is checked for them.

    Raises:
        ValueError: naming the labels (the first ten), their row counts and the fixes.
    """
    if head_type not in IN_MEMORY:
        return
    c = len(names)
    cv = head_type is not HeadType.logreg and cross_validates(len(labels["validation"]), c)
    rows = np.concatenate([labels["train"], labels["validation"]]) if cv else labels["train"]
    need = 2 if cv else 1
    counts = np.bincount(rows, minlength=c)
    short = np.flatnonzero(counts < need)
    if len(short):
        listed = shown([f"{names[i]!r} ({counts[i]})" for i in short])
        where = "train + validation rows (its cross-validation needs 2 of each)" if cv else "training rows"
        raise ValueError(
            f"head={head_type.value}: {len(short)} of {c} labels have too few {where}: {listed}. Add rows "
            "for them, merge or remove them, or train head=textcnn, which needs no row counts."
        )


def check_data_rows(cfg: TrainConfig, data: TaskData) -> None:
    """:func:`check_label_rows` for ``cfg``'s head on the loaded ``data``'s splits; the target mix's names."""
    check_label_rows(HeadType(cfg.head.type), {s: data.labels(s) for s in SPLITS}, data.label_names)
    if cfg.uncertainty.enabled:
        check_target_labels(cfg.uncertainty.calibration, data.label_names)
        decision_label(cfg.uncertainty.decision, data.label_names, len(data.label_names))
