"""The one training pipeline: data -> train the head -> fit the uncertainty profile -> save the run folder.

``ucse train``, ``train.py``, ``ucse.train``, the sweep, ``UcseClassifier.fit`` and the benches all call
:func:`run_training`, so every head they write carries its profile (calibration, abstention threshold,
conformal quantile) unless ``uncertainty.enabled=false``. :func:`ucse.training.train` is the step below
it: it trains and saves the head only.

torch, Lightning, transformers and ``datasets`` are imported inside the functions, so importing this
module (from the CLI, before the arguments are checked) costs nothing.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ucse.config import TrainConfig, build_config, debug_mode
from ucse.config.checks import check_data_path
from ucse.config.env import quiet_loggers
from ucse.config.run_layout import RunFolder, profile_repair
from ucse.config.uncertainty import check_uncertainty_config

if TYPE_CHECKING:
    from ucse.data import TaskData
    from ucse.training.run import RunResult
    from ucse.uncertainty.profile import UncertaintyProfile


def overrides_to_tokens(overrides: dict[str, Any], prefix: str = "") -> list[str]:
    """``{"optim": {"epochs": 2}, "seed": 1, "optim.lr": 1e-3}`` -> ``["optim.epochs=2", "seed=1", ...]``."""
    out = []
    for key, value in overrides.items():
        if isinstance(value, dict):
            out += overrides_to_tokens(value, f"{prefix}{key}.")
            continue
        if value is None:
            text = "null"
        elif isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, (list, tuple)):
            text = "[" + ",".join(str(v) for v in value) + "]"
        else:
            text = str(value)
        out.append(f"{prefix}{key}={text}")
    return out


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """Hide Lightning's start-up tips and dataloader hints so the summary is what the terminal shows.

    Errors and real warnings still show; under ``UCSE_DEBUG=1`` it changes nothing. For the
    ``with`` block only: the caller's warning filters, logger levels and Hugging Face progress-bar setting
    come back at its end (a notebook that fitted a ``UcseClassifier`` still sees its own Lightning warnings).
    """
    if debug_mode():  # everything shown, for the one who asked
        yield
        return
    names = (
        "lightning.pytorch.utilities.rank_zero",
        "lightning.fabric.utilities.rank_zero",
        "ucse.training.run",  # the run folder's INFO line repeats what the summary prints
    )
    env_was_unset = "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
    bars_were_on = None
    with warnings.catch_warnings(), quiet_loggers(names):  # the filters and levels go with the block
        # Hugging Face's progress bars ("Loading weights" once per model load): before transformers is
        # imported, its documented switch, read when it is (importing it here costs a bad data path ~0.4 s).
        if "transformers" in sys.modules or "huggingface_hub" in sys.modules:
            from transformers.utils import logging as hf_logging

            bars_were_on = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()
        else:
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
        warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=r".*The number of training batches.*")
        warnings.filterwarnings("ignore", message=r".*litlogger.*", category=UserWarning)
        # The run folder is ucse's own, judged before training (resume, overwrite, a stopped run's
        # leftovers): Lightning's "exists and is not empty ... will be deleted" about its logs/ and
        # checkpoints/ alarms users.
        warnings.filterwarnings(
            "ignore", message=r".*(Checkpoint|Experiment logs) directory .* exists and is not empty"
        )
        try:
            yield
        finally:
            if bars_were_on:
                from transformers.utils import logging as hf_logging

                hf_logging.enable_progress_bar()
            elif env_was_unset and not {"transformers", "huggingface_hub"} & sys.modules.keys():
                os.environ.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
            # else transformers was first imported in the block: huggingface_hub read the switch once, at
            # import, and its bars stay off (enabling them again only warns that the switch has priority)


def fit_uncertainty(
    run_dir: Path, cfg: TrainConfig, data: TaskData, review: bool = False
) -> UncertaintyProfile:
    """Fit the uncertainty profile of a finished run on its validation split and save it in ``head/``.

    Uses the data already in hand (it may have been in memory), with the states the run cached. ``review``:
    also write the run's ``label_review.csv`` (at the end of training).
    """
    from ucse.backbone.device import resolve_device
    from ucse.core.encoder import UcseEncoder
    from ucse.uncertainty.fit import fit_for_run

    encoder = UcseEncoder.from_dir(
        RunFolder(run_dir).head,
        device=resolve_device(cfg.accelerator),
        trust_remote_code=cfg.backbone.trust_remote_code,
    )
    return fit_for_run(run_dir, cfg, cfg.uncertainty, data, encoder, review=review)


def run_training(cfg: TrainConfig, source: Any = None) -> tuple[RunResult, UncertaintyProfile | None]:
    """Load the data (``source`` in memory, else ``cfg``'s), train, then fit and save the uncertainty profile.

    Args:
        cfg: the resolved config.
        source: in-memory data for :func:`ucse.data.load_task_data` (DataFrame, Dataset, (texts, labels)...);
            ``None`` loads ``cfg.data.path`` / ``data.root`` / the hub.

    Returns:
        The run and its profile (``None`` with ``uncertainty.enabled=false``).
    """
    if source is None and cfg.data.path is not None:
        check_data_path(cfg.data.path)  # the commonest mistake answers before torch loads (~2 s)
    from ucse.training.preflight import check_data_rows, check_run

    check_uncertainty_config(cfg.uncertainty)  # before training, not after it
    _, run_dir = check_run(cfg)  # e.g. a finished run is refused before the data are loaded
    from ucse.data import load_classification, load_task_data

    if source is None:
        data = load_classification(cfg.task, cfg.data, cfg.seed)
    else:
        data = load_task_data(source, cfg.task, cfg.data, cfg.seed)
    check_data_rows(cfg, data)
    # Only now the training stack (Lightning, transformers: seconds): every check above answers without it.
    import torch

    from ucse.heads.io import WEIGHTS_FILE
    from ucse.training import train
    from ucse.training.distributed import is_rank_zero
    from ucse.training.run_lock import hold_run_folder

    if not is_rank_zero():
        return train(cfg, data=data), None  # devices=N: rank 0 alone fits the profile, writes the run folder
    # train() gives the caller's random streams back; loading the head again for the profile draws the
    # modules' initial weights from torch's generator before the saved ones load (a notebook's next
    # torch.rand moved with every UcseClassifier.fit)
    with hold_run_folder(run_dir), torch.random.fork_rng(devices=[]):
        result = train(cfg, data=data)
        profile = None
        if cfg.uncertainty.enabled and (RunFolder(result.run_dir).head / WEIGHTS_FILE).is_file():
            try:
                profile = fit_uncertainty(result.run_dir, cfg, data, review=True)
            except BaseException:  # Ctrl-C, SIGTERM, an error: the folder looks finished, without a profile
                from ucse.data.run_rows import intact as rows_intact

                fix = profile_repair(result.run_dir, rows_intact(result.run_dir))
                logging.getLogger(__name__).warning(
                    "%s was trained, but its uncertainty profile was not fitted; %s.", result.run_dir, fix
                )
                raise
    return result, profile


def train_from(data: Any, **overrides: Any) -> tuple[RunResult, UncertaintyProfile | None]:
    """:func:`ucse.train`: a path or in-memory data + config overrides -> a finished run and its profile."""
    tokens = overrides_to_tokens(overrides)
    in_memory = not isinstance(data, (str, Path))
    if not in_memory:
        tokens.append(f"data.path={data}")
    cfg = build_config(tokens, own_data=in_memory, source="ucse.train's keyword arguments")
    with quiet_lightning():
        return run_training(cfg, data if in_memory else None)
