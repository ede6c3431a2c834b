"""``ucse eval`` / ``ucse export`` / ``ucse ensemble`` (and ``python eval.py``).

Usage:
    ucse eval run=runs/Banking77Classification/minilm-l6/textcnn-seed0 [mteb=true] [split=test]
    ucse eval run=runs/tickets input=new_tickets.csv      (the run on a labelled file of yours)
    ucse export run=<run folder> export=<texts.jsonl | split> out=<dir>
    ucse ensemble ensemble=minilm-pair task=STSBenchmark [out=<dir>]

Arguments are ``key=value`` fields (below). The terminal gets a short summary; the full report (MTEB
scores included) goes to ``eval.json`` in the run folder, ``meta.json`` of an export, or ``ensemble.json``.
"""

from __future__ import annotations

from pathlib import Path

from ucse.cli import run_cli
from ucse.cli.help import format_fields, show, wants_help
from ucse.cli.summary import eval_summary
from ucse.config import ConfigError, load_group
from ucse.evaluation.config import EvalConfig, build_eval_config

MODES = {"eval": "run", "export": "export", "ensemble": "ensemble"}
"""Subcommand -> the field that selects its mode."""


def help_text(command: str = "eval") -> str:
    """``ucse <eval|export|ensemble> --help``: usage and every field of ``EvalConfig``."""
    return f"ucse {command}: {__doc__.strip()}\n\n{format_fields(EvalConfig)}"


def check_mteb_task(cfg: EvalConfig) -> None:
    """``mteb=true`` on a task mteb does not know (your own data) fails before anything is loaded."""
    from ucse.evaluation.evaluate import load_run

    _, train_cfg = load_run(cfg.run or "", cfg.data_root, cfg.data_path)
    from ucse.evaluation.mteb_eval import check_known_task

    check_known_task(train_cfg.task.name)


def _uec_note(results: dict) -> list[str]:
    """One line where UEC scores below the uniform average or the best single member (first metric)."""
    first = lambda r: next((v for v in r.values() if v is not None), None)  # noqa: E731
    uec = first(results.get("uec", {}))
    others = {n: first(r) for n, r in results.items() if n == "uniform" or n.startswith("member:")}
    others = {n: v for n, v in others.items() if v is not None}
    if uec is None or not others:
        return []
    best = max(others, key=others.get)
    if uec >= others[best]:
        return []
    return [
        f"note: uec ({uec:.4f}) is below {best} ({others[best]:.4f}) on this task (ensemble.md: each "
        "member's mean weight, and how the weights follow member quality)"
    ]


def ensemble_summary(report: dict) -> str:
    """One line per ensemble variant with its scores, then where the full report is."""
    lines = [
        f"{name}: " + "  ".join(f"{m} {v:.4f}" for m, v in scores.items() if v is not None)
        for name, scores in report["results"].items()
    ]
    lines += _uec_note(report["results"])
    if report.get("skipped"):
        lines.append("not run here: " + "; ".join(f"{k} ({v})" for k, v in report["skipped"].items()))
    lines.append(f"full report: {Path(report['out']) / 'ensemble.json'} (+ ensemble.md, weights.png)")
    if report.get("weights_by_task"):
        lines.append(f"mean weights of every task run so far: {report['weights_by_task']}")
    return "\n".join(lines)


def main(argv: list[str], command: str = "eval") -> int:
    """Parse arguments, check the mode matches ``command``, dispatch to the package, print a summary."""
    if wants_help(argv):
        return show(help_text(command))

    def body() -> int:
        cfg = build_eval_config(argv)
        mode = "ensemble" if cfg.ensemble else "export" if cfg.export else "eval"
        if command != "eval" and mode != command:
            raise ConfigError(f"ucse {command} needs {MODES[command]}=...; see ucse {command} --help.")
        if mode == "ensemble":
            from ucse.evaluation.mteb_eval import check_known_task
            from ucse.uec.evaluate import run_ensemble

            if cfg.task:  # fail before loading members: an official task mteb knows, or an own-data folder
                try:
                    name = load_group("task", cfg.task).get("task", {}).get("name", cfg.task)
                except ConfigError:
                    from ucse.config import DataConfig
                    from ucse.data.tasks import resolve_data_root
                    from ucse.uec.ensemble_task import task_config

                    task_config(cfg.task, resolve_data_root(DataConfig(root=cfg.data_root)))
                else:
                    check_known_task(name, "ensemble=")

            print(ensemble_summary(run_ensemble(cfg)))
        elif mode == "export":
            from ucse.export.export import export_run

            report = export_run(cfg)
            of = f" ({report['slice']})" if report.get("slice") else ""
            dim = f"{report['dim']}-d mean + variance"
            print(f"exported {report['count']} texts{of} ({dim}) to {report['out']}")
        else:
            if cfg.mteb:
                check_mteb_task(cfg)
            from ucse.evaluation.uncertainty_report import format_table

            if cfg.input:  # the run on a labelled file of the user's
                from ucse.evaluation.evaluate_file import evaluate_file

                report = evaluate_file(cfg)
                written = Path(report["written"])
            else:
                from ucse.config.run_layout import RunFolder
                from ucse.evaluation.evaluate import evaluate_run

                report = evaluate_run(cfg)
                written = RunFolder(report["run"]).eval_report(cfg.split)
            print(format_table(report))
            print(eval_summary(report, written))
        return 0

    return run_cli(body)
