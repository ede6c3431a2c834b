"""``ucse train`` (and ``python train.py``): train a head on a frozen backbone, fit its uncertainty profile.

Usage:
    ucse train data.path=reviews.csv output_dir=runs/reviews        # your own labelled texts, no config file
    ucse train task=Banking77Classification backbone=minilm-l6 head=textcnn seed=0 loss.lcl_weight=0.6
    ucse train task=/path/to/my_task.yaml ...                       # a config file outside configs/
    ucse train ... --cfg                                            # print the resolved config and exit

``task=``, ``backbone=`` and ``head=`` pick files under ``configs/`` (or a ``.yaml`` path); any other
``key=value`` sets one of the fields below.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ucse.cli import run_cli
from ucse.cli.help import format_fields, show, wants_help
from ucse.cli.summary import quiet_lightning, train_summary
from ucse.config import GROUPS, TrainConfig, build_config, group_choices, to_yaml
from ucse.uncertainty.config import check_uncertainty_config

# torch, Lightning, transformers and datasets are imported inside the functions that train, after the
# arguments are parsed and checked: `ucse train --help` and a mistyped key answer at once.
if TYPE_CHECKING:
    from ucse.data import TaskData
    from ucse.training.run import RunResult
    from ucse.uncertainty.profile import UncertaintyProfile


def help_text() -> str:
    """``ucse train --help``: the usage above, the config groups and every field of ``TrainConfig``."""
    groups = "\n".join(f"  {g}=  {', '.join(group_choices(g))}  (or a path to a .yaml file)" for g in GROUPS)
    return f"{__doc__.strip()}\n\nConfig groups:\n{groups}\n\n{format_fields(TrainConfig)}"


def fit_uncertainty(run_dir: Path, cfg: TrainConfig, data: TaskData) -> UncertaintyProfile:
    """Fit the uncertainty profile of a finished run on its validation split and save it in ``head/``.

    Uses the data already in hand (it may have been in memory), with the states the run cached.
    """
    from ucse.backbone.device import resolve_device
    from ucse.export.encoder import UcseEncoder
    from ucse.uncertainty.fit import fit_for_run

    encoder = UcseEncoder.from_dir(
        run_dir / "head", device=resolve_device(cfg.device), trust_remote_code=cfg.backbone.trust_remote_code
    )
    return fit_for_run(run_dir, cfg, cfg.uncertainty, data, encoder)


def run_training(cfg: TrainConfig, source: Any = None) -> tuple[RunResult, UncertaintyProfile | None]:
    """Load the data (``source`` in memory, else ``cfg``'s), train, then fit and save the uncertainty profile.

    Args:
        cfg: the resolved config.
        source: in-memory data for :func:`ucse.data.load_task_data` (DataFrame, Dataset, (texts, labels)...);
            ``None`` loads ``cfg.data.path`` / ``data.root`` / the hub.

    Returns:
        The run and its profile (``None`` with ``uncertainty.enabled=false``).
    """
    from ucse.data import load_classification, load_task_data
    from ucse.training import train
    from ucse.training.distributed import is_rank_zero
    from ucse.training.run import check_run
    from ucse.training.run_lock import hold_run_folder

    check_uncertainty_config(cfg.uncertainty)  # before training, not after it
    _, run_dir = check_run(cfg)  # e.g. a finished run is refused before the data are loaded
    if source is None:
        data = load_classification(cfg.task, cfg.data, cfg.seed)
    else:
        data = load_task_data(source, cfg.task, cfg.data, cfg.seed)
    if not is_rank_zero():
        return train(cfg, data=data), None  # devices=N: rank 0 alone fits the profile, writes the run folder
    with hold_run_folder(run_dir):  # the profile is part of the run: no other process in between
        result = train(cfg, data=data)
        profile = None
        if cfg.uncertainty.enabled and (result.run_dir / "head" / "model.safetensors").is_file():
            profile = fit_uncertainty(result.run_dir, cfg, data)
    return result, profile


def main(argv: list[str]) -> int:
    """Parse overrides, train, print a short summary (``--cfg``: print the resolved config; ``--help``)."""
    if wants_help(argv):
        return show(help_text())

    def body() -> int:
        show_cfg = "--cfg" in argv
        cfg = build_config([a for a in argv if a != "--cfg"])
        if show_cfg:
            print(to_yaml(cfg), end="")
            return 0
        if not os.environ.get("UCSE_DEBUG"):
            quiet_lightning()
        if not sys.stdout.isatty() and not any(a.startswith("progress_bar=") for a in argv):
            cfg.progress_bar = False  # a redirected run: the bar's last frame would only clutter the log
        result, profile = run_training(cfg)
        from ucse.training.distributed import is_rank_zero

        if not is_rank_zero():
            return 0  # devices=N: rank 0 alone reports
        print(train_summary(result.run_dir, result.metrics, profile))
        return 0

    return run_cli(body)
