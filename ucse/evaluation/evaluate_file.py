"""``ucse eval run=<run> input=<labelled file>``: the run scored on new labelled data, not on its own split.

What a practitioner asks of a model once it is trained: how does it do on this month's labelled sample,
label by label, and do its probabilities, abstention, sets and out-of-scope flag still hold there? The rows
are read as ``ucse train`` reads its own and checked against the run's labels before the backbone loads;
the run's training data is not needed (a run trained on rows in memory can be evaluated too).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ucse import atomic, json_read
from ucse.config.run_layout import RunFolder
from ucse.core.run_folder import run_labelled_texts
from ucse.data.duplicates import text_key
from ucse.evaluation.config import EvalConfig
from ucse.evaluation.evaluate import efficiency_report, judge_outputs, load_run, terminal_view
from ucse.heads.meta import label_values

if TYPE_CHECKING:
    from ucse.uncertainty.profile import UncertaintyOutput

log = logging.getLogger(__name__)


NAME_CHARS = 100
"""The longest file name kept whole in a report's name (the rest: a hash of the whole name)."""


def input_report_path(run: Path, source: str) -> Path:
    """``<run>/eval-input-<file name>.json``, anything but ``[A-Za-z0-9._-]`` in the name as ``_``.

    A name longer than :data:`NAME_CHARS` is cut and ends in a hash of the whole name (file systems refuse
    names over 255 bytes, and found out only once the backbone had run).
    """
    raw = Path(source).name
    name = re.sub(r"[^A-Za-z0-9._-]", "_", raw) or "file"
    if len(name) > NAME_CHARS:
        name = f"{name[:NAME_CHARS]}-{hashlib.sha256(raw.encode()).hexdigest()[:12]}"
    return run / f"eval-input-{name}.json"


def report_path(cfg: EvalConfig, run: Path) -> Path:
    """Where ``input=``'s report goes: ``out=`` (a ``.json`` file), else :func:`input_report_path` in the run.

    Checked before the backbone loads: a report that could not be written was found out once the whole file
    had been scored (a read-only run folder lost the evaluation).

    Raises:
        ValueError: naming the path and the fix.
    """
    if cfg.out is None:
        written = input_report_path(run, cfg.input or "")
        if not os.access(run, os.W_OK):
            raise ValueError(
                f"run={run} cannot be written (read-only), where input='s report would go; pass "
                "out=<report.json> to write it elsewhere."
            )
        return written
    written = Path(cfg.out).expanduser()
    if written.suffix.lower() != ".json":
        raise ValueError(f"out={cfg.out}: input='s report is JSON; give a .json file.")
    if not written.parent.is_dir():
        raise ValueError(f"out={cfg.out}: folder {written.parent} does not exist; create it first.")
    if written.exists() and not cfg.overwrite:
        raise ValueError(f"out={cfg.out} already exists; nothing was written. overwrite=true replaces it.")
    return written


def check_report_is_of(report: Path, source: Path) -> None:
    """Refuse to replace a report of another file that shares its name.

    ``a b.csv`` and ``a_b.csv``, or ``names.csv`` in two folders, name one report. The report is read as
    untrusted: an unreadable one is replaced.

    Raises:
        ValueError: naming both files and the fix.
    """
    if not report.is_file():
        return
    try:
        other = json_read.loads(report.read_text(encoding="utf-8")).get("input")
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(other, str) and other != str(source):
        raise ValueError(
            f"{report} holds the report of another file ({other}); evaluating {source} would replace it. "
            "Copy or rename the file you evaluate, or move that report away."
        )


def copies_of_run_rows(run: Path, texts: list[str], cfg: EvalConfig) -> np.ndarray | None:
    """(N,) which of ``texts`` are copies of the run's own rows (up to case and punctuation), warned.

    A labelled sample that shares texts with the data the run trained (or was tested) on scores them
    optimistically; in a labelling loop it happens by itself (a trial's test file held "bin!!", and a later
    round labelled the pool's "bin" into training), and a weekly sample of comments repeats "lol" and spam.
    The report scores the other texts apart (``new_texts``). ``None`` where the run's data cannot be read.
    """
    known, why = run_labelled_texts(run, cfg.data_path, cfg.data_root)
    if known is None:
        if why:
            log.info("not checked for copies of the run's own rows: %s", why)
        return None
    keys = {text_key(t) for t in known}
    copies = np.fromiter((text_key(t) in keys for t in texts), dtype=bool, count=len(texts))  # (N,)
    seen = int(copies.sum())
    if seen:
        log.warning(
            "%d of %d texts of %s are copies of rows of the run's own data (the same words up to case and "
            "punctuation): the run trained (or was tested) on them, so the figures below are optimistic%s.",
            seen,
            len(texts),
            cfg.input,
            "; the line 'on the texts new to the run' scores the others" if seen < len(texts) else "",
        )
    return copies


MAX_ERRORS = 1000
"""The most wrong answers a report lists (the surest first); ``errors_total`` counts them all."""


def wrong_answers(res: UncertaintyOutput, texts: list[str], labels: np.ndarray, names: list) -> dict:
    """The texts answered wrong, the surest answer first: ``{"errors": [...], "errors_total": n}``.

    What a labelling team reads next: a sure wrong answer is often a wrong label in the file, an unsure one
    a hard text (a trial had to run ``predict`` with the gold label as an id column to find them). Each row:
    ``row`` (1-based among the rows read), ``text``, ``label``, ``answer``, ``confidence``, ``abstain`` and
    ``ood`` (``None`` without a flag), as ``predict`` answers.
    """
    wrong = np.flatnonzero(np.asarray(res.prediction) != labels)  # (E,)
    order = wrong[np.argsort(-res.confidence[wrong], kind="stable")][:MAX_ERRORS]
    rows = [
        {
            "row": int(i) + 1,
            "text": texts[i],
            "label": names[int(labels[i])],
            "answer": names[int(res.prediction[i])],
            "confidence": round(float(res.confidence[i]), 4),
            "abstain": bool(res.abstain[i]),
            "ood": None if res.ood is None else bool(res.ood[i]),
        }
        for i in order.tolist()
    ]
    return {"errors": rows, "errors_total": int(len(wrong))}


def evaluate_file(cfg: EvalConfig) -> dict:
    """Evaluate the run ``cfg.run`` on the labelled file ``cfg.input`` and write its report.

    Returns:
        The report as written (``input``, ``n``, ``dropped``, ``metrics``, the uncertainty sections,
        ``per_label`` and ``confusion``), without the ``uncertainty`` curves, plus ``arc_area`` and
        ``written`` (the report's path).
    """
    from ucse.data.labelled_file import read_labelled_file
    from ucse.heads.saved_config import read_config

    run, train_cfg = load_run(cfg.run or "", cfg.data_root, cfg.data_path)
    folder = RunFolder(run)
    meta = read_config(folder.head / "config.json")[0]["meta"]  # checked: names unique, label_type known
    names = list(meta.get("label_names") or [])
    if not names:
        raise ValueError(
            f"The head in {folder.head} saved no label names, which input= needs to read the file's labels; "
            "retrain it with ucse train (its heads save them)."
        )
    source = Path(cfg.input or "").expanduser().resolve()
    written = report_path(cfg, run)
    if cfg.out is None:  # out= and overwrite= are the user's own word on that file
        check_report_is_of(written, source)
    texts, labels, dropped = read_labelled_file(
        cfg.input or "",
        cfg.text_column or train_cfg.data.text_column,
        cfg.label_column or train_cfg.data.label_column,
        names,
        meta.get("label_type") == "int",
        cfg.drop_bad_rows,
        train_cfg.data.min_label_rows,
    )
    copies = copies_of_run_rows(run, texts, cfg)
    # only now torch, the backbone and the profile: every check above answers without them
    from ucse.core.encoder import UcseEncoder
    from ucse.training.run import resolve_device
    from ucse.uncertainty.class_prior import decision_scores
    from ucse.uncertainty.inert_parts import warn_if_unfitted
    from ucse.uncertainty.profile import load_uncertainty_profile

    device = resolve_device(cfg.accelerator)
    encoder = UcseEncoder.from_dir(folder.head, device=device, trust_remote_code=cfg.trust_remote_code)
    profile = load_uncertainty_profile(folder.head, num_classes=len(names), device=device)
    warn_if_unfitted(profile, folder.head)
    out = encoder.run_texts(texts, batch_size=cfg.batch_size)
    report: dict = {
        "run": str(run),
        "task": train_cfg.task.name,
        "input": str(source),
        "split": repr(source.name)[1:-1],  # how the lines name it: control characters escaped
        "n": len(labels),
        "dropped": dropped,
        "copies_of_run_rows": None if copies is None else int(copies.sum()),
    }
    # applied once: the report's sections and the list of wrong answers read the same decisions
    decided = profile.apply(out.mean, out.var, out.logits, sets=True, pooled=out.pooled)
    values = label_values(meta)
    report |= judge_outputs(out, labels, values, profile, cfg.sigma_thresholds, None, decided)[0]
    report |= wrong_answers(decided, texts, np.asarray(labels), values)
    if copies is not None and 0 < copies.sum() < len(copies):  # what predict answers on the texts new to it
        new = ~copies
        got = decision_scores(np.asarray(labels)[new], decided.prediction[new])
        report["new_texts"] = {"n": int(new.sum()), **got}
    report["profile_source"] = "saved" if profile.fitted else "plain softmax (no saved profile)"
    if cfg.efficiency:
        report["efficiency"] = efficiency_report(encoder, texts, cfg.efficiency_batches, cfg.batch_size)
    replaced = None
    if written.is_file():  # the same file's report, from an earlier call: said, not replaced silently
        stamp = datetime.fromtimestamp(written.stat().st_mtime)
        replaced = stamp.strftime("%Y-%m-%d %H:%M:%S")
    atomic.write_json(written, report)
    return terminal_view(report) | {"written": str(written), "replaced": replaced}
