"""The out-of-scope flag: a score (``ood_scores``), its training statistics and an in-scope threshold.

    det = fit_ood(OodConfig(), train_x, train_labels, C, val_probs, val_logits, features=val_x)
    s = det.scores(x, probs, logits)             # (N,) higher = more likely none of the labels
    flag = s > det.threshold                     # keeps >= tpr of in-scope texts on average

The threshold is the ceil((n + 1) * tpr)-th smallest score of n in-scope texts held out from the statistics
(the split-conformal quantile): for a new in-scope text exchangeable with them, P(kept) >= tpr. When the head
was trained on every labelled row (``head=auto`` refits on train + validation), no row is held out from the
head, so the feature statistics are cross-fitted: each row is scored by statistics fitted on the other folds.
Under a target class mix the held-out rows are weighted to it (:mod:`ucse.uncertainty.keep_threshold`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ucse.config.uncertainty import OodConfig, OodScore
from ucse.training.neighbours import joint_features
from ucse.uncertainty import ood_scores as S
from ucse.uncertainty.density import ClassGaussians, fit_class_gaussians, mahalanobis
from ucse.uncertainty.keep_threshold import keep_threshold, target_keep_threshold, target_keepable_tpr
from ucse.uncertainty.scores import Array, entropy, msp

STATS_OF = {
    OodScore.mahalanobis: {"gaussians"},
    OodScore.relative_mahalanobis: {"gaussians", "background"},
    OodScore.class_mahalanobis: {"classes"},
    OodScore.knn: {"bank"},
    OodScore.joint_knn: {"bank"},
}
"""The :class:`OodStats` fields each feature score reads (the other base scores read probs or logits)."""
COMBINED = {
    OodScore.mahalanobis_entropy: (OodScore.mahalanobis, OodScore.entropy),
    OodScore.relative_mahalanobis_entropy: (OodScore.relative_mahalanobis, OodScore.entropy),
}


BANK_DTYPE = torch.float16
"""``joint_knn``'s bank, in memory and on disk: half the size of float32 (15 MB for Banking77 with MiniLM-L6).
Rows rounded to 2^-11 moved scores by <= 0.007 and AUROC by < 1e-5 (docs/RESULTS.md section 4); the nearest
rows' distances are recomputed in float64 (:func:`ucse.training.neighbours.neighbour_distances`)."""


def reads_mean(score: OodScore) -> bool:
    """Whether ``score``'s features include the head's mu (so a head trained on a row shapes its score)."""
    return score is OodScore.joint_knn


def flag_features(score: OodScore, mean: Array | None, pooled: Array | None) -> Array | None:
    """The feature rows ``score`` reads: [mu, pooled] rows for ``joint_knn``, else the pooled rows."""
    return joint_features(mean, pooled) if reads_mean(score) and pooled is not None else pooled


def components(score: OodScore) -> tuple[OodScore, ...]:
    """The base scores a score sums (itself for a base score)."""
    return COMBINED.get(score, (score,))


@dataclass
class OodStats:
    """Training-feature statistics of the feature scores (only those the chosen score needs are set)."""

    gaussians: ClassGaussians | None = None
    background: S.Background | None = None
    classes: S.ClassCovariances | None = None
    bank: torch.Tensor | None = None


def needed_stats(score: OodScore) -> set[str]:
    """Which :class:`OodStats` fields ``score`` reads."""
    return set().union(*(STATS_OF.get(n, set()) for n in components(score)))


def fit_stats(score: OodScore, features: Array, labels: Array, num_classes: int) -> OodStats:
    """Fit what ``score``'s feature components need on (M, H) training features and (M,) labels."""
    need = needed_stats(score)
    st = OodStats()
    if "gaussians" in need:
        st.gaussians = fit_class_gaussians(features, labels, num_classes)
    if "background" in need:
        st.background = S.fit_background(features)
    if "classes" in need:
        st.classes = S.fit_class_covariances(features, labels, num_classes)
    if "bank" in need:
        st.bank = S.normalise(features).to(BANK_DTYPE if score is OodScore.joint_knn else torch.float32)
    return st


def base_score(
    name: OodScore, st: OodStats, x: Array | None, probs: Array | None, logits: Array | None, k: int
) -> torch.Tensor:
    """(N,) one base score: feature scores read ``x`` (N, H), the others ``probs`` or ``logits``."""
    if name == OodScore.mahalanobis:
        return mahalanobis(x, st.gaussians)
    if name == OodScore.relative_mahalanobis:
        return S.relative_mahalanobis(x, st.gaussians, st.background)
    if name == OodScore.class_mahalanobis:
        return S.class_neg_log_density(x, st.classes)
    if name in (OodScore.knn, OodScore.joint_knn):  # x: pooled, or joint features (OodDetector.features)
        return S.knn_distance(x, st.bank, min(k, st.bank.shape[0]))
    if name == OodScore.energy:
        return S.energy(logits)
    if name == OodScore.entropy:
        return entropy(probs)
    if name == OodScore.msp:
        return msp(probs)
    raise ValueError(f"{name.value} is not a base score")


@dataclass
class OodDetector:
    """A fitted out-of-scope flag.

    Attributes:
        score: which score.
        tpr: the in-scope keep rate the threshold targets.
        threshold: ``ood`` where the score is above it.
        stats: training-feature statistics (:class:`OodStats`).
        k: the neighbour of ``knn``.
        standardize: for a summed score, (mean, std) of each component on the held-out in-scope texts.
        info: how it was fitted (``heldout``: "validation" or "cross-fitted", ``n_heldout``).
    """

    score: OodScore
    tpr: float
    threshold: float
    stats: OodStats
    k: int = 10
    standardize: list[float] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    heldout_scores: torch.Tensor | None = field(default=None, repr=False, compare=False)
    """(N,) the held-out in-scope scores the threshold was set on (in memory only, never saved)."""
    heldout_weights: torch.Tensor | None = field(default=None, repr=False, compare=False)
    """(N,) their weights under a target mix (:func:`weight_to_target`; in memory only)."""

    def to(self, device: torch.device | str) -> OodDetector:
        """Keep the neighbour bank on ``device``, where the classifier runs (the search runs where it is)."""
        if self.stats.bank is not None:
            self.stats.bank = self.stats.bank.to(device)
        return self

    def features(self, mean: Array | None, pooled: Array | None) -> Array | None:
        """What :meth:`scores` reads as ``x`` (:func:`flag_features`)."""
        return flag_features(self.score, mean, pooled)

    def scores(self, x: Array | None, probs: Array | None, logits: Array | None) -> torch.Tensor:
        """(N,) out-of-scope scores: features (N, H), calibrated probs (N, C), raw logits (N, C)."""
        parts = [base_score(n, self.stats, x, probs, logits, self.k) for n in components(self.score)]
        return combine(parts, self.standardize)


def combine(parts: list[torch.Tensor], standardize: list[float] | None) -> torch.Tensor:
    """One part as is; several as the sum of their standardised values ``(s - m) / sd``."""
    if len(parts) == 1:
        return parts[0]
    return sum((p - standardize[2 * i]) / standardize[2 * i + 1] for i, p in enumerate(parts))


def _crossfitted(
    score: OodScore,
    features: torch.Tensor,
    labels: np.ndarray,
    c: int,
    rows: np.ndarray,
    k: int,
    folds: int,
    seed: int,
) -> dict[OodScore, torch.Tensor]:
    """Feature scores of ``rows`` (indices into the M training rows).

    Each row is scored by statistics fitted on the folds that do not hold it.
    """
    from sklearn.model_selection import KFold

    want = [n for n in components(score) if n in STATS_OF]
    out = {n: torch.zeros(len(features), dtype=torch.float64) for n in want}
    for tr, te in KFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(features))):
        st = fit_stats(score, features[tr], labels[tr], c)
        for n in want:
            out[n][te] = base_score(n, st, features[te], None, None, k)
    return {n: v[rows] for n, v in out.items()}


def fit_ood(
    cfg: OodConfig,
    train_features: Array | None,
    train_labels: Array,
    num_classes: int,
    probs: Array,
    logits: Array,
    features: Array | None = None,
    rows: Array | None = None,
    seed: int = 0,
    folds: int = 5,
    stats: OodStats | None = None,
) -> OodDetector:
    """Fit the statistics on training rows and the threshold on held-out in-scope texts.

    Args:
        cfg: score, tpr, k.
        train_features: (M, H) training features (the backbone's pooled unit vectors); ``None`` with
            ``stats``.
        train_labels: (M,) their labels.
        num_classes: C.
        probs: (N, C) calibrated probabilities of N held-out in-scope texts.
        logits: (N, C) their raw logits.
        features: (N, H) their features, texts the statistics were not fitted on; or ``None`` with ``rows``.
        rows: (N,) indices of those texts among the M training rows (a head trained on them): their feature
            scores are then cross-fitted over ``folds`` folds.
        seed: fold shuffling.
        folds: cross-fitting folds.
        stats: the statistics, already fitted on the training rows (e.g. streamed block by block; then
            ``train_features`` may be ``None``); only with ``features``.

    Returns:
        The fitted :class:`OodDetector`.
    """
    if (features is None) == (rows is None):
        raise ValueError(
            "give exactly one of features (held-out texts) and rows (cross-fitted training rows)"
        )
    if stats is not None and rows is not None:
        raise ValueError("cross-fitted rows need the training features, not fitted statistics")
    # As given (float32 from the encoder): the statistics read float64 blocks, not an (M, H) float64 copy.
    t = train_features
    x = None if t is None else t.detach().cpu() if isinstance(t, torch.Tensor) else np.asarray(t)
    y = np.asarray(train_labels)
    names = components(cfg.score)
    st = stats if stats is not None else fit_stats(cfg.score, x, y, num_classes)
    if rows is None:
        parts = [base_score(n, st, features, probs, logits, cfg.k) for n in names]
        how = "validation"
    else:
        crossed = _crossfitted(cfg.score, x, y, num_classes, np.asarray(rows), cfg.k, folds, seed)
        parts = [crossed[n] if n in crossed else base_score(n, st, None, probs, logits, cfg.k) for n in names]
        how = "cross-fitted"
    det = OodDetector(cfg.score, cfg.tpr, math.inf, st, cfg.k)
    set_threshold(det, parts)
    det.info = {"heldout": how, "n_heldout": len(parts[0]), "n_train": len(y)}
    return det


def fit_ood_on_distances(cfg: OodConfig, stats: OodStats, n_train: int, held: torch.Tensor) -> OodDetector:
    """A ``joint_knn`` flag whose held-out in-scope scores were measured elsewhere.

    Args:
        cfg: score (``joint_knn``), tpr, k.
        stats: its bank: the (m, D + H) joint features of the rows the shipped head trained on (all M, or
            the random subset as large as the held-out rows' banks).
        n_train: M, the rows the shipped head trained on (``info["bank_rows"]`` is m).
        held: (N,) k-th neighbour distances of N held-out in-scope rows under the selection models.
    """
    det = OodDetector(cfg.score, cfg.tpr, math.inf, stats, cfg.k)
    set_threshold(det, [held.to(torch.float64)])
    bank_rows = None if stats.bank is None else int(stats.bank.shape[0])
    det.info = {
        "heldout": "selection models",
        "n_heldout": len(held),
        "n_train": n_train,
        "bank_rows": bank_rows,
    }
    return det


def set_threshold(det: OodDetector, parts: list[torch.Tensor]) -> None:
    """Standardise the components (when summed) and set the threshold from held-out in-scope scores.

    Args:
        det: the detector (its ``tpr``).
        parts: each component's (N,) scores on the N held-out in-scope texts.
    """
    det.standardize = None
    if len(parts) > 1:
        det.standardize = [v for p in parts for v in (float(p.mean()), float(p.std().clamp_min(1e-12)))]
    det.heldout_scores = combine(parts, det.standardize)
    det.threshold = keep_threshold(det.heldout_scores, det.tpr)


def weight_to_target(det: OodDetector, labels: Array, weights: Array, mix: str = "target") -> None:
    """Set ``det``'s threshold for in-scope texts mixed like a target, not like its held-out rows.

    Args:
        det: a fitted detector (``heldout_scores`` in memory).
        labels: (N,) the held-out rows' labels, in the order of ``heldout_scores``.
        weights: (C,) each label's target share over its share of those rows
            (:func:`ucse.uncertainty.class_prior.shift_weights`).
        mix: the prior that gave the shares, recorded as ``info["mix"]``: ``target`` or ``balanced``
            (every label alike).
    """
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    det.threshold = target_keep_threshold(det.heldout_scores, y, weights, det.tpr)
    det.heldout_weights = torch.as_tensor(np.asarray(weights), dtype=torch.float64)[y]  # (N,)
    det.info["mix"] = mix
    det.info.pop("keepable_tpr", None)
    if math.isinf(det.threshold):  # too little held-out weight: name the largest tpr that has a threshold
        det.info["keepable_tpr"] = target_keepable_tpr(det.heldout_scores, y, weights, det.tpr)


MIX_KEYS = ("mix", "keepable_tpr")
"""What :func:`weight_to_target` records in ``info``: a refit for another mix starts without them."""


def rethreshold(det: OodDetector, cfg: OodConfig, x: Array, probs: Array, logits: Array) -> OodDetector:
    """The same statistics with a new ``tpr``, thresholded on held-out validation texts (calibrate)."""
    if det.info.get("heldout") != "validation" or det.score != cfg.score or det.k != cfg.k:
        raise ValueError(
            "only a validation-thresholded detector of the same score and k can be rethresholded"
        )
    info = {k: v for k, v in det.info.items() if k not in MIX_KEYS}  # the new profile's mix decides
    new = OodDetector(det.score, cfg.tpr, math.inf, det.stats, det.k, None, info)
    set_threshold(new, [base_score(n, det.stats, x, probs, logits, det.k) for n in components(det.score)])
    new.info["n_heldout"] = len(np.asarray(logits))
    return new


# Saved as the ``ood`` object of calibration.json and ``ood_*`` arrays of calibration.safetensors.
OOD_ARRAYS = {
    "ood_means": "gaussians",
    "ood_precision": "gaussians",
    "ood_log_prior": "gaussians",
    "ood_background_mean": "background",
    "ood_background_precision": "background",
    "ood_class_means": "classes",
    "ood_class_precision": "classes",
    "ood_class_logdet": "classes",
    "ood_class_log_prior": "classes",
    "ood_bank": "bank",
}
OOD_KEYS = {"score", "tpr", "threshold", "k", "standardize", "logdet", "info"}
"""Keys of the saved ``ood`` object (checked by ``saved_profile.check_saved_ood``)."""


def to_saved(det: OodDetector) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(the ``ood`` JSON object, the ``ood_*`` arrays); thresholds +-inf are strings (JSON has no inf)."""
    st, arrays = det.stats, {}
    if st.gaussians is not None:
        g = st.gaussians
        arrays |= {"ood_means": g.means, "ood_precision": g.precision, "ood_log_prior": g.log_prior}
    if st.background is not None:
        arrays |= {
            "ood_background_mean": st.background.mean,
            "ood_background_precision": st.background.precision,
        }
    if st.classes is not None:
        cc = st.classes
        arrays |= {
            "ood_class_means": cc.means,
            "ood_class_precision": cc.precision,
            "ood_class_logdet": cc.logdet,
            "ood_class_log_prior": cc.log_prior,
        }
    if st.bank is not None:
        arrays["ood_bank"] = st.bank.cpu()
    t = det.threshold
    config = {
        "score": det.score.value,
        "tpr": det.tpr,
        "threshold": t if math.isfinite(t) else "inf",
        "k": det.k,
        "standardize": det.standardize,
        "logdet": None if st.gaussians is None else st.gaussians.logdet,
        "info": det.info,
    }
    return config, arrays


def from_saved(cfg: dict[str, Any], arrays: dict[str, torch.Tensor]) -> OodDetector:
    """The detector of a saved profile (``cfg`` and ``arrays`` already checked by ``check_saved_profile``)."""
    a = arrays
    st = OodStats()
    if "ood_means" in a:
        st.gaussians = ClassGaussians(
            a["ood_means"], a["ood_precision"], a["ood_log_prior"], float(cfg["logdet"])
        )
    if "ood_background_mean" in a:
        st.background = S.Background(a["ood_background_mean"], a["ood_background_precision"])
    if "ood_class_means" in a:
        st.classes = S.ClassCovariances(
            a["ood_class_means"], a["ood_class_precision"], a["ood_class_logdet"], a["ood_class_log_prior"]
        )
    if "ood_bank" in a:
        st.bank = a["ood_bank"]
    t = cfg["threshold"]
    return OodDetector(
        OodScore(cfg["score"]),
        cfg["tpr"],
        math.inf if t == "inf" else float(t),
        st,
        cfg["k"],
        cfg["standardize"],
        cfg.get("info", {}),
    )
