"""``ucse predict``: label texts with a trained run, with calibrated confidence, uncertainty and abstention.

Usage:
    ucse predict run=runs/reviews input=new.txt out=predictions.jsonl
    ucse predict run=runs/reviews/head input=new.csv text_column=body out=predictions.csv top_k=3
    cat new.txt | ucse predict run=runs/reviews input=-          # JSON lines on stdout

Each output row (one per input text, in input order): ``text``, ``label`` (the label name), ``confidence``
(calibrated probability of ``label``; the softmax probability when the head has no calibration),
``uncertainty`` (the head's default uncertainty score, higher = less sure; its name is in
``head/calibration.json``), ``abstain`` (true when ``uncertainty`` is above the threshold saved with the head;
false when none is set), ``ood`` (true when the text looks like none of the labels: ``ood_score`` is above
the out-of-scope threshold saved with the head; null for a head without one), ``ood_score`` (higher = more
likely out of scope), ``probs`` (label name -> probability, most probable first) and ``set`` (the
conformal prediction set, label names) when the head has one.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from ucse.cli import run_cli
from ucse.cli.help import format_fields, show, wants_help
from ucse.inference.config import ROW_FIELDS, PredictConfig, build_predict_config

MANY_LABELS = 20
"""Above this many labels, a predict without ``top_k=`` says that each row lists every label's probability
(a trial's 250-label catalog wrote 17 KB a row and found ``top_k=`` only later)."""

log = logging.getLogger("ucse.predict")


def help_text() -> str:
    """``ucse predict --help``: usage and every field of ``PredictConfig``."""
    return f"{__doc__.strip()}\n\n{format_fields(PredictConfig)}"


def one_text_per_line(source: str) -> bool:
    """Whether the input is a ``.txt`` file or stdin: one text per line, no columns."""
    from ucse.data.texts import STDIO

    return source == STDIO or Path(source).suffix.lower() in (".txt", "")


def trained_text_column(run: Path | None, source: str) -> str:
    """The text column the run was trained on (from ``<run>/config.yaml``), else ``text``.

    Read only for a table input: a ``.txt`` file or stdin has no columns, and needs no config.
    """
    from ucse.config.run_layout import RunFolder

    if run is None or one_text_per_line(source):
        return "text"
    from ucse.config import from_yaml

    return from_yaml(RunFolder(run).config).data.text_column


def check_out_is_not_read(out: str, source: str, run: Path) -> None:
    """Refuse an ``out=`` that is the input file or lies in the run (or head) folder, even with overwrite.

    ``overwrite=true`` says the user may replace an earlier output, not the texts being read (their other
    columns went with them) or a file of the run (``label_review.csv``...), which ``ucse export`` refuses too.
    """
    from ucse.config import ConfigError
    from ucse.data.texts import STDIO

    if out == STDIO:
        return
    target = Path(out).expanduser().resolve()
    if source != STDIO and target == Path(source).expanduser().resolve():
        raise ConfigError(
            f"out={out} is the input file; predicting into it would replace the texts (and their other "
            "columns). Nothing was written; choose another out=."
        )
    if target.is_relative_to(run.resolve()):
        raise ConfigError(
            f"out={out} is inside the run folder {run}; predictions would replace or mix with the run's own "
            "files. Nothing was written; choose a path outside it."
        )


def check_run_and_files(cfg: Any, id_note: str = "") -> tuple[Path, Path | None]:
    """(the head folder, its run folder or ``None``) of a ``predict``-like command, its files checked first.

    ``cfg`` has ``run``, ``input``, ``out``, ``overwrite``, ``text_column`` and ``id_column`` (``ucse
    predict``, ``ucse suggest``). The output must be new (or ``overwrite``), neither the input nor inside the
    run; a ``.txt`` or stdin input has no columns to name.
    """
    from ucse.config import ConfigError
    from ucse.config.run_layout import resolve_head_dir, run_of_head
    from ucse.inference.files import check_output

    head_dir = resolve_head_dir(cfg.run)
    run = run_of_head(head_dir)  # None: a head outside a run
    check_output(cfg.out, cfg.overwrite)
    check_out_is_not_read(cfg.out, cfg.input, run or head_dir)
    for key, value, leave in (("text_column", cfg.text_column, ""), ("id_column", cfg.id_column, id_note)):
        if value and one_text_per_line(cfg.input):
            # a .txt file or stdin has no columns: the option was ignored without a word
            raise ConfigError(
                f"{key}={value}: input={cfg.input} is one text per line, with no columns; leave {key} "
                f"out{leave}, or give a table (.csv, .tsv, .jsonl, .json, .parquet, .xlsx)."
            )
    return head_dir, run


def loaded_classifier(head_dir: Path, cfg: Any, **extra: Any) -> Any:
    """The run's ``UcseClassifier`` on ``cfg``'s device and batch size (its warnings left to the caller)."""
    from ucse.inference.classifier import UcseClassifier

    return UcseClassifier.from_pretrained(
        head_dir,
        device=cfg.accelerator,
        batch_size=cfg.batch_size,
        trust_remote_code=cfg.trust_remote_code,
        precision=getattr(getattr(cfg, "precision", None), "value", None),  # predict's own option
        warn=False,  # each command says it once, in its own summary line
        **extra,
    )


def main(argv: list[str]) -> int:
    """Validate every argument and file, load the run once, predict, write the rows."""
    if wants_help(argv):
        return show(help_text())

    done = {"out": None, "rows": 0, "texts": 0}  # what was written: the summary, and a stop (said by run_cli)

    def body() -> int:
        cfg = build_predict_config(argv)
        done["out"] = cfg.out
        # Imported once the arguments are checked (datasets and pandas to read the input; torch and
        # transformers once the run folder, the output and the input are checked): a mistake answers at once.
        from ucse.config import ConfigError
        from ucse.inference.files import read_texts_and_ids, write_predictions

        head_dir, run = check_run_and_files(cfg, " (rows keep the input's order)")
        if cfg.id_column in ROW_FIELDS:
            raise ConfigError(
                f"id_column={cfg.id_column} is the name of a field of the prediction rows "
                f"({', '.join(ROW_FIELDS)}); copy another column, or rename it in the input."
            )
        column = cfg.text_column or trained_text_column(run, cfg.input)
        texts, ids = read_texts_and_ids(
            cfg.input, column, cfg.id_column, sole_column=cfg.text_column is None, drop_bad=cfg.drop_bad_rows
        )
        from ucse.inference.blocks import predict_blocks
        from ucse.uncertainty.abstain_rule import uncertifiable_message
        from ucse.uncertainty.inert_parts import inert_messages, unfitted_message

        clf = loaded_classifier(head_dir, cfg, compile_head=cfg.compile_head)
        done.update(rows=0, abstain=0, ood=0, texts=len(texts))  # the summary's counts, and a stop's

        def counted(blocks):  # written block by block: memory stays flat on a long input
            for rows in blocks:
                if ids is not None:  # the id first, under its column's name
                    start = done["rows"]
                    rows = [{cfg.id_column: ids[start + i], **r} for i, r in enumerate(rows)]
                done["abstain"] += sum(r["abstain"] for r in rows)
                done["ood"] += sum(bool(r["ood"]) for r in rows)
                yield rows
                done["rows"] += len(rows)  # written (stdout: printed) once the writer asks for the next

        progress = cfg.progress and sys.stderr.isatty()
        blocks = predict_blocks(clf, texts, top_k=cfg.top_k, sets=cfg.sets, progress=progress)
        write_predictions(counted(blocks), cfg.out, cfg.overwrite)
        message = uncertifiable_message(clf.profile_, run) or unfitted_message(clf.profile_, head_dir)
        prior = clf.profile_.calibrator.prior.value
        where = "stdout" if cfg.out == "-" else cfg.out  # on stderr either way: a piped job's log keeps it
        share = lambda k: f" ({100 * done[k] / done['rows']:.1f} %)" if done["rows"] else ""  # noqa: E731
        print(
            f"{done['rows']} predictions -> {where} (uncertainty score: {clf.uncertainty_score_}; "
            f"abstain on {done['abstain']}{share('abstain')}; out of scope: {done['ood']}{share('ood')}"
            f"{'' if prior == 'train' else f'; class prior: {prior}'})",
            file=sys.stderr,
        )
        backbone = clf.encoder_.backbone
        if backbone.texts_cut:  # the warning named the first block that held any: the total, for a log
            windows = backbone.cfg.long_texts.value == "windows"
            print(
                f"{backbone.texts_cut} of {done['rows']} texts reached the backbone's token limit and were "
                "read up to it"
                + (
                    " (backbone.max_windows windows)"
                    if windows
                    else " (backbone.long_texts=windows at training reads long texts whole)"
                ),
                file=sys.stderr,
            )
        if backbone.texts_unknown:
            print(
                f"{backbone.texts_unknown} of {done['rows']} texts are mostly tokens the backbone does not "
                "know (emoji, or a script outside its vocabulary): their answers say little",
                file=sys.stderr,
            )
        for said in [*([] if message is None else [message]), *inert_messages(clf.profile_)]:
            print(said, file=sys.stderr)
        labels = len(clf.classes_)
        if cfg.top_k is None and labels > MANY_LABELS and done["rows"]:
            print(
                f"each row's probs lists all {labels} labels; top_k=5 keeps the five likeliest",
                file=sys.stderr,
            )
        return 0

    def left() -> str:
        if done["out"] != "-":
            return "No output file was left half-written."
        return (
            f"stdout holds what was written before the stop: the first {done['rows']} of "
            f"{done['texts'] or 'the'} rows, or a few more (they go out in blocks of 8,192 texts)."
        )

    return run_cli(body, interrupted=left)
