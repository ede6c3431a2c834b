"""``ucse review``: every labelled row of a finished run, ranked by how much cross-fitted probes doubt it.

``ucse train`` reviews the rows its profile is calibrated on (``label_review.csv``): every labelled row when
``head=auto`` cross-validated a small set, but only the validation split (10 %) of a large one. This reviews
them all, at the cost of K probe fits: the run's frozen pooled vectors of train + validation (from its cached
token states), K stratified folds (a text's copies in one), scikit-learn's ``LogisticRegression`` at the
run's C (chosen by cross-validation when the run fitted no probe) scoring each fold from the other K - 1
(``cross_val_predict``), the out-of-fold log-probabilities calibrated by one temperature, then ranked and
written as ``label_review.csv`` is (``ucse.uncertainty.label_review``). The probe's ranking is the baseline
``bench/label_review.py`` found level with the run's own held-out models on the many-label tasks (AUROC of the
flipped rows 0.96-1.00). The class prior is the training rows' (a run's ``prior=balanced`` or ``target`` is
not applied here).
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_predict

from ucse.config import ConfigError, from_yaml
from ucse.config.run_layout import RunFolder, read_run_metrics
from ucse.core.encoder import UcseEncoder
from ucse.core.run_folder import check_same_splits, finished_run, relocate_data, run_data
from ucse.data import TaskData
from ucse.data.duplicates import text_groups
from ucse.losses.temperature import fit_temperature
from ucse.training.logreg import SOLVER, cv_splits, fit_probe, probe_features
from ucse.training.run import build_states, resolve_device
from ucse.uncertainty.label_review import write_label_review

log = logging.getLogger(__name__)

ALL_ROWS = "label_review_all.csv"
"""The default file name, beside the run's own ``label_review.csv``."""
LOG_FLOOR = -1e4
"""Out-of-fold log-probabilities are floored here: scikit-learn fills a label a fold never saw with the float
minimum, whose division by a temperature overflows."""


def run_probe_c(metrics: dict) -> float | None:
    """The C of the probe a run fitted (``metrics.json``: ``selection.probe.C`` or ``probe.C``), if any.

    The file is read back from disk: a value that is not a finite positive number counts as none.
    """
    for holder in (metrics.get("selection"), metrics):
        probe = holder.get("probe") if isinstance(holder, dict) else None
        c = probe.get("C") if isinstance(probe, dict) else None
        if isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c > 0:
            return float(c)
    return None


def review_run(
    run_dir: str | Path,
    out: str | Path | None = None,
    folds: int = 5,
    data_root: str | None = None,
    trust_remote_code: bool = False,
    data: TaskData | None = None,
    data_path: str | None = None,
    overwrite: bool = False,
    include_test: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Write the cross-fitted review of every labelled row outside test; return its path and what it holds.

    Args:
        run_dir: a run folder written by ``ucse train``.
        out: the file to write (default ``<run>/label_review_all.csv``); an existing file is refused.
        folds: at most this many stratified folds (fewer when a label has fewer rows; at least 2).
        data_root: local data folder, when it moved since training.
        trust_remote_code: let the backbone's model code run (the caller's choice).
        data: the run's data, when the caller holds it (a run trained on rows in memory); else read again.
        data_path: the run's ``data.path`` file (or folder), when it moved since training.
        overwrite: replace an existing ``out`` file (else it is refused).
        include_test: review the test rows too. A test label wrong is as likely as any (a trial planted four
            and two landed in the carved test slice, out of every review); but test labels corrected where
            this probe doubts them make the test figures optimistic, so they are left out by default.

    Returns:
        (the file, ``write_label_review``'s counts with the probe's ``C``, ``folds`` and ``temperature``).
    """
    if folds < 2:
        raise ConfigError(f"folds={folds}: give an integer >= 2 (each fold is scored by the others' probe).")
    run = finished_run(run_dir)
    folder = RunFolder(run)
    target = Path(out) if out is not None else run / ALL_ROWS
    if target.exists() and not overwrite:
        raise ConfigError(
            f"{target} already exists; nothing was written. Pass overwrite=true to replace it, or out=<a new "
            "file>."
        )
    cfg = from_yaml(folder.config)
    if data is None:
        fix = "review from Python with ucse.uncertainty.review_run.review_run(run, data=...)"
        data = run_data(run, cfg, data_root, data_path, "review", fix)
    else:
        relocate_data(cfg, data_root, data_path)
    splits = ("train", "validation", "test") if include_test else ("train", "validation")
    check_same_splits(run, data, splits, refuse=True)
    # the run's own backbone, as every command loads it (its weights' fingerprint checked; the model code
    # only on the caller's word)
    encoder = UcseEncoder.from_dir(
        folder.head, device=resolve_device(cfg.accelerator), trust_remote_code=trust_remote_code
    )
    states, _ = build_states(cfg, encoder.backbone, data)  # the run's cache entry: no pass when it is there
    x = np.concatenate([probe_features(states[s], cfg.backbone.pooling) for s in splits])
    y = np.concatenate([data.labels(s) for s in splits])
    texts = [t for s in splits for t in data.texts(s)]
    # copies of a text in one fold, as the run's own folds keep them (a copy scored beside its twin vouches
    # for its label: copies with the same wrong label ranked as sure)
    groups = text_groups(texts) if cfg.data.group_copies else None
    without = "the probe's C is chosen by cross-validation instead"
    c_value = run_probe_c(read_run_metrics(folder.path, without))
    if c_value is None:  # a run without a probe (recipe=paper): C by cross-validation, as head=logreg does
        _, info = fit_probe(
            x, y, data.num_classes, cfg.head.logreg_folds, cfg.seed, cfg.head.logreg_max_iter, groups=groups
        )
        c_value = info["C"]
    probs, t, k = cross_fitted_probs(x, y, c_value, folds, cfg.seed, cfg.head.logreg_max_iter, groups)
    cut = encoder.backbone.cut(texts)
    info = write_label_review(target, texts, y, probs, list(data.label_names), cut, replace=overwrite)
    return target, {**info, "C": c_value, "folds": k, "temperature": t}


def cross_fitted_probs(
    x: np.ndarray,
    y: np.ndarray,
    c_value: float,
    folds: int,
    seed: int,
    max_iter: int,
    groups: np.ndarray | None = None,
) -> tuple[np.ndarray, float, int]:
    """(N, C) out-of-fold probabilities of a logistic regression at ``c_value``, temperature-calibrated.

    Args:
        x: (N, H) unit vectors.
        y: (N,) label ids 0..C-1, every id present.
        c_value: the regression's C.
        folds: at most this many stratified folds (each row scored by the regression fitted on the others;
            fewer when a label has fewer rows, at least 2).
        seed: the folds' shuffle seed.
        max_iter: the solver's iterations.
        groups: (N,) ids of copies of one text, kept in one fold (:func:`ucse.training.logreg.cv_splits`,
            which keeps the plain folds where some label has a single distinct text); ``None``: plain folds.

    Returns:
        (the probabilities, the temperature, the number of folds). A label whose rows all fall in one fold (a
        label with one row) is missing from the other folds' regressions: its rows get probability 0 for it
        (nothing else vouches for them; they rank first) and take no part in the temperature's fit.
    """
    probe = LogisticRegression(C=c_value, solver=SOLVER, max_iter=max_iter)
    # (N, C) out of fold; a label a fold's regression never saw gets the float minimum in that fold's rows
    with warnings.catch_warnings():  # said in the docstring; the summary counts such rows among the doubted
        warnings.filterwarnings("ignore", message="Number of classes in training fold")
        cv = cv_splits(y, folds, seed, groups)  # without copies: StratifiedKFold's
        logp = cross_val_predict(probe, x, y, cv=cv, method="predict_log_proba")
    logp = np.maximum(logp, LOG_FLOOR)  # exp(-1e4 / T) is 0 for any T the fit can reach
    seen = logp[np.arange(len(y)), y] > LOG_FLOOR
    t = fit_temperature(logp[seen], y[seen]) if seen.any() else 1.0
    return softmax(logp / t, axis=1), t, len(cv)
