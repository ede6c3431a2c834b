"""Train a head on a frozen embedding backbone.

Usage:
    python train.py task=Banking77Classification backbone=minilm-l6 head=textcnn seed=0 loss.lcl_weight=0.6

``task=``, ``backbone=`` and ``head=`` pick files under ``configs/``; any other ``key=value`` overrides a
config field (see ``ucse/config.py``). The run folder is printed at the end.
"""

from __future__ import annotations

import sys

from ucse.cli import run_cli
from ucse.config import build_config
from ucse.training import train
from ucse.uncertainty.config import check_uncertainty_config
from ucse.uncertainty.fit import fit_run_uncertainty


def main(argv: list[str]) -> int:
    """Parse overrides, train, print where the run went."""

    def body() -> int:
        cfg = build_config(argv)
        check_uncertainty_config(cfg.uncertainty)  # before training, not after it
        result = train(cfg)
        if cfg.uncertainty.enabled and (result.run_dir / "head" / "model.safetensors").is_file():
            profile = fit_run_uncertainty(result.run_dir)
            print(f"uncertainty profile: score {profile.score.value}, saved in {result.run_dir / 'head'}")
        test = result.metrics["test"]
        print(f"run: {result.run_dir}\ntest accuracy {test['accuracy']:.4f}  macro-F1 {test['f1_macro']:.4f}")
        return 0

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
