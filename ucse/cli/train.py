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

import sys

from ucse.cli import run_cli
from ucse.cli.help import format_fields, show, wants_help
from ucse.config import GROUPS, TrainConfig, build_config, group_choices, to_yaml
from ucse.config.heap import keep_freed_heap
from ucse.pipeline import quiet_lightning, run_training
from ucse.summary import train_summary

# torch, Lightning, transformers and datasets are imported inside ucse.pipeline's functions, after the
# arguments are parsed and checked: `ucse train --help` and a mistyped key answer at once.


def help_text() -> str:
    """``ucse train --help``: the usage above, the config groups and every field of ``TrainConfig``."""
    groups = "\n".join(f"  {g}=  {', '.join(group_choices(g))}  (or a path to a .yaml file)" for g in GROUPS)
    return f"{__doc__.strip()}\n\nConfig groups:\n{groups}\n\n{format_fields(TrainConfig)}"


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
        if not sys.stdout.isatty() and not any(a.startswith("progress_bar=") for a in argv):
            cfg.progress_bar = False  # a redirected run: the bar's last frame would only clutter the log
        keep_freed_heap()  # this process is the command's: steps reuse freed memory (ucse/config/heap.py)
        with quiet_lightning():
            result, profile = run_training(cfg)
        from ucse.training.distributed import is_rank_zero

        if not is_rank_zero():
            return 0  # devices=N: rank 0 alone reports
        print(train_summary(result.run_dir, result.metrics, profile))
        return 0

    return run_cli(body)
