"""Evaluate a trained run, export its Gaussian embeddings, or evaluate a UEC ensemble.

Usage:
    python eval.py run=runs/Banking77Classification/minilm-l6/textcnn-seed0 [mteb=true] [split=test]
    python eval.py run=<run folder> export=<texts.jsonl | split> out=<dir>
    python eval.py ensemble=minilm-pair task=STSBenchmark [out=<dir>]

Arguments are ``key=value`` fields of ``ucse.config.EvalConfig``.
"""

from __future__ import annotations

import json
import sys

from ucse.cli import run_cli
from ucse.evaluation.config import build_eval_config


def main(argv: list[str]) -> int:
    """Parse arguments and dispatch to the package."""

    def body() -> int:
        cfg = build_eval_config(argv)
        if cfg.ensemble:
            from ucse.uec.evaluate import run_ensemble

            report = run_ensemble(cfg)
        elif cfg.export:
            from ucse.export.export import export_run

            report = export_run(cfg)
        else:
            from ucse.evaluation.evaluate import evaluate_run
            from ucse.evaluation.uncertainty_report import format_table

            report = evaluate_run(cfg)
            print(format_table(report))
        print(json.dumps(report, indent=2, default=str))
        return 0

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
