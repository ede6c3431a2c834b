"""``ucse suggest``: the unlabelled texts worth labelling next, for a trained run.

Usage:
    ucse suggest run=runs/tickets input=unlabelled.txt n=50 out=to_label.csv
    ucse suggest run=runs/tickets input=inbox.csv text_column=body id_column=id n=100 out=to_label.csv

The run's model reads every text once; the picks are the texts it is least sure of (the smallest gap between
its two likeliest labels), one per cluster of similar texts, the least sure first. Each row: [the id,] the
text and an empty label under the run's own column names (fill it in, then add the rows to the training file
and train again), ``guess`` (the label the model would answer), ``confidence``, ``margin`` and ``line`` (the
text's position in the input; ``suggest_<field>`` where the run's columns or the id column have that name).
Where nothing is left to pick, no file is written. Rows of a table input that already hold a value in the
run's label column are no candidates (one sheet, some rows labelled), nor are texts of the run's own data
(its ``rows.parquet``, or its training file read again) and its out-of-scope examples (``skip_trained=false``
offers them). ``strategy=random`` picks at random:
the baseline, to measure what the uncertainty buys on your data.
"""

from __future__ import annotations

import logging
import sys

from ucse.cli import run_cli
from ucse.cli.help import format_fields, show, wants_help
from ucse.cli.predict import check_run_and_files, loaded_classifier, trained_text_column
from ucse.inference.config import SuggestConfig, build_suggest_config

log = logging.getLogger("ucse.suggest")


def help_text() -> str:
    """``ucse suggest --help``: usage and every field of ``SuggestConfig``."""
    return f"{__doc__.strip()}\n\n{format_fields(SuggestConfig)}"


def _output_columns(run) -> tuple[str, str]:
    """The run's (text, label) column names, the output's (``text`` / ``label`` without a run folder).

    The run's own names whatever the input is (a ``.txt`` file has none): the filled-in file is meant to be
    added to the training file.
    """
    if run is None:
        return "text", "label"
    from ucse.config import from_yaml
    from ucse.config.run_layout import RunFolder

    data = from_yaml(RunFolder(run).config).data
    return data.text_column, data.label_column


def main(argv: list[str]) -> int:
    """Validate every argument and file, load the run once, pick the texts, write the rows."""
    if wants_help(argv):
        return show(help_text())

    def body() -> int:
        cfg = build_suggest_config(argv)
        from ucse.config import ConfigError
        from ucse.core.run_folder import run_labelled_texts
        from ucse.inference.files import read_texts_and_ids, write_predictions
        from ucse.inference.suggest import field_names, run_ood_examples, suggest_to_label, suggestion_rows

        head_dir, run = check_run_and_files(cfg)
        column = cfg.text_column or trained_text_column(run, cfg.input)  # the one read
        written = _output_columns(run)
        if cfg.id_column in written:
            role = "text" if cfg.id_column == written[0] else "label"
            raise ConfigError(
                f"id_column={cfg.id_column}: the output's {role} "
                f"column is named {cfg.id_column!r} (the run's own name, kept so the rows can go back into "
                f"the training file); pick another id_column."
            )
        fields = field_names((*written, *((cfg.id_column,) if cfg.id_column else ())))
        renamed = [f"{f} -> {n}" for f, n in fields.items() if f != n]
        texts, ids = read_texts_and_ids(cfg.input, column, cfg.id_column, sole_column=cfg.text_column is None)
        from ucse.data.texts import labelled_rows

        labelled = labelled_rows(cfg.input, written[1])  # rows of a table that already carry a label
        known = None
        if cfg.skip_trained and run is not None:
            known, why = run_labelled_texts(run, cfg.data_path)
            known = [*(known or []), *run_ood_examples(run)]
            if why:
                log.warning("texts the run already has labels for are not left out: %s.", why)
        clf = loaded_classifier(head_dir, cfg)
        progress = cfg.progress and sys.stderr.isatty()
        picks = suggest_to_label(
            clf, texts, cfg.n, cfg.strategy, cfg.seed, cfg.include_out_of_scope, progress, labelled, known
        )
        with_ids = None if ids is None else (cfg.id_column, ids)
        if len(picks.positions) or cfg.out == "-":  # no empty file that a later call would have to replace
            rows = suggestion_rows(texts, picks, written, with_ids, fields)
            write_predictions(rows, cfg.out, cfg.overwrite)
        copies = f"{picks.copies} cop{'y' if picks.copies == 1 else 'ies'} of earlier texts"
        left = (
            [f"{picks.labelled} already labelled in {written[1]!r} (or copies of such)"]
            if picks.labelled
            else []
        )
        if picks.known:
            left.append(f"{picks.known} already in the run's own data (skip_trained=false offers them)")
        left += [copies] if picks.copies else []
        if picks.out_of_scope:
            left.append(f"{picks.out_of_scope} flagged out of scope (include_out_of_scope=true keeps them)")
        if not len(picks.positions):  # on stderr, even with out=-: an empty answer is never silent
            kept = "" if cfg.out == "-" else f"; nothing written to {cfg.out}"
            print(
                f"no text to label among the {len(texts)}: left out {', '.join(left)}{kept}.", file=sys.stderr
            )
        elif cfg.out != "-":
            said = f" (fields renamed beside columns of that name: {', '.join(renamed)})" if renamed else ""
            span = f"margins {picks.margin.min():.3f}-{picks.margin.max():.3f}"
            order = "in drawn order" if cfg.strategy.value == "random" else "the least sure first"
            print(
                f"{len(picks.positions)} of {len(texts)} texts to label -> {cfg.out} ({cfg.strategy.value}; "
                f"{span}, {order}{'; left out: ' + ', '.join(left) if left else ''}): fill in "
                f"{written[1]!r}, add the rows to the training file and train again{said}.",
                file=sys.stderr,
            )
        return 0

    return run_cli(body, interrupted="No output file was left half-written.")
