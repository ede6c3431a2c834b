"""Train the ablation grid and write the Table-7-shaped summary.

Usage:
    ucse sweep task=Banking77Classification,MassiveIntentClassification backbone=minilm-l6 \
        seeds=3 [variants=textcnn-both,linear-base] [out=runs/sweeps/minilm-l6] [optim.epochs=3 ...]

With ``data.path=<your file>`` and no ``task=``, the grid is trained on your file, named after it as
``ucse train`` names it. Tokens other than task/backbone/seeds/variants/out/eval are train-config overrides
(``eval=true`` also evaluates every finished run and writes ``calibration.md``). Runs go to
``<out>/<task>/<variant>/seed<k>/`` and are skipped when their ``metrics.json`` exists, so an interrupted
sweep resumes (a finished run of other data there is refused, not skipped). Every run of a task reuses one
hidden-state cache entry: one backbone pass per task. After every run ``<out>/ablation.json`` and
``<out>/ablation.md`` are rewritten.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import fields
from pathlib import Path

from ucse.config import RENAMED_KEYS, ConfigError, TrainConfig, build_config, did_you_mean
from ucse.config.heap import keep_freed_heap
from ucse.config.run_layout import RunFolder
from ucse.config.uncertainty import check_uncertainty_config
from ucse.training.variants import EXTRAS, TABLE7, Variant, variant_overrides

log = logging.getLogger("ucse.cli.sweep")
SWEEP_KEYS = ("task", "backbone", "seeds", "variants", "out", "eval")


def run_sweep(
    tasks: list[str | None],
    backbone: str,
    seeds: int,
    variants: list[str],
    out: Path,
    overrides: list[str],
    evaluate: bool = False,
) -> dict:
    """Train every (task, variant, seed) not yet done and return the ablation summary.

    With ``evaluate``, every finished run without an ``eval.json`` is also evaluated (metrics, calibration,
    accuracy-rejection; no plots or timing) and ``calibration.md`` is written beside ``ablation.md``.
    """
    if seeds < 1:
        raise ConfigError(f"seeds={seeds}: a sweep needs seeds >= 1 (seeds=3 trains seeds 0, 1, 2).")
    for v in variants:
        variant_overrides(v)  # fail on a bad name before any training starts
    names = {}  # task= value (None: the user's own data.path) -> the task's name, its runs' folder
    for task in tasks:  # likewise for bad tasks / overrides
        cfg = build_config([*_task_args(task), f"backbone={backbone}", *overrides])
        names[task] = cfg.task.name  # own data: named after the file, as ucse train names it
        check_uncertainty_config(cfg.uncertainty)
        if cfg.data.test_fraction == 0:  # the table is of test accuracy (a KeyError traceback after the run)
            raise ConfigError(
                "data.test_fraction=0: a sweep tabulates test accuracy, so its runs need a test split; "
                "leave data.test_fraction at its default (or > 0)."
            )
        for v in variants:  # the finished runs it would skip: of this data, or refused before any training
            for seed in range(seeds):
                run_dir = out / names[task] / v / f"seed{seed}"
                if RunFolder(run_dir).metrics.is_file():
                    _check_same_data(run_dir, cfg)
    # Imported once every argument is checked (torch, Lightning, datasets): a typo answers at once.
    from ucse.evaluation.ablation import write_ablation
    from ucse.pipeline import quiet_lightning

    with quiet_lightning():  # as `ucse train`: no library notes
        _train_grid(tasks, names, backbone, seeds, variants, out, overrides, write_ablation)
    if evaluate:
        _evaluate_runs(out, list(names.values()), variants, seeds)
    return write_ablation(out, variants)


def _train_grid(tasks, names, backbone, seeds, variants, out, overrides, write_ablation) -> None:
    """Train :func:`run_sweep`'s runs not yet done, rewriting the table after each.

    Args:
        tasks: ``task=`` values (``None``: the user's own ``data.path``).
        names: each task's name (its runs' folder under ``out``).
        backbone: the ``backbone=`` group.
        seeds: seeds 0 .. seeds - 1.
        variants: variant names.
        out: the sweep's folder.
        overrides: train overrides for every run.
        write_ablation: the table writer (imported by the caller once the arguments are checked).
    """
    from ucse.pipeline import run_training
    from ucse.training.run_folder import lacks_profile

    for task in tasks:
        for v in variants:
            for seed in range(seeds):
                run_dir = out / names[task] / v / f"seed{seed}"
                if RunFolder(run_dir).metrics.is_file():  # done (checked above to be of this data)
                    if lacks_profile(run_dir):  # stopped between its head and its profile: finish it
                        _fit_missing_profile(run_dir)
                    continue
                cfg = build_config(
                    [
                        *_task_args(task),
                        f"backbone={backbone}",
                        *variant_overrides(v),
                        *overrides,
                        f"seed={seed}",
                        f"output_dir={run_dir}",
                        "progress_bar=false",
                        # A run the sweep started but did not finish (killed) resumes from its checkpoint;
                        # one killed before its first (or a head fitted in memory, which writes none) reruns.
                        *(["ckpt_path=last"] if RunFolder(run_dir).last_checkpoint.is_file() else []),
                    ]
                )
                t0 = time.perf_counter()
                test = run_training(cfg)[0].metrics.get("test") or {}  # with its uncertainty profile
                log.info(
                    "%s %s seed%d: test acc %s (%.1f s)", names[task], v, seed, test.get("accuracy", "none"),
                    time.perf_counter() - t0,
                )  # fmt: skip
                write_ablation(out, variants)


def _fit_missing_profile(run_dir: Path) -> None:
    """Fit the profile of a finished cell that stopped before it; say so, and how to repair it if it fails.

    The refit rereads the run's recorded data: a data file moved since (which the sweep accepts as the same
    task) or a backbone needing its own code cannot be reread, and must not stop the other cells.
    """
    from ucse.uncertainty.refit import refit_run_profile

    log.warning("%s has no uncertainty profile (a stopped run): fitting it now.", run_dir)
    try:
        refit_run_profile(run_dir, [])
    except (ValueError, OSError) as err:
        log.warning(
            "%s: its profile could not be fitted (%s); `ucse calibrate run=%s` fits it once the data it "
            "was trained on can be read there again (see ucse calibrate --help).",
            run_dir,
            str(err).splitlines()[0][:300],
            run_dir,
        )


def _task_args(task: str | None) -> list[str]:
    """``task=<name>``, or nothing for the user's own ``data.path`` (the task is then named after it)."""
    return [] if task is None else [f"task={task}"]


def _check_same_data(run_dir: Path, cfg: TrainConfig) -> None:
    """A finished run is skipped only where it was trained on this task (a resume, not a mix-up).

    Its task (name and hub path) must be this sweep's; a data file at another path (moved, or another
    file of the same name) is said in a warning and the run kept.

    Raises:
        ConfigError: its config.yaml names another task (or cannot be read back).
    """
    from ucse.config import from_yaml

    config = RunFolder(run_dir).config
    try:
        done = from_yaml(config)
    except (ConfigError, OSError, ValueError) as err:
        raise ConfigError(
            f"{config} cannot be read back ({err}); move {run_dir} away or use another out=."
        ) from None
    if (done.task.name, done.task.hf_path) != (cfg.task.name, cfg.task.hf_path):
        raise ConfigError(
            f"{run_dir} holds a finished run of another task ({done.task.name!r}, data.path "
            f"{done.data.path!r}), not of {cfg.task.name!r} (data.path {cfg.data.path!r}); nothing was "
            "trained. Give another out= (or move that folder away)."
        )
    if done.data.path != cfg.data.path:
        log.warning(
            "%s was trained on %s, this sweep reads %s: kept as done (the same task name). If that is other "
            "data, give another out=.",
            run_dir,
            done.data.path,
            cfg.data.path,
        )


def _evaluate_runs(out: Path, tasks: list[str], variants: list[str], seeds: int) -> None:
    from ucse.evaluation.config import build_eval_config
    from ucse.evaluation.evaluate import evaluate_run

    for task in tasks:
        for v in variants:
            for seed in range(seeds):
                run_dir = out / task / v / f"seed{seed}"
                run = RunFolder(run_dir)
                if run.eval_report("test").is_file() or not run.head.is_dir():
                    continue  # done, or not trained: skipped (head=logreg runs have a head too)
                evaluate_run(build_eval_config([f"run={run_dir}", "plots=false", "efficiency=false"]))


SET_BY_SWEEP = frozenset({"seed", "output_dir", "task", "backbone"})
"""Train fields the sweep sets itself (its task/backbone options, each run's seed and folder)."""
TRAIN_FIELDS = frozenset(f.name for f in fields(TrainConfig)) - SET_BY_SWEEP
"""Top-level train fields a sweep passes through (``devices=2``, ``strategy=ddp``, ``recipe=paper``...); the
sweep sets the seed, the run folders, the task and the backbone itself."""


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    """Split ``key=value`` tokens into sweep options and train-config overrides."""
    opts: dict = {
        "task": None,  # Banking77Classification, or the user's own data.path when one is given
        "backbone": "minilm-l6",
        "seeds": "3",
        "variants": "all",
        "eval": "false",
    }
    rest = []
    for tok in argv:
        if "=" not in tok:
            raise ConfigError(f"Argument '{tok}' is not key=value; sweep keys: {', '.join(SWEEP_KEYS)}.")
        key, value = tok.split("=", 1)
        if key in SWEEP_KEYS:
            opts[key] = value
        elif "." not in key and key not in TRAIN_FIELDS and RENAMED_KEYS.get(key) not in TRAIN_FIELDS:
            raise ConfigError(
                f"Unknown sweep option '{key}'. Sweep options: {', '.join(SWEEP_KEYS)}; anything else must "
                f"be a train override like optim.epochs=3.{did_you_mean(key, SWEEP_KEYS)}"
            )
        else:
            rest.append(tok)
    return opts, rest


def help_text() -> str:
    """``ucse sweep --help``: the usage, then the train overrides a sweep passes on (not those it sets)."""
    from ucse.cli.help import format_fields

    # task= and backbone= are the sweep's own options; task.* and backbone.* fields are overrides as usual
    fields = format_fields(
        TrainConfig, "Train overrides (key=value)", leave_out=frozenset({"seed", "output_dir"})
    )
    return f"ucse sweep: {__doc__.strip()}\n\n{fields}"


def main(argv: list[str]) -> int:
    """Command-line entry point: input errors (options, seeds, any run's config) end in one line, exit 2."""
    from ucse.cli import run_cli
    from ucse.cli.help import show, wants_help

    if wants_help(argv):  # here, not only in ucse's dispatcher: python -m ucse.cli.sweep --help too
        return show(help_text())

    def body() -> int:
        opts, overrides = parse(argv)
        variants = (
            [v.value for v in TABLE7 + EXTRAS] if opts["variants"] == "all" else opts["variants"].split(",")
        )
        for v in variants:
            variant_overrides(v)
        try:
            seeds = int(opts["seeds"])
        except ValueError:
            raise ConfigError(f"seeds={opts['seeds']!r} is not an integer; use e.g. seeds=3.") from None
        out = Path(opts.get("out") or Path("runs") / "sweeps" / opts["backbone"])
        flag = opts["eval"].lower()
        if flag not in ("1", "true", "yes", "0", "false", "no"):  # eval=ture was silently false
            raise ConfigError(f"eval={opts['eval']!r}: give eval=true or eval=false.")
        evaluate = flag in ("1", "true", "yes")
        keep_freed_heap()  # this process is the command's (ucse/config/heap.py)
        own_data = any(tok.startswith("data.path=") for tok in overrides)
        tasks = opts["task"].split(",") if opts["task"] else [None if own_data else "Banking77Classification"]
        summary = run_sweep(tasks, opts["backbone"], seeds, variants, out, overrides, evaluate)
        if not summary["tasks"]:  # exit 1 with an empty table and no word before
            raise ValueError(f"the sweep's runs in {out} hold no test accuracy: nothing to tabulate.")
        print((out / "ablation.md").read_text())
        log.info("variants: %s; summary in %s", ", ".join(Variant(v).value for v in variants), out)
        return 0

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
