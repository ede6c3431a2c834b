"""Fit a head's uncertainty profile on the validation split and save it into the run's ``head/`` folder.

    from ucse.uncertainty.fit import fit_run_uncertainty
    profile = fit_run_uncertainty("runs/Banking77Classification/minilm-l6/textcnn-seed0")

Everything is fitted on the validation split (never on test): the calibration by NLL, the default score by
validation AURC (``score=auto``), the abstention threshold with its guarantee and the conformal quantile;
the feature Gaussians on the training split's means. The guarantees of the threshold and of the sets are
split-conformal / binomial ones over that same validation draw, conditional on the calibration fitted on
it (one or 2C parameters; the bias this introduces is not corrected for).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ucse.config import TrainConfig, from_yaml
from ucse.config.run_layout import RunFolder
from ucse.config.uncertainty import (
    AUTO_SCORES,
    CalibrationMethod,
    ConformalMethod,
    OodThreshold,
    ScoreName,
    UncertaintyConfig,
    check_uncertainty_config,
)
from ucse.core.encoder import EncodedBatch, UcseEncoder
from ucse.core.run_folder import check_same_splits, finished_run, reads_back_data, run_data
from ucse.data import TaskData
from ucse.data.run_rows import as_trained
from ucse.data.run_rows import intact as rows_intact
from ucse.training.auto_run import read_heldout
from ucse.training.run import build_states, resolve_device
from ucse.uncertainty import conformal
from ucse.uncertainty.abstain_rule import fit_abstain
from ucse.uncertainty.calibration import fit_calibrator, out_of_fold_probs
from ucse.uncertainty.class_prior import (
    class_counts,
    decision_figures,
    mix_shares,
    resolve_target,
    shift_weights,
)
from ucse.uncertainty.decision import fit_decision
from ucse.uncertainty.density import ClassGaussians, fit_class_gaussians
from ucse.uncertainty.label_review import write_label_review
from ucse.uncertainty.one_label import warn_if_one_label
from ucse.uncertainty.ood_detector import OodStats, needed_stats, reads_mean, rethreshold, weight_to_target
from ucse.uncertainty.ood_examples import apply_examples, read_ood_texts
from ucse.uncertainty.profile import UncertaintyProfile, row_uniforms
from ucse.uncertainty.selective import aurc
from ucse.uncertainty.train_split import (
    fit_run_ood,
    stream_bank,
    stream_matched_bank,
    stream_train_gaussians,
)

log = logging.getLogger(__name__)


def classifier_weight(head: torch.nn.Module) -> torch.Tensor | None:
    """(C, D) weight of the head's final ``Linear(D, C)`` (every ucse head has ``bottleneck.classifier``)."""
    layer = getattr(getattr(head, "bottleneck", None), "classifier", None)
    return None if layer is None else layer.weight.detach().cpu().to(torch.float64)


def fit_profile(
    val: EncodedBatch,
    val_labels: np.ndarray,
    cfg: UncertaintyConfig,
    weight: torch.Tensor | None = None,
    train: EncodedBatch | None = None,
    train_labels: np.ndarray | None = None,
    gaussians: ClassGaussians | None = None,
    run: str | Path | None = None,
    counts: np.ndarray | None = None,
    label_names: Sequence[str] | None = None,
) -> UncertaintyProfile:
    """Fit calibration, default score, abstention threshold, conformal quantile and feature Gaussians.

    Args:
        val: validation head outputs (mean (N, D), var (N, D) | None, logits (N, C)).
        val_labels: (N,) validation labels.
        cfg: what to fit.
        weight: (C, D) classifier weight (enables the predictive scores with a variance branch).
        train: training head outputs, for the density scores (``None`` skips them).
        train_labels: (M,) training labels.
        gaussians: class Gaussians already fitted for this head (a refit of its profile), used when
            ``train`` is not given.
        run: the run folder, named in the ``ucse calibrate`` command a warning offers (None: the warning
            offers the setting for the next training).
        counts: (C,) rows per label the head trained on, for ``calibration.prior`` (default: the counts of
            ``train_labels``, else of ``val_labels``).
        label_names: the labels in id order, which ``calibration.target_shares`` names (default: the ids).

    Returns:
        The fitted :class:`UncertaintyProfile` (not yet saved).
    """
    check_uncertainty_config(cfg)
    warn_if_one_label(val.logits, val_labels, label_names, run)
    c = val.logits.shape[1]
    base = fit_calibrator(val.logits, val_labels, cfg.calibration.method)  # for the training mix
    if counts is None:
        counts = class_counts(train_labels if train_labels is not None else val_labels, c)
    target = resolve_target(cfg.calibration, label_names, counts)  # (C,) or None
    calibrator = base.for_prior(cfg.calibration.prior, counts, target)
    if train is not None and train_labels is not None:
        gaussians = fit_class_gaussians(train.mean, train_labels, c)
    profile = UncertaintyProfile(
        calibrator,
        weight=weight if val.var is not None else None,
        gaussians=gaussians,
        samples=cfg.samples,
        seed=cfg.seed,
    )
    probs = calibrator.probs(val.logits)  # (N, C)
    profile.decision = fit_decision(probs, val_labels, cfg.decision, label_names)
    answers = probs.argmax(1) if profile.decision is None else profile.decision.predict(probs)  # (N,)
    correct = (answers.numpy() == np.asarray(val_labels)).astype(bool)  # abstention certifies these answers
    val_scores = profile.scores(val.mean, val.var, val.logits)
    val_aurc = {k: aurc(v, correct) for k, v in val_scores.items()}
    auto = cfg.score == ScoreName.auto
    candidates = [k for k in val_aurc if k in AUTO_SCORES] if auto else [cfg.score.value]
    if auto:
        profile.score = ScoreName(min(candidates, key=val_aurc.__getitem__))
    elif cfg.score.value in val_scores:
        profile.score = cfg.score
    else:
        raise ValueError(
            f"uncertainty.score={cfg.score.value} is not available for this head; choose one of "
            f"{', '.join(val_scores)} or auto."
        )
    u = val_scores[profile.score.value]
    # score=auto chose the score on these same rows: the guarantee must hold whichever of the K candidates
    # won, so each candidate's SGR runs at delta / K (a union bound over the candidates).
    delta = cfg.abstain.delta / len(candidates)
    profile.abstain, offer = fit_abstain(u, correct, cfg.abstain, delta, run)
    profile.info |= offer
    k = cfg.conformal
    if cfg.calibration.method == CalibrationMethod.vector:  # 2C parameters: cross-fit the quantile's probs
        shift = {"prior": calibrator.prior, "counts": counts, "target": target}  # the same class mix
        probs = out_of_fold_probs(val.logits, val_labels, cfg.calibration.method, seed=cfg.seed, **shift)
    rand = row_uniforms(probs, cfg.seed) if k.randomized else None
    lam, k_reg = (k.raps_lambda, k.raps_k_reg) if k.method == ConformalMethod.raps else (0.0, 0)
    profile.conformal = k
    mix = mix_shares(cfg.calibration.prior, target, c)  # (C,) or None: the prior's mix of new texts
    weights = shift_weights(mix, val_labels)  # sets for that mix (weighted conformal)
    profile.qhat = conformal.calibrate(probs, val_labels, k.alpha, rand, lam, k_reg, weights)
    profile.info |= {
        "n_validation": len(val_labels),
        "n_train": None if train_labels is None else len(train_labels),
        "validation_accuracy": float(correct.mean()),
        "validation_aurc": val_aurc,
        "abstain_delta_per_candidate": delta,
        "score_candidates": candidates,
    }
    figures = decision_figures(base, val.logits, val_labels, counts, target)
    profile.info["class_prior"] = {"prior": calibrator.prior.value, **figures}
    return profile


def fit_for_run(
    run: Path,
    train_cfg: TrainConfig,
    ucfg: UncertaintyConfig,
    data: TaskData,
    encoder: UcseEncoder,
    previous: UncertaintyProfile | None = None,
    review: bool = False,
) -> UncertaintyProfile:
    """Fit and save the profile of the run in ``run`` for the head ``encoder`` holds.

    A run whose head was selected and refitted by cross-validation (``head=auto`` on a small validation
    split) saved the out-of-fold outputs of every train + validation row in ``heldout.safetensors``: they
    are what the profile is calibrated on, since those rows trained the head (the density scores, which
    need the shipped head's own training means, are left out then). ``previous``, the profile being
    replaced for the same head, lends its class Gaussians, so the training split need not be re-encoded.
    ``review`` writes ``label_review.csv`` from the held-out rows where the run has none (training, and
    ``ucse calibrate`` on a run without a profile).
    """
    c, folder = len(data.label_names), RunFolder(run)
    data = as_trained(run, data)
    read = read_heldout(folder.heldout, c)
    heldout = None if read is None else (read.outputs, read.labels)
    dist, held_banks = (None, None) if read is None else (read.distances, read.bank_rows)
    bank_rows = len(data.labels("train")) + (len(data.labels("validation")) if heldout is not None else 0)
    ocfg = dataclasses.replace(ucfg.ood, score=ucfg.ood.resolved_score(bank_rows))
    old_ood = previous.ood if previous is not None else None
    reuse_ood = (
        heldout is None
        and old_ood is not None
        and old_ood.info.get("heldout") == "validation"
        and (old_ood.score, old_ood.k) == (ocfg.score, ocfg.k)
    )
    gaussians = None  # the replaced profile's, when it has them: the training split need not be encoded
    streamed: dict[str, ClassGaussians] = {}
    # joint_knn's bank (the shipped head's training rows) is filled block by block, like the class Gaussians.
    joint = ocfg.enabled and reads_mean(ocfg.score) and not reuse_ood
    bank = None
    states = build_states(train_cfg, encoder.backbone, data)[0] if heldout is None or ocfg.enabled else {}
    if heldout is not None:
        val, val_labels = heldout
        # The shipped head was refitted on train + validation: the flag's statistics are fitted on (and, for
        # scores on the pooled vector, its threshold cross-fitted over) those rows' outputs.
        whole = ocfg.enabled and not joint
        outs = {s: encoder.run_states(states[s]) for s in ("train", "validation")} if whole else {}
        if joint:  # searched at the size the held-out distances were measured at
            parts = [states["train"], states["validation"]]
            bank = stream_matched_bank(parts, encoder, held_banks, ucfg.seed)
    else:
        gaussians = previous.gaussians if previous is not None else None
        flag_stats = ocfg.enabled and not reuse_ood  # the flag's statistics are fitted on the training split
        # Class Gaussians (the density scores' and some flags') stream block by block; kNN on the pooled
        # vector, the background and per-class covariances read the training rows themselves.
        gauss_flag = flag_stats and not joint and needed_stats(ocfg.score) <= {"gaussians"}
        keys = (("mean",) if gaussians is None else ()) + (("pooled",) if gauss_flag else ())
        whole = flag_stats and not joint and not gauss_flag  # the flag reads the training outputs whole
        splits = ("train", "validation") if whole else ("validation",)
        outs = {s: encoder.run_states(states[s]) for s in splits}
        if keys:
            streamed = stream_train_gaussians(states["train"], data.labels("train"), encoder, keys, c)
        if joint:
            bank = stream_bank(states["train"], encoder)
        val, val_labels = outs["validation"], data.labels("validation")
    weight = classifier_weight(encoder.head)
    class_gaussians = gaussians or streamed.get("mean")
    # Commands name the run only where `ucse calibrate` can serve it: the estimator's scratch folder goes
    # with the estimator, and rows passed in memory are read back only from the run's own copy.
    readable = reads_back_data(train_cfg) or rows_intact(run)
    named = run if not folder.scratch and readable else None
    # The class mix the shipped head learned: its training rows (train + validation after a refit on both).
    trained = [data.labels("train")] + ([data.labels("validation")] if heldout is not None else [])
    counts = class_counts(np.concatenate(trained), c)
    profile = fit_profile(
        val,
        val_labels,
        ucfg,
        weight,
        gaussians=class_gaussians,
        run=named,
        counts=counts,
        label_names=data.label_names,
    )
    profile.info["recalibrate"] = named is not None
    if "mean" in streamed:
        profile.info["n_train"] = len(data.labels("train"))
    elif gaussians is not None:
        profile.info["n_train"] = previous.info.get("n_train")
    probs = profile.calibrator.probs(val.logits)  # (N, C) the held-out rows': the flag's and the review's
    if ocfg.enabled:
        if reuse_ood:
            profile.ood = rethreshold(
                old_ood, ocfg, old_ood.features(val.mean, val.pooled), probs, val.logits
            )
        else:
            stats = OodStats(gaussians=streamed["pooled"]) if "pooled" in streamed else None
            stats = OodStats(bank=bank) if bank is not None else stats
            profile.ood = fit_run_ood(
                ocfg, data, outs, val, probs, heldout is not None, ucfg.seed, stats, held_distances=dist
            )
        prior = profile.info["class_prior"]  # resolved by fit_profile
        mix = mix_shares(prior["prior"], prior.get("target_shares"), len(prior["counts"]))
        if mix is not None:  # keep tpr of in-scope texts mixed as the prior says, not like these rows
            weight_to_target(profile.ood, val_labels, shift_weights(mix, val_labels), prior["prior"])
        if train_cfg.data.ood_path:
            examples = read_ood_texts(train_cfg.data.ood_path, train_cfg.data.text_column)
            tune = ocfg.threshold is not OodThreshold.tpr  # tpr keeps the guarantee, reports the examples
            apply_examples(profile.ood, encoder, profile.calibrator, examples, tune)
    if review and not folder.label_review.exists():  # the rows the held-out outputs belong to (see above)
        rows = data.texts("validation") if heldout is None else data.texts("train") + data.texts("validation")
        texts = rows[len(rows) - len(val_labels) :]
        cut = encoder.backbone.cut(texts)  # the rows the backbone read only up to its token limit
        profile.info["label_review"] = write_label_review(
            folder.label_review, texts, val_labels, probs.numpy(), data.label_names, cut
        )
    profile.save(folder.head)
    return profile


def fit_run_uncertainty(
    run_dir: str | Path,
    cfg: UncertaintyConfig | None = None,
    data_root: str | None = None,
    trust_remote_code: bool = False,
) -> UncertaintyProfile:
    """Fit the profile of a finished run on its validation split and write it into ``run_dir/head``.

    Args:
        run_dir: a run folder written by ``train.py`` (``config.yaml`` + ``head/``).
        cfg: what to fit; defaults to the run's own ``uncertainty`` config.
        data_root: local data folder, when it moved since training.
        trust_remote_code: let the backbone's model code run (the caller's choice; a value stored in the
            run is ignored).

    Returns:
        The saved profile.
    """
    run = finished_run(run_dir)
    folder = RunFolder(run)
    train_cfg = from_yaml(folder.config)
    ucfg = cfg or train_cfg.uncertainty
    fix = "fit it from Python with ucse.uncertainty.fit.fit_profile"
    data = run_data(run, train_cfg, data_root, None, "fitting the profile", fix)
    # The run's own command asked for the model code; a stored config.yaml alone never enables it.
    encoder = UcseEncoder.from_dir(
        folder.head, device=resolve_device(train_cfg.accelerator), trust_remote_code=trust_remote_code
    )
    check_same_splits(run, data, ("train", "validation"), refuse=True)
    profile = fit_for_run(run, train_cfg, ucfg, data, encoder)
    log.info("uncertainty profile (score %s) saved in %s", profile.score.value, folder.head)
    return profile
