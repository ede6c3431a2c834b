"""The ``ucse`` command: one entry point, one subcommand per job (``python -m ucse`` is the same)."""

from __future__ import annotations

import importlib
import sys

from ucse import __version__
from ucse.cli.help import show
from ucse.config import did_you_mean

COMMANDS = {
    "train": (
        "ucse.cli.train",
        "train a head on your data (data.path=...) or an MTEB task; fits its uncertainty",
    ),
    "calibrate": (
        "ucse.cli.calibrate",
        "refit a run's uncertainty profile (abstention target, sets...) in seconds, no retraining",
    ),
    "review": (
        "ucse.cli.review",
        "rank every labelled row of a run by how much cross-fitted probes doubt its label",
    ),
    "predict": (
        "ucse.cli.predict",
        "label texts with a trained run: label, confidence, uncertainty, abstain, probs",
    ),
    "suggest": (
        "ucse.cli.suggest",
        "pick the unlabelled texts worth labelling next (the model's least sure, spread out)",
    ),
    "eval": (
        "ucse.cli.evaluate",
        "evaluate a run: accuracy, calibration, selective prediction, sets, [mteb=true]",
    ),
    "export": (
        "ucse.cli.evaluate",
        "export a run's Gaussian embeddings (mean, variance) of texts or a split",
    ),
    "ensemble": ("ucse.cli.evaluate", "evaluate a UEC ensemble (configs/ensemble/) on a task"),
    "sweep": ("ucse.cli.sweep", "train the ablation grid over tasks x variants x seeds (Table-7 summary)"),
    "cache": ("ucse.cli.cache", "list the hidden-state cache's entries; prune those no run reads any more"),
}
"""Subcommand -> (module with ``main(argv)``, one-line description)."""


def overview() -> str:
    """``ucse --help``: the subcommands."""
    width = max(len(c) for c in COMMANDS)
    rows = "\n".join(f"  {c:<{width}}  {desc}" for c, (_, desc) in COMMANDS.items())
    return (
        f"usage: ucse <command> [key=value ...]   (ucse {__version__})\n\n"
        f"Uncertainty-aware text classification on frozen embedding models.\n\ncommands:\n{rows}\n\n"
        "`ucse <command> --help` lists every option of a command with its type, default and meaning.\n"
        "Example: ucse train data.path=reviews.csv output_dir=runs/reviews && "
        "ucse predict run=runs/reviews input=new.txt out=predictions.jsonl"
    )


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``ucse <command> ...`` to the command's ``main``; no or unknown command exits 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        print(overview(), file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command in ("-h", "--help", "help"):
        return show(overview())
    if command == "--version":
        print(__version__)
        return 0
    if command not in COMMANDS:
        print(
            f"error: unknown command '{command}'; commands: {', '.join(COMMANDS)}."
            f"{did_you_mean(command, list(COMMANDS))}",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    if module.__name__ == "ucse.cli.evaluate":
        return module.main(rest, command=command)
    return module.main(rest)
