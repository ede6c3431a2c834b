"""The uncertainty profile saved with a head, and the one call the inference layer makes to apply it.

    from ucse.uncertainty.profile import load_uncertainty_profile
    profile = load_uncertainty_profile(head_dir)                # plain softmax / MSP if nothing was fitted
    out = profile.apply(mean, var, logits, sets=True, pooled=pooled)  # (N, D), (N, D) | None, (N, C), (N, H)
    out.probs, out.confidence, out.uncertainty, out.abstain, out.sets

Saved as ``head/calibration.json`` (choices, scalars) and ``head/calibration.safetensors`` (vectors).
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ucse.config.uncertainty import CalibrationMethod, ClassPrior, ConformalConfig, ConformalMethod, ScoreName
from ucse.heads.io import (
    CALIBRATION_FILE,
    load_calibration,
    save_calibration,
    saved_hidden_size,
    saved_sizes,
)
from ucse.uncertainty import conformal, density, scores
from ucse.uncertainty.calibration import Calibrator
from ucse.uncertainty.decision import DecisionRule
from ucse.uncertainty.ood_detector import OodDetector, from_saved, to_saved
from ucse.uncertainty.saved_profile import check_saved_profile, threshold
from ucse.uncertainty.selective import AbstainThreshold

# Scores that need the variance branch, the classifier weight or the training Gaussians.
log = logging.getLogger(__name__)
NEEDS_VAR = (ScoreName.sigma, ScoreName.predictive_entropy, ScoreName.mutual_information)
NEEDS_DENSITY = (ScoreName.mahalanobis, ScoreName.density)


@dataclass
class UncertaintyOutput:
    """What a profile makes of N texts' head outputs (numpy, for the inference layer).

    Attributes:
        probs: (N, C) calibrated probabilities.
        prediction: (N,) argmax class ids.
        confidence: (N,) calibrated probability of the predicted class.
        uncertainty: (N,) the profile's default score (higher = more uncertain).
        score: name of that score.
        abstain: (N,) bool, True where ``uncertainty`` is above the saved threshold (all False without one).
        sets: (N, C) bool conformal set membership, or ``None`` when not asked for or not fitted.
        ood: (N,) bool, True where ``ood_score`` is above the saved out-of-scope threshold; ``None`` without
            a fitted flag.
        ood_score: (N,) the out-of-scope score (higher = more likely none of the labels), or ``None``.
    """

    probs: np.ndarray
    prediction: np.ndarray
    confidence: np.ndarray
    uncertainty: np.ndarray
    score: str
    abstain: np.ndarray
    sets: np.ndarray | None = None
    ood: np.ndarray | None = None
    ood_score: np.ndarray | None = None

    @cached_property
    def rank_order(self) -> np.ndarray:
        """(N, C) each row's class columns, most probable first (ties in column order)."""
        return np.argsort(-self.probs, axis=1, kind="stable")

    def set_labels(self, label_names: list[Any]) -> list[list[Any]] | None:
        """Each text's prediction set (names or ints), most probable first (``None`` without sets)."""
        if self.sets is None:
            return None
        # One sort (shared with predict's rows) and one gather for all rows, then slices (3x faster than a
        # sort per row: predict's host-side time is what a GPU's encode does not hide).
        order = self.rank_order  # (N, C) most probable first
        members = np.take_along_axis(np.asarray(self.sets, dtype=bool), order, axis=1)  # (N, C) in that order
        rows, ranks = np.nonzero(members)  # row-major: each row's members in rank order
        flat = np.asarray(label_names, dtype=object)[order[rows, ranks]].tolist()
        ends = np.cumsum(members.sum(axis=1)).tolist()
        return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]


def row_uniforms(probs: torch.Tensor, seed: int) -> torch.Tensor:
    """(N,) Uniform(0, 1) draws, one per row, from a hash of the row's probabilities and ``seed``.

    Randomised conformal sets need one U per text; hashing the text's own probabilities (a function of the
    text, independent of its label) gives the same U for the same text in any batch.
    """
    rows = probs.to(torch.float32).numpy()
    out = [
        int.from_bytes(
            hashlib.blake2b(r.tobytes(), digest_size=8, salt=seed.to_bytes(8, "little")).digest(), "little"
        )
        / 2.0**64
        for r in rows
    ]
    return torch.tensor(out, dtype=torch.float64)


@dataclass
class UncertaintyProfile:
    """Calibration, default score, abstention threshold, conformal quantile and feature density of a head.

    Build one with :func:`ucse.uncertainty.fit.fit_profile` or load it with :func:`load_uncertainty_profile`;
    :meth:`plain` is the fallback (softmax, MSP, never abstain, no sets).

    Attributes:
        calibrator: logit recalibration.
        score: the default score.
        abstain: the abstention rule, or ``None`` (never abstain).
        conformal: the conformal settings, or ``None`` (no sets).
        qhat: the conformal quantile (with ``conformal``); one per label under a
            target class mix or the balanced prior.
        weight: (C, D) classifier weight, for the predictive scores (``None`` without a variance branch).
        gaussians: training-feature Gaussians on mu, for the density scores.
        samples: Monte-Carlo samples of the predictive scores (0 = probit).
        seed: seed of the samples and of the conformal uniforms.
        fitted: False for the plain fallback.
        info: fit-time summary (validation AURC per score, sizes...), saved in ``calibration.json``.
        ood: the out-of-scope flag, or ``None``.
        decision: an operating point for one label, or ``None`` (the most probable label is answered).
    """

    calibrator: Calibrator
    score: ScoreName = ScoreName.msp
    abstain: AbstainThreshold | None = None
    conformal: ConformalConfig | None = None
    qhat: float | list[float] | None = None
    weight: torch.Tensor | None = None
    gaussians: density.ClassGaussians | None = None
    samples: int = 32
    seed: int = 0
    fitted: bool = True
    info: dict[str, Any] = field(default_factory=dict)
    ood: OodDetector | None = None
    decision: DecisionRule | None = None

    @classmethod
    def plain(cls, num_classes: int) -> UncertaintyProfile:
        """No calibration, MSP as the score, no abstention, no sets."""
        return cls(Calibrator.identity(num_classes), fitted=False)

    def available(self, has_var: bool) -> list[ScoreName]:
        """Scores this profile can compute for outputs with (or without) a variance."""
        names = [ScoreName.msp, ScoreName.entropy]
        if has_var:
            names.append(ScoreName.sigma)
            if self.weight is not None:
                names.append(ScoreName.predictive_entropy)
                if self.samples > 0:
                    names.append(ScoreName.mutual_information)
        if self.gaussians is not None:
            names += list(NEEDS_DENSITY)
        return names

    def scores(
        self, mean: Any, var: Any, logits: Any, names: list[ScoreName] | None = None
    ) -> dict[str, torch.Tensor]:
        """Uncertainty scores of N texts (all available ones unless ``names`` are given).

        Args:
            mean: (N, D) mu.
            var: (N, D) sigma^2 or ``None``.
            logits: (N, C) logits at mu.
            names: which scores.

        Returns:
            ``{score name: (N,) float64}``, higher = more uncertain.
        """
        have = self.available(var is not None)
        names = have if names is None else [ScoreName(n) for n in names]
        missing = [n.value for n in names if n not in have]
        if missing:
            raise ValueError(f"score(s) {missing} need a variance branch or fitted statistics; have {have}.")
        probs = self.calibrator.probs(logits)  # (N, C)
        cal = {"scale": self.calibrator.scale, "bias": self.calibrator.bias}
        out: dict[str, torch.Tensor] = {}
        sampled = None
        for name in names:
            if name == ScoreName.msp:
                out[name.value] = scores.msp(probs)
            elif name == ScoreName.entropy:
                out[name.value] = scores.entropy(probs)
            elif name == ScoreName.sigma:
                out[name.value] = scores.sigma(var)
            elif name in (ScoreName.predictive_entropy, ScoreName.mutual_information):
                if self.samples == 0:
                    out[name.value] = scores.entropy(scores.probit_probs(logits, var, self.weight, **cal))
                    continue
                if sampled is None:
                    sampled = scores.sampled_probs(logits, var, self.weight, self.samples, self.seed, **cal)
                out[name.value] = (
                    scores.entropy(sampled.mean(0))
                    if name == ScoreName.predictive_entropy
                    else scores.mutual_information(sampled)
                )
            elif name == ScoreName.mahalanobis:
                out[name.value] = density.mahalanobis(mean, self.gaussians)
            elif name == ScoreName.density:
                out[name.value] = density.neg_log_density(mean, self.gaussians)
        return out

    def sets(self, probs: torch.Tensor) -> torch.Tensor | None:
        """(N, C) conformal set membership for calibrated probabilities, or ``None`` without a quantile."""
        if self.conformal is None or self.qhat is None:
            return None
        c = self.conformal
        u = row_uniforms(probs, self.seed) if c.randomized else None
        lam, k_reg = (c.raps_lambda, c.raps_k_reg) if c.method == ConformalMethod.raps else (0.0, 0)
        return conformal.prediction_sets(probs, self.qhat, u, lam, k_reg, include_top=c.include_top)

    def apply(
        self, mean: Any, var: Any, logits: Any, sets: bool = False, pooled: Any = None
    ) -> UncertaintyOutput:
        """Turn a head's outputs for N texts into calibrated decisions.

        Args:
            mean: (N, D) mu (used by the density scores).
            var: (N, D) sigma^2, or ``None`` for a head without a variance branch.
            logits: (N, C) logits at mu.
            sets: also return conformal prediction sets (when a quantile was fitted).
            pooled: (N, H) the backbone's pooled unit vectors (``EncodedBatch.pooled``), which the
                out-of-scope flag reads; without them ``ood`` and ``ood_score`` are ``None``.

        Returns:
            An :class:`UncertaintyOutput`.
        """
        probs = self.calibrator.probs(logits)  # (N, C)
        conf, pred = probs.max(dim=1)
        if self.decision is not None:  # the label's operating point: the answer's own probability
            pred = self.decision.predict(probs)
            conf = probs.gather(1, pred[:, None])[:, 0]
        score = self.score if self.score in self.available(var is not None) else ScoreName.msp
        u = self.scores(mean, var, logits, [score])[score.value]
        t = math.inf if self.abstain is None else self.abstain.threshold
        member = self.sets(probs) if sets else None
        if member is not None and self.decision is not None:  # a set holds the answer (coverage only rises)
            member[torch.arange(len(pred)), pred] = True
        ood_score = (
            None
            if self.ood is None or pooled is None
            else self.ood.scores(self.ood.features(mean, pooled), probs, logits)
        )
        return UncertaintyOutput(
            probs=probs.numpy(),
            prediction=pred.numpy(),
            confidence=conf.numpy(),
            uncertainty=u.numpy(),
            score=score.value,
            abstain=(u > t).numpy(),
            sets=None if member is None else member.numpy(),
            ood=None if ood_score is None else (ood_score > self.ood.threshold).numpy(),
            ood_score=None if ood_score is None else ood_score.numpy(),
        )

    def save(self, head_dir: str | Path) -> None:
        """Write ``calibration.json`` + ``calibration.safetensors`` into a saved head folder (atomically)."""
        arrays = {"calibration_scale": self.calibrator.scale, "calibration_bias": self.calibrator.bias}
        if self.weight is not None:
            arrays["classifier_weight"] = self.weight.to(torch.float64)
        g = self.gaussians
        if g is not None:
            arrays |= {
                "density_means": g.means,
                "density_precision": g.precision,
                "density_log_prior": g.log_prior,
            }
        a = self.abstain
        config = {
            "calibration": {
                "method": self.calibrator.method.value,
                "temperature": self.calibrator.temperature,
                "prior": self.calibrator.prior.value,
            },
            "score": self.score.value,
            "samples": self.samples,
            "seed": self.seed,
            "abstain": None if a is None else {**a.__dict__, "threshold": _num(a.threshold)},
            "conformal": None
            if self.conformal is None
            else {**self.conformal.__dict__, "qhat": _num(self.qhat)},
            "density_logdet": None if g is None else g.logdet,
            "info": self.info,
        }
        if self.decision is not None:
            config["decision"] = self.decision.to_saved()
        if self.ood is not None:
            config["ood"], ood_arrays = to_saved(self.ood)
            arrays |= ood_arrays
        save_calibration(head_dir, config, arrays)


def _num(x: Any) -> Any:
    """JSON has no infinity: store +-inf as strings (in a list too)."""
    if isinstance(x, list):
        return [_num(v) for v in x]
    return x if x is None or math.isfinite(x) else ("inf" if x > 0 else "-inf")


def load_uncertainty_profile(
    head_dir: str | Path,
    num_classes: int | None = None,
    device: torch.device | str = "cpu",
    lost_ok: bool = False,
) -> UncertaintyProfile:
    """The profile saved in ``head_dir``, or the plain fallback (softmax, MSP, no abstention, no sets).

    Untrusted input: checked against the manifest, every field typed and range-checked before use.

    Args:
        head_dir: a saved head folder (``config.json`` + ``model.safetensors`` [+ calibration files]).
        num_classes: C for the fallback; read from the head's ``config.json`` when omitted.
        device: where the out-of-scope flag's bank is kept and searched (the classifier's: fast on a GPU).
        lost_ok: a profile the manifest lists but whose files are gone is the fallback (``ucse calibrate``
            refits it) instead of an error (a partial copy would lose abstention, sets and the flag).

    Returns:
        The :class:`UncertaintyProfile`; ``profile.fitted`` tells which.

    Raises:
        ValueError / FileNotFoundError: a calibration unreadable, out of range, changed or for other weights.
    """
    saved = load_calibration(head_dir, lost_ok=lost_ok)
    if saved is None:
        return UncertaintyProfile.plain(num_classes if num_classes is not None else saved_sizes(head_dir)[0])
    cfg, arr = saved
    c, d = saved_sizes(head_dir)
    check_saved_profile(cfg, arr, c, d, Path(head_dir) / CALIBRATION_FILE, saved_hidden_size(head_dir))
    method = CalibrationMethod(cfg["calibration"]["method"])
    prior = ClassPrior(cfg["calibration"].get("prior", ClassPrior.train.value))
    calibrator = Calibrator(method, arr["calibration_scale"], arr["calibration_bias"], prior)
    a = cfg.get("abstain")
    abstain = None if a is None else AbstainThreshold(**{**a, "threshold": threshold(a["threshold"])})
    k = cfg.get("conformal")
    conf = qhat = None
    if k is not None:
        q = k["qhat"]  # the quantile lives on the profile, the settings in ConformalConfig
        qhat = [threshold(v) for v in q] if isinstance(q, list) else threshold(q)
        settings = {key: v for key, v in k.items() if key != "qhat"}
        conf = ConformalConfig(**{**settings, "method": ConformalMethod(k["method"])})
    gaussians = None
    if "density_means" in arr:
        gaussians = density.ClassGaussians(
            arr["density_means"],
            arr["density_precision"],
            arr["density_log_prior"],
            float(cfg["density_logdet"]),
        )
    ood = None if cfg.get("ood") is None else from_saved(cfg["ood"], arr).to(device)
    rule = cfg.get("decision")  # checked by check_saved_profile
    decision = None if rule is None else DecisionRule(**rule)
    return UncertaintyProfile(
        calibrator=calibrator,
        score=ScoreName(cfg["score"]),
        abstain=abstain,
        conformal=conf,
        qhat=qhat,
        weight=arr.get("classifier_weight"),
        gaussians=gaussians,
        samples=cfg["samples"],
        seed=cfg["seed"],
        info=cfg.get("info", {}),
        ood=ood,
        decision=decision,
    )
