"""Train a head on a frozen embedding backbone.

Usage:
    python train.py task=Banking77Classification backbone=minilm-l6 head=textcnn seed=0 loss.lcl_weight=0.6

``task=``, ``backbone=`` and ``head=`` pick files under ``configs/``; any other ``key=value`` overrides a
config field (see ``ucse/config.py``). The run folder is printed at the end.
"""

from __future__ import annotations

import logging
import os
import sys

from ucse.config import ConfigError, build_config
from ucse.training import train


def main(argv: list[str]) -> int:
    """Parse overrides, train, print where the run went."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = build_config(argv)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    try:
        result = train(cfg)
    except (ValueError, FileNotFoundError) as err:
        # Every ucse input error is a ValueError subclass with a message that names the fix (bad rows,
        # unknown labels, missing model packages...); set UCSE_DEBUG=1 to see the traceback.
        if os.environ.get("UCSE_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
    test = result.metrics["test"]
    print(f"run: {result.run_dir}\ntest accuracy {test['accuracy']:.4f}  macro-F1 {test['f1_macro']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
