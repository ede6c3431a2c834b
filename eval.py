"""Evaluate a trained run, export its Gaussian embeddings, or evaluate a UEC ensemble: ``ucse eval``.

Usage:
    python eval.py run=runs/Banking77Classification/minilm-l6/textcnn-seed0 [mteb=true] [split=test]
    python eval.py run=<run folder> export=<texts.jsonl | split> out=<dir>
    python eval.py ensemble=minilm-pair task=STSBenchmark [out=<dir>]

Arguments are ``key=value`` fields of ``ucse.evaluation.config.EvalConfig`` (``python eval.py --help``).
"""

from __future__ import annotations

import sys

from ucse.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
