"""Train a head on a frozen embedding backbone: the same as ``ucse train`` (``python train.py --help``).

Usage:
    python train.py data.path=reviews.csv output_dir=runs/reviews
    python train.py task=Banking77Classification backbone=minilm-l6 head=textcnn seed=0 loss.lcl_weight=0.6
"""

from __future__ import annotations

import sys

from ucse.cli.train import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
