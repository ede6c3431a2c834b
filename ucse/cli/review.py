"""``ucse review``: every labelled row of a trained run, the likeliest mislabelled first.

Usage:
    ucse review run=runs/tickets                       # writes runs/tickets/label_review_all.csv
    ucse review run=runs/tickets out=check.csv folds=10

``ucse train`` already writes ``label_review.csv`` for the rows its profile was calibrated on: all of them on
a small set, only the validation split (10 %) on a large one. This ranks every row outside test: a logistic
regression on the run's frozen pooled embeddings (its cached states: no backbone pass when the cache is
there), at the run's C, scores each of ``folds`` stratified folds from the others; the out-of-fold
probabilities, calibrated by one temperature, are ranked as in ``label_review.csv`` (columns rank, text,
label, p_label, suggested, p_suggested; most doubtful first). Cost: ``folds`` probe fits (Banking77's
10,003 rows: ~11 s of fits, ~18 s in all, on 2 cores). An existing file is replaced only with
``overwrite=true``. Besides ``run=``, ``out=`` and ``folds=`` (default 5): ``include_test=true`` (the test
rows too: a wrong test label is as likely as any, but test labels corrected where the probe doubts them make
the test figures optimistic), ``data_root=`` (the task data moved since training), ``data_path=`` (the
training file moved or was renamed), ``trust_remote_code=true`` (the backbone's own model code; only from
you).
"""

from __future__ import annotations

from ucse.cli import run_cli
from ucse.cli.help import show, wants_help
from ucse.config import ConfigError, did_you_mean

KEYS = ("run", "out", "folds", "data_root", "data_path", "trust_remote_code", "overwrite", "include_test")
FLAGS = ("trust_remote_code", "overwrite", "include_test")
"""The keys that take true or false."""


def main(argv: list[str]) -> int:
    """Parse ``key=value`` tokens, write the review, print where and how many rows it doubts."""
    if wants_help(argv):
        return show(__doc__.strip())

    def body() -> int:
        opts: dict[str, str] = {}
        for tok in argv:
            key, eq, value = tok.partition("=")
            if key not in KEYS or not eq or not value:
                hint = did_you_mean(key, list(KEYS)) if key not in KEYS else ""
                raise ConfigError(f"review takes {', '.join(k + '=' for k in KEYS)}; got '{tok}'.{hint}")
            opts[key] = value
        if "run" not in opts:
            raise ConfigError("review needs run=<run folder> (written by ucse train).")
        try:
            folds = int(opts.get("folds", "5"))
        except ValueError:
            raise ConfigError(f"folds={opts['folds']}: give an integer >= 2.") from None
        if "out" in opts and not opts["out"].lower().endswith(".csv"):  # a .jsonl name got CSV text
            raise ConfigError(f"out={opts['out']}: review writes a CSV table; give a path ending in .csv.")
        flags = {}
        for key in FLAGS:
            flags[key] = opts.get(key, "false").lower()
            if flags[key] not in ("true", "false"):
                raise ConfigError(f"{key}={opts[key]}: give true or false.")
        from ucse.pipeline import quiet_lightning
        from ucse.summary import review_note
        from ucse.uncertainty.review_run import review_run

        with quiet_lightning():
            path, info = review_run(
                opts["run"],
                opts.get("out"),
                folds,
                opts.get("data_root"),
                flags["trust_remote_code"] == "true",
                data_path=opts.get("data_path"),
                overwrite=flags["overwrite"] == "true",
                include_test=flags["include_test"] == "true",
            )
        print(f"{path}: {review_note(info)}")
        probe = f"C={info['C']:g}, {info['folds']} folds, temperature {info['temperature']:.3f}"
        print(f"(scored by a logistic regression on the frozen embeddings: {probe})")
        if info["folds"] < folds:  # said, not silently fewer
            print(
                f"(folds={folds} asked: {info['folds']} made, as many as the most frequent label's rows "
                "outside test allow (or its distinct texts where copies are kept in one fold); 2 where a "
                "label has a single row)"
            )
        return 0

    return run_cli(body)
