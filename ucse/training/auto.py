"""``head=auto``: fit the Gaussian TextCNN, the tuned logreg probe and their blend; keep the best.

All three are fitted on the cached token states, so choosing costs head fits only, never a backbone pass. The
choice is the blend weight w in {0, 0.25, 0.5, 0.75, 1} (0 = the probe alone, 1 = the TextCNN alone) with the
lowest held-out NLL after a temperature per model, taken back toward the probe by the one-standard-error
rule: the probe is kept unless the better model's NLL gain exceeds one standard error of the paired per-text
difference. Held out means the validation split when it has at least max(200, 5C) texts, else k-fold
cross-validation over train + validation (out-of-fold predictions; the fold probes choose their C inside
the fold for the selection, and are refitted at the shipped probe's C for the temperatures). The shipped
probe keeps the C chosen on the rows it was first fitted on, so its logits have the scale its temperature
was fitted at. The chosen models are then refitted on every train + validation row (with a validation
split, as ``data.refit`` says, on by default; after cross-validation always), and the held-out predictions
of the selection models are kept for calibrating the uncertainty profile.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from ucse.backbone.precision import effective_precision
from ucse.backbone.states import SubsetStates, TokenStates
from ucse.config import HeadConfig, HeadType, Precision, TrainConfig
from ucse.config.uncertainty import OodScore
from ucse.heads import build_head
from ucse.heads.base import Head
from ucse.heads.factory import HeadSpec
from ucse.heads.outputs import Outputs, run_head
from ucse.losses.temperature import fit_temperature
from ucse.training.blend_choice import WEIGHTS, blend_logits, choose_blend
from ucse.training.fit_head import fit_head
from ucse.training.logreg import cv_splits, fit_probe, probe_features, probe_head
from ucse.training.neighbours import MAX_K, joint_features, neighbour_distances
from ucse.training.preflight import cross_validates

log = logging.getLogger(__name__)


def compose(head_cfg: HeadConfig, choice: dict, gaussian: Head | None, probe: Head | None, c: int) -> Head:
    """The head to ship: the probe (w = 0), the TextCNN (w = 1) or their :class:`BlendHead`."""
    w = choice["weight"]
    if w == 0.0:
        return probe
    if w == 1.0:
        return gaussian
    cfg = dataclasses.replace(head_cfg, type=HeadType.blend)
    head = build_head(cfg, gaussian.spec.hidden_size, c, gaussian.spec.pooling)
    head.gaussian.load_state_dict(gaussian.state_dict())
    head.probe.load_state_dict(probe.state_dict())
    head.set_blend(w, choice["t_gaussian"], choice["t_probe"])
    return head


@dataclass
class AutoResult:
    """What :func:`fit_auto` chose and fitted.

    Attributes:
        head: the head to save.
        report: mode, folds, the choice and the candidates' held-out figures (saved in metrics.json).
        heldout: held-out outputs of the shipped head's recipe, for fitting the uncertainty profile: out of
            fold on every train + validation row (cross-validation), or the selection models' outputs on the
            validation rows (holdout with ``data.refit``); ``None`` when the shipped head never saw them.
        heldout_labels: their labels.
        heldout_distances: (N, K) ascending distances of those rows to their nearest training rows under the
            models that held them out, in :func:`ucse.training.neighbours.joint_features` space (the
            ``joint_knn`` out-of-scope flag's threshold).
        heldout_bank_rows: (N,) the size of the bank each of those distances was measured in (the other folds'
            rows, or the training rows before the refit): the shipped flag searches a bank of that size.
        scoring_head: the head that scores the validation and test splits where the test rows joined the
            refit (``extra``): the selection models, fitted on train alone; ``None``: ``head`` scores them.
        estimate_logits: (N, C) out-of-fold logits of the chosen weight as the selection scored it (fold
            probes with their own C), the run's accuracy estimate; ``None`` outside cross-validation.
            ``heldout``'s probe part is at the shipped probe's C, chosen on every row, so its accuracy
            would flatter the probe (0.92 against 0.87 on a 38-text run).
    """

    head: Head
    report: dict
    heldout: Outputs | None = None
    heldout_labels: np.ndarray | None = None
    heldout_distances: np.ndarray | None = None
    estimate_logits: np.ndarray | None = None
    heldout_bank_rows: np.ndarray | None = None
    scoring_head: Head | None = None


def join_states(a: TokenStates, b: TokenStates) -> TokenStates:
    """Rows of ``a`` then ``b``: both are views of one cached pool (``build_states``)."""
    if isinstance(a, SubsetStates) and isinstance(b, SubsetStates) and a.base is b.base:
        return SubsetStates(a.base, np.concatenate([a.indices, b.indices]).tolist())
    raise TypeError("head=auto needs the splits as views of one token-state pool (ucse.training.run).")


def _gaussian_cfg(cfg: TrainConfig) -> HeadConfig:
    return dataclasses.replace(cfg.head, type=HeadType.textcnn)


def fit_probe_head(
    cfg: TrainConfig,
    x: np.ndarray,
    y: np.ndarray,
    c: int,
    h: int,
    c_value: float | None = None,
    groups: np.ndarray | None = None,
) -> tuple[Head, dict]:
    """The logreg probe on (N, H) unit vectors ``x`` as a saveable head, and its report.

    C is chosen by cross-validation (copies of a text, ``groups``, in one fold) unless ``c_value`` fixes it
    (:func:`ucse.training.logreg.fit_probe`).
    """
    folds, seed, max_iter = cfg.head.logreg_folds, cfg.seed, cfg.head.logreg_max_iter
    clf, info = fit_probe(x, y, c, folds, seed, max_iter, c_value, groups)
    head = probe_head(clf, h, cfg.backbone.pooling)
    probe_cfg = dataclasses.replace(cfg.head, type=HeadType.logreg)
    head.spec = HeadSpec(probe_cfg, h, c, cfg.backbone.pooling)  # what save_head stores
    return head, info


def _probe_logits(head: Head, x: np.ndarray) -> np.ndarray:
    w = head.linear.weight.detach().double().numpy()
    return x @ w.T + head.linear.bias.detach().double().numpy()  # (N, C)


def probe_folds(
    cfg: TrainConfig,
    x: np.ndarray,
    y: np.ndarray,
    c: int,
    h: int,
    folds: list[tuple[np.ndarray, np.ndarray]],
    groups: np.ndarray | None = None,
) -> tuple[dict, np.ndarray, np.ndarray]:
    """The probe's C* chosen on every row, and two sets of its out-of-fold (N, C) logits over ``folds``.

    Returns (C*'s report, nested, at C*). Nested: fold probes that choose their own C inside the fold, which
    the selection and the run's estimate read (C chosen on every row would have seen the held-out texts: an
    optimistic probe, a biased choice). At C*: fold probes at the shipped probe's C, which calibration reads:
    a fold's own C can differ (3 in one fold, 100 in another at 8 examples per class) and with it the
    logits' scale, so a temperature fitted on those did not fit the shipped probe (ECE 0.17 on a
    MassiveIntent 8-shot run).
    """
    _, info = fit_probe_head(cfg, x, y, c, h, groups=groups)
    nested, shipped = np.zeros((len(y), c)), np.zeros((len(y), c))
    for tr, te in folds:
        probe, own = fit_probe_head(cfg, x[tr], y[tr], c, h, groups=None if groups is None else groups[tr])
        nested[te] = _probe_logits(probe, x[te])
        if own["C"] != info["C"]:
            probe, _ = fit_probe_head(cfg, x[tr], y[tr], c, h, info["C"])
        shipped[te] = _probe_logits(probe, x[te])
    return info, nested, shipped


def cross_fitted_probe(
    cfg: TrainConfig,
    states: dict[str, TokenStates],
    labels: dict[str, np.ndarray],
    c: int,
    groups: np.ndarray | None = None,
) -> AutoResult:
    """``head=logreg`` where validation is too small to calibrate on (``cross_validates``), with data.refit.

    The probe ships fitted on train + validation at C*, and the profile is calibrated on its out-of-fold
    logits at C* over every row, as ``head=auto``'s cross-validation does: a 10 % slice of 120 texts (12)
    certified no abstention target and set no out-of-scope threshold (a user's trial of the estimator).
    """
    rows = join_states(states["train"], states["validation"])
    y = np.concatenate([labels["train"], labels["validation"]])
    x = probe_features(rows, cfg.backbone.pooling)  # (N, H) unit vectors: the probe's mu
    folds = cv_splits(y, 5, cfg.seed, groups)
    info, nested, shipped = probe_folds(cfg, x, y, c, rows.hidden_size, folds, groups)
    probe = fit_probe_head(cfg, x, y, c, rows.hidden_size, info["C"])[0]
    heldout = Outputs(x.astype(np.float32), None, shipped.astype(np.float32))
    dist = bank_rows = None
    if _joint_flag(cfg, len(y)):  # each row's distances to the other folds' rows, the bank of its probe
        dist = _fold_distances({"weight": 0.0}, rows, x, folds, None, None)
        bank_rows = np.zeros(len(y), dtype=np.int64)
        for tr, te in folds:
            bank_rows[te] = len(tr)
    report = {"probe": info, "calibrated_on": {"mode": "cross-fitted", "folds": len(folds), "rows": len(y)}}
    return AutoResult(probe, report, heldout, y, dist, nested, bank_rows)


def fit_auto(
    cfg: TrainConfig,
    states: dict[str, TokenStates],
    labels: dict[str, np.ndarray],
    num_classes: int,
    device: torch.device,
    weights: tuple[float, ...] = WEIGHTS,
    groups: np.ndarray | None = None,
    extra: tuple[TokenStates, np.ndarray] | None = None,
) -> AutoResult:
    """Fit the candidates on train (+ validation), choose w among ``weights``, return the head to ship.

    ``groups``: (train + validation,) ids of copies of one text, kept in one cross-validation fold.
    ``extra``: rows (states, labels) that join the refit only (``data.refit_test``'s test rows), with a
    validation split to select on; the selection models, which never saw them, score them
    (``AutoResult.scoring_head``).
    """
    c, h = num_classes, states["train"].hidden_size
    if not cross_validates(len(labels["validation"]), c):
        train_groups = None if groups is None else groups[: len(labels["train"])]
        return _holdout(cfg, states, labels, c, h, device, weights, train_groups, extra)
    if extra is not None:
        raise ValueError(
            "extra refit rows need a validation split to select on (cross-validation refits all)"
        )
    return _cross_validated(cfg, states, labels, c, h, device, weights, groups)


def _joint_flag(cfg: TrainConfig, bank_rows: int) -> bool:
    """Whether the run's out-of-scope flag will be ``joint_knn`` (then held-out distances are kept)."""
    u = cfg.uncertainty
    return u.enabled and u.ood.enabled and u.ood.resolved_score(bank_rows) is OodScore.joint_knn


def predict_outputs(cfg: TrainConfig, device: torch.device):
    """:func:`run_head` as predict runs the shipped head: on the run's device, bf16 where the backbone is."""
    bf16 = effective_precision(cfg.backbone.precision, device) is Precision.bf16
    return functools.partial(run_head, device=device, bf16=bf16)


def _holdout(cfg, states, labels, c, h, device, weights, groups=None, extra=None) -> AutoResult:
    outputs = predict_outputs(cfg, device)
    x_tr = probe_features(states["train"], cfg.backbone.pooling)
    x_va = probe_features(states["validation"], cfg.backbone.pooling)
    probe, probe_info = fit_probe_head(cfg, x_tr, labels["train"], c, h, groups=groups)
    fit = fit_head(
        cfg,
        _gaussian_cfg(cfg),
        (states["train"], labels["train"]),
        (states["validation"], labels["validation"]),
        c,
        device,
    )
    out_va = outputs(fit.head, states["validation"])  # mean (M, D), var (M, D) | None, logits (M, C)
    b = _probe_logits(probe, x_va)
    choice = choose_blend(out_va.logits, b, labels["validation"], weights)
    report = {
        "mode": "holdout",
        "n_heldout": len(labels["validation"]),
        "probe": probe_info,
        "textcnn": {"steps": fit.steps, "best_step": fit.best_step, "best_val_nll": fit.best_val_nll},
        **choice,
    }
    selected = compose(cfg.head, choice, fit.head, probe, c)
    if not cfg.data.refit:
        return AutoResult(selected, report)
    # Refit the chosen models on train + validation (+ extra): the shipped head learns from every labelled
    # row; the validation outputs of the selection models stay the held-out evidence the profile is
    # calibrated on, and those models, which saw neither, score the validation and extra rows.
    parts, ys, xs = [states["train"]], [labels["train"]], [x_tr]
    if extra is not None:
        parts, ys = [*parts, extra[0]], [*ys, extra[1]]
        xs.append(probe_features(extra[0], cfg.backbone.pooling))
    rows = functools.reduce(join_states, [*parts, states["validation"]])
    y = np.concatenate([*ys, labels["validation"]])
    x = np.concatenate([*xs, x_va])
    probe, gaussian, steps = _refit(cfg, choice, rows, x, y, c, h, device, probe_info["C"])
    if steps is not None:
        report["textcnn"]["refit_steps"] = steps
    report["refit"] = {"rows": len(y)}
    heldout = _heldout_outputs(choice, x_va, out_va.logits, b, out_va.mean, out_va.var)
    dist = bank_rows = None
    if _joint_flag(cfg, len(y)):  # joint_knn after the refit: distances under the selection models
        # the selection TextCNN's mu of the training rows, when the choice reads it (the probe's are x_tr)
        mean_tr = outputs(fit.head, states["train"]).mean if choice["weight"] > 0 else None
        bank = _joint(choice, mean_tr, x_tr)
        dist = neighbour_distances(_joint(choice, out_va.mean, x_va), bank, MAX_K).numpy()
        bank_rows = np.full(len(x_va), len(x_tr), dtype=np.int64)
    head = compose(cfg.head, choice, gaussian, probe, c)
    scoring = selected if extra is not None else None
    return AutoResult(
        head, report, heldout, labels["validation"], dist, heldout_bank_rows=bank_rows, scoring_head=scoring
    )


def _fold_distances(
    choice: dict,
    rows: TokenStates,
    x: np.ndarray,
    folds: list,
    heads: list[Head] | None,
    oof_mean: np.ndarray | None,
    outputs=run_head,
) -> np.ndarray:
    """(N, K) joint distances of every row to its fold's training rows.

    Under the fold TextCNNs (``heads``, run by ``outputs``: :func:`predict_outputs`; ``oof_mean`` holds each
    row's mu from the head that did not train on it), or, when the choice is the probe alone, under the
    probe's unit vectors (its mu, the same in every fold): the fold heads (``None`` then) never run over
    their training rows.
    """
    dist = np.zeros((len(x), min(MAX_K, min(len(tr) for tr, _ in folds))), dtype=np.float32)
    for i, (tr, te) in enumerate(folds):
        if choice["weight"] > 0:
            bank = joint_features(outputs(heads[i], SubsetStates(rows, tr.tolist())).mean, x[tr])
            d = neighbour_distances(joint_features(oof_mean[te], x[te]), bank, MAX_K)
        else:
            d = neighbour_distances(_joint(choice, None, x[te]), _joint(choice, None, x[tr]), MAX_K)
        dist[te] = d[:, : dist.shape[1]].numpy()
    return dist


def _joint(choice: dict, mean: np.ndarray | None, x: np.ndarray):
    """(N, D + H) joint features of the chosen recipe: the TextCNN's mu, or the probe's unit vectors as mu."""
    return joint_features(x if choice["weight"] == 0.0 else mean, x)


def _refit(cfg, choice, rows, x, y, c, h, device, c_value) -> tuple[Head | None, Head | None, int | None]:
    """The chosen models refitted on every selection row: (probe, TextCNN, the TextCNN's steps).

    The probe keeps the selection's C (``c_value``), as the TextCNN keeps its recipe: the held-out logits
    the profile's temperature is fitted on then come from the shipped recipe, on fewer rows. The probe is
    skipped when the choice is the TextCNN alone (w = 1) and the TextCNN when it is the probe alone (w = 0);
    a skipped model is ``None``.
    """
    w = choice["weight"]
    probe = fit_probe_head(cfg, x, y, c, h, c_value)[0] if w < 1 else None
    if w == 0:
        return probe, None, None
    fit = fit_head(cfg, _gaussian_cfg(cfg), (rows, y), None, c, device)
    return probe, fit.head, fit.steps


def _heldout_outputs(choice, x, a_logits, b_logits, mean, var) -> Outputs:
    """Held-out outputs of the chosen recipe, for calibrating the uncertainty profile.

    From (N, H) probe vectors ``x``, (N, C) TextCNN / probe logits and the TextCNN's (N, D) mean and
    variance (``None`` without a variance branch).
    """
    if choice["weight"] == 0.0:  # the probe's own outputs: its unit vectors are its mean
        return Outputs(x.astype(np.float32), None, b_logits.astype(np.float32))
    logits = blend_logits(choice, a_logits, b_logits).astype(np.float32)
    return Outputs(mean.astype(np.float32), None if var is None else var.astype(np.float32), logits)


def _cross_validated(cfg, states, labels, c, h, device, weights, groups=None) -> AutoResult:
    outputs = predict_outputs(cfg, device)
    rows = join_states(states["train"], states["validation"])
    y = np.concatenate([labels["train"], labels["validation"]])
    x = probe_features(rows, cfg.backbone.pooling)
    # copies of one text stay in one fold: split, a held-out copy scored as if new (module duplicates.py)
    folds = cv_splits(y, 5, cfg.seed, groups)
    oof_a = np.zeros((len(y), c))
    fold_heads = []  # the fold TextCNNs, for the flag's held-out distances once the choice is known
    joint = _joint_flag(cfg, len(y))
    oof_mean, oof_var = None, None
    # said as it goes: a trial's 1,450 long emails spent 13 silent minutes here and looked hung
    log.info("head=auto: choosing by %d-fold cross-validation over %d texts", len(folds), len(y))
    probe_info, oof_b, oof_shipped = probe_folds(cfg, x, y, c, h, folds, groups)
    started = time.monotonic()
    for i, (tr, te) in enumerate(folds, 1):
        fit = fit_head(cfg, _gaussian_cfg(cfg), (SubsetStates(rows, tr.tolist()), y[tr]), None, c, device)
        took = (time.monotonic() - started) / i  # s a fold: the folds left take about as long
        log.info("head=auto: TextCNN fold %d of %d done (%.0f s a fold; then a refit)", i, len(folds), took)
        out = outputs(fit.head, SubsetStates(rows, te.tolist()))
        oof_a[te] = out.logits
        if joint:
            fold_heads.append(fit.head)
        if oof_mean is None:
            oof_mean = np.zeros((len(y), out.mean.shape[1]))
            oof_var = None if out.var is None else np.zeros_like(oof_mean)
        oof_mean[te] = out.mean
        if oof_var is not None:
            oof_var[te] = out.var
    choice = choose_blend(oof_a, oof_b, y, weights)
    estimate = blend_logits(choice, oof_a, oof_b)  # nested: no C chosen on a held-out text
    # the blend's probe temperature, at C*'s scale; the selection's (fold probes at their own C) kept too
    choice["t_probe_selection"] = choice["t_probe"]
    choice["t_probe"] = fit_temperature(oof_shipped, y)
    probe, gaussian, steps = _refit(cfg, choice, rows, x, y, c, h, device, probe_info["C"])
    head = compose(cfg.head, choice, gaussian, probe, c)
    heldout = _heldout_outputs(choice, x, oof_a, oof_shipped, oof_mean, oof_var)
    dist = bank_rows = None
    if joint:
        dist = _fold_distances(choice, rows, x, folds, fold_heads, oof_mean, outputs)
        bank_rows = np.zeros(len(y), dtype=np.int64)  # (N,) each row's fold bank: the other folds' rows
        for tr, te in folds:
            bank_rows[te] = len(tr)
    report = {
        "mode": "cross-validation",
        "folds": len(folds),
        "n_heldout": len(y),
        "probe": probe_info,
        "textcnn": {"steps": steps},
        **choice,
    }
    return AutoResult(head, report, heldout, y, dist, estimate, bank_rows)
