"""A saved uncertainty profile read back as untrusted input, checked whole before any of it is used.

Every field of ``calibration.json`` is typed and range-checked, every array of ``calibration.safetensors``
named, shaped and finite. Without these checks a file could be accepted and silently change every answer:
``conformal.qhat=-5`` makes every prediction set empty, an abstention threshold ``"nan"`` makes nothing
abstain, a temperature of 0 divides by zero. Each failure is one line naming the file, the field, its
value, what is allowed and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from ucse.config.uncertainty import (
    CalibrationMethod,
    ClassPrior,
    ConformalConfig,
    ConformalMethod,
    OodScore,
    ScoreName,
)
from ucse.heads.io import REFIT
from ucse.uncertainty.decision import from_saved as decision_from_saved
from ucse.uncertainty.ood_detector import OOD_ARRAYS, OOD_KEYS, components, needed_stats, reads_mean
from ucse.uncertainty.selective import AbstainThreshold

MAX_SAMPLES = 1024
"""Monte-Carlo samples a saved profile may ask for: predict holds (samples, 1024 texts, C) float64 at once."""
QHAT_SLACK = 1e-6
"""Rounding allowance above the largest conformal score (a cumulative sum of C probabilities may exceed 1)."""

_TOP = {
    "format_version",
    "weights_sha256",
    "arrays_sha256",
    "calibration",
    "score",
    "samples",
    "seed",
    "abstain",
    "conformal",
    "density_logdet",
    "ood",
    "info",
    "decision",
}
_REQUIRED = ("calibration", "score", "samples", "seed")
_ARRAYS = {
    "calibration_scale",
    "calibration_bias",
    "classifier_weight",
    "density_means",
    "density_precision",
    "density_log_prior",
    *OOD_ARRAYS,
}
_DENSITY = ("density_means", "density_precision", "density_log_prior")


class _Checker:
    """Raises one ``ValueError`` naming the file, the dotted field, the value and what is allowed."""

    def __init__(self, where: Path) -> None:
        self.where = where

    def fail(self, key: str, value: Any, allowed: str) -> None:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ValueError(f"{self.where}: field '{key}' is {shown}, allowed: {allowed}; {REFIT}.")

    def check(self, ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            self.fail(key, value, allowed)

    def keys(self, obj: Any, key: str, known: set[str], required: set[str]) -> None:
        """``obj`` is an object whose keys are all ``known`` and include every ``required``."""
        self.check(isinstance(obj, dict), key, obj, "an object")
        unknown, missing = sorted(set(obj) - known), sorted(required - set(obj))
        if unknown or missing:
            where = f"'{key}'" if key else "the top level"
            wrong = [f"has unknown key(s) {unknown}"] * bool(unknown) + [f"lacks key(s) {missing}"] * bool(
                missing
            )
            raise ValueError(
                f"{self.where}: {where} {' and '.join(wrong)} (valid: {sorted(known)}); {REFIT}."
            )


def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _int(v: Any) -> bool:
    return type(v) is int


def _in(low: float, high: float, closed_high: bool = False) -> Callable[[Any], bool]:
    return lambda v: _number(v) and low < v and (v <= high if closed_high else v < high)


def _unit(v: Any) -> bool:
    return _number(v) and 0 <= v <= 1


def threshold(value: Any) -> float | None:
    """A saved threshold as a float, or ``None`` when it is not one (NaN included).

    Thresholds are finite numbers, or ``"inf"`` / ``"-inf"`` since JSON has no infinity.
    """
    if _number(value):
        return float(value)
    return {"inf": math.inf, "-inf": -math.inf}.get(value) if isinstance(value, str) else None


def _calibration(c: _Checker, cal: Any) -> CalibrationMethod:
    c.keys(cal, "calibration", {"method", "temperature", "prior"}, {"method", "temperature"})
    methods = [m.value for m in CalibrationMethod]
    c.check(cal["method"] in methods, "calibration.method", cal["method"], " | ".join(methods))
    priors = [p.value for p in ClassPrior]  # absent in profiles saved before the option: the training mix
    prior = cal.get("prior", ClassPrior.train.value)
    c.check(isinstance(prior, str) and prior in priors, "calibration.prior", prior, " | ".join(priors))
    method = CalibrationMethod(cal["method"])
    t = cal["temperature"]
    if method is CalibrationMethod.vector:
        c.check(t is None, "calibration.temperature", t, "null for vector scaling")
    else:
        c.check(_number(t) and t > 0, "calibration.temperature", t, "a finite number > 0")
    return method


def _abstain(c: _Checker, a: Any) -> None:
    names = {f.name for f in fields(AbstainThreshold)}
    c.keys(a, "abstain", names, names)
    c.check(
        threshold(a["threshold"]) is not None,
        "abstain.threshold",
        a["threshold"],
        'a finite number, "inf" (never abstain) or "-inf" (always abstain)',
    )
    rules = {"target_error": _in(0, 1), "coverage": _in(0, 1, closed_high=True)}
    c.check(
        isinstance(a["rule"], str) and a["rule"] in rules,
        "abstain.rule",
        a["rule"],
        "target_error | coverage",
    )
    c.check(
        rules[a["rule"]](a["target"]),
        "abstain.target",
        a["target"],
        "in (0, 1) for target_error, (0, 1] for coverage",
    )
    c.check(a["delta"] is None or _in(0, 1)(a["delta"]), "abstain.delta", a["delta"], "null or in (0, 1)")
    c.check(a["bound"] is None or _unit(a["bound"]), "abstain.bound", a["bound"], "null or in [0, 1]")
    for key in ("val_coverage", "val_error"):
        c.check(_unit(a[key]), f"abstain.{key}", a[key], "a number in [0, 1]")
    c.check(type(a["achievable"]) is bool, "abstain.achievable", a["achievable"], "true or false")


ADDED_LATER = {"include_top"}
"""Conformal fields a saved profile may lack (written before they existed); they load with their default."""


def _conformal(c: _Checker, k: Any, num_classes: int) -> None:
    names = {f.name for f in fields(ConformalConfig)} | {"qhat"}
    c.keys(k, "conformal", names, names - ADDED_LATER)  # a profile saved before a field existed: its default
    c.check(_in(0, 1)(k["alpha"]), "conformal.alpha", k["alpha"], "a number in (0, 1)")
    methods = [m.value for m in ConformalMethod]
    c.check(k["method"] in methods, "conformal.method", k["method"], " | ".join(methods))
    c.check(type(k["randomized"]) is bool, "conformal.randomized", k["randomized"], "true or false")
    top = k.get("include_top", True)
    c.check(type(top) is bool, "conformal.include_top", top, "true or false")
    lam, k_reg = k["raps_lambda"], k["raps_k_reg"]
    c.check(_number(lam) and lam >= 0, "conformal.raps_lambda", lam, "a finite number >= 0")
    c.check(_int(k_reg) and k_reg >= 0, "conformal.raps_k_reg", k_reg, "an integer >= 0")
    if k["method"] != ConformalMethod.raps.value:
        lam, k_reg = 0.0, 0
    # A label's conformal score is a probability mass (<= 1) plus the RAPS penalty lam * (rank - k_reg).
    top = 1.0 + lam * max(0, num_classes - k_reg)
    raw = k["qhat"]  # one quantile, or one per label (sets weighted to a target class mix)
    many = isinstance(raw, list)
    qs = [threshold(v) for v in raw] if many else [threshold(raw)]
    c.check(
        (not many or len(qs) == num_classes)
        and all(q == math.inf or (q is not None and 0 <= q <= top + QHAT_SLACK) for q in qs),
        "conformal.qhat",
        raw,
        f'a number in [0, {top:g}] (the range of the conformal scores) or "inf" (every label), or a '
        f"list of {num_classes} of them",
    )


def _arrays(c: _Checker, arrays: dict[str, torch.Tensor], num_classes: int, dim: int | None) -> None:
    where = str(c.where).removesuffix(".json") + ".safetensors"
    unknown = sorted(set(arrays) - _ARRAYS)
    missing = sorted({"calibration_scale", "calibration_bias"} - set(arrays))
    present = [n for n in _DENSITY if n in arrays]
    if unknown or missing or len(present) not in (0, len(_DENSITY)):
        raise ValueError(
            f"{where}: unknown arrays {unknown} / missing arrays "
            f"{missing or sorted(set(_DENSITY) - set(present))} (valid: {sorted(_ARRAYS)}); {REFIT}."
        )
    d = dim
    if d is None:  # no head to compare with: the arrays must agree among themselves
        wide = arrays.get("classifier_weight", arrays.get("density_means"))
        d = None if wide is None or wide.ndim != 2 else int(wide.shape[1])
    shapes = {
        "calibration_scale": (num_classes,),
        "calibration_bias": (num_classes,),
        "classifier_weight": (num_classes, d),
        "density_means": (num_classes, d),
        "density_precision": (d, d),
        "density_log_prior": (num_classes,),
    }
    for name, t in arrays.items():
        if name in OOD_ARRAYS:  # checked with the ood object (check_saved_ood)
            continue
        if tuple(t.shape) != shapes[name] or not t.is_floating_point():
            raise ValueError(
                f"{where}: array '{name}' is {t.dtype} {tuple(t.shape)}, expected a float array of shape "
                f"{shapes[name]} (C={num_classes} classes, D={d}); {REFIT}."
            )
        # Absent classes have prior 0 (log -inf); every other value must be a real number.
        bad = torch.isnan(t) | (t == math.inf) if name == "density_log_prior" else ~torch.isfinite(t)
        if bool(bad.any()):
            raise ValueError(f"{where}: array '{name}' holds {int(bad.sum())} NaN/inf value(s); {REFIT}.")


def check_saved_ood(
    o: Any,
    arrays: dict[str, torch.Tensor],
    num_classes: int,
    dim: int | None,
    fail: Any,
    mean_dim: int | None = None,
) -> None:
    """Check a saved ``ood`` object and its arrays; ``fail(key, value, allowed)`` raises naming the file.

    ``dim`` is the pooled vector's width H; ``mean_dim`` the head's D, which ``joint_knn``'s [mu, pooled]
    bank adds to it.
    """
    if not isinstance(o, dict) or set(o) != OOD_KEYS:
        fail("ood", sorted(o) if isinstance(o, dict) else o, f"an object with keys {sorted(OOD_KEYS)}")
    scores = [s.value for s in OodScore if s is not OodScore.auto]  # saved resolved
    if o["score"] not in scores:
        fail("ood.score", o["score"], " | ".join(scores))
    score = OodScore(o["score"])
    if reads_mean(score) and dim is not None and mean_dim is not None:
        dim += mean_dim

    if not (_number(o["tpr"]) and 0 < o["tpr"] < 1):
        fail("ood.tpr", o["tpr"], "a number in (0, 1)")
    if not (_number(o["threshold"]) or o["threshold"] == "inf"):
        fail("ood.threshold", o["threshold"], 'a finite number or "inf"')
    if not (_int(o["k"]) and o["k"] >= 1):
        fail("ood.k", o["k"], "an integer >= 1")
    parts = len(components(score))
    z = o["standardize"]
    ok_z = (
        z is None
        if parts == 1
        else (
            isinstance(z, list)
            and len(z) == 2 * parts
            and all(_number(v) for v in z)
            and all(v > 0 for v in z[1::2])
        )
    )
    if not ok_z:
        fail("ood.standardize", z, f"null for one score, else {2 * parts} finite numbers (mean, std > 0)")
    need = needed_stats(score)
    want = sorted(n for n, group in OOD_ARRAYS.items() if group in need)
    have = sorted(n for n in arrays if n in OOD_ARRAYS)
    if have != want:
        fail("ood.score", o["score"], f"a score whose arrays are all saved (it needs {want}, found {have})")
    if "gaussians" in need and not _number(o["logdet"]):
        fail("ood.logdet", o["logdet"], "a finite number")
    if not isinstance(o["info"], dict):
        fail("ood.info", o["info"], "an object")
    if dim is None:  # no head to compare with: the arrays must agree among themselves
        dim = next((int(t.shape[-1]) for n, t in arrays.items() if n in OOD_ARRAYS and t.ndim == 2), None)
    m = arrays["ood_bank"].shape[0] if "ood_bank" in arrays else 0
    shapes = {
        "ood_means": (num_classes, dim),
        "ood_precision": (dim, dim),
        "ood_log_prior": (num_classes,),
        "ood_background_mean": (dim,),
        "ood_background_precision": (dim, dim),
        "ood_class_means": (num_classes, dim),
        "ood_class_precision": (num_classes, dim, dim),
        "ood_class_logdet": (num_classes,),
        "ood_class_log_prior": (num_classes,),
        "ood_bank": (m, dim),
    }
    for name, t in arrays.items():
        if name not in OOD_ARRAYS:
            continue
        want = shapes[name]
        if tuple(t.shape) != want or not t.is_floating_point():
            fail(f"array {name}", f"{t.dtype} {tuple(t.shape)}", f"a float array of shape {want}")
        bad = torch.isnan(t) | (t == math.inf) if name.endswith("log_prior") else ~torch.isfinite(t)
        if bool(bad.any()):
            fail(f"array {name}", f"{int(bad.sum())} NaN/inf values", "finite values")
    if "ood_bank" in arrays and m < 1:
        fail("array ood_bank", m, "at least one row")


def check_saved_profile(
    cfg: dict[str, Any],
    arrays: dict[str, torch.Tensor],
    num_classes: int,
    dim: int | None,
    where: Path,
    hidden: int | None = None,
) -> None:
    """Check every field of a saved profile before it is turned into decisions.

    Args:
        cfg: ``calibration.json`` as parsed (an object).
        arrays: ``calibration.safetensors``' tensors.
        num_classes: C of the head.
        dim: D, the head's embedding width (checked against the arrays' widths), or ``None``.
        where: the ``calibration.json`` path, for messages.
        hidden: H, the backbone width the out-of-scope arrays must have, or ``None`` (then they must agree
            among themselves).

    Raises:
        ValueError: naming the file, the field, its value, the allowed range and the fix.
    """
    c = _Checker(where)
    c.keys(cfg, "", _TOP, set(_REQUIRED))
    method = _calibration(c, cfg["calibration"])
    scores = [s.value for s in ScoreName if s is not ScoreName.auto]
    c.check(cfg["score"] in scores, "score", cfg["score"], f"one of {', '.join(scores)}")
    c.check(
        _int(cfg["samples"]) and 0 <= cfg["samples"] <= MAX_SAMPLES,
        "samples",
        cfg["samples"],
        f"an integer in [0, {MAX_SAMPLES}]",
    )
    c.check(_int(cfg["seed"]) and 0 <= cfg["seed"] < 2**63, "seed", cfg["seed"], "an integer in [0, 2**63)")
    if cfg.get("abstain") is not None:
        _abstain(c, cfg["abstain"])
    if cfg.get("conformal") is not None:
        _conformal(c, cfg["conformal"], num_classes)
    if cfg.get("decision") is not None:
        decision_from_saved(cfg["decision"], num_classes, c.fail)
    logdet = cfg.get("density_logdet")
    has_density = "density_means" in arrays
    c.check(
        _number(logdet) if has_density else logdet is None,
        "density_logdet",
        logdet,
        "a finite number with the density arrays, else null",
    )
    c.check(isinstance(cfg.get("info", {}), dict), "info", cfg.get("info"), "an object")
    _arrays(c, arrays, num_classes, dim)
    if cfg.get("ood") is not None:
        check_saved_ood(cfg["ood"], arrays, num_classes, hidden, c.fail, mean_dim=dim)
    elif any(n in OOD_ARRAYS for n in arrays):
        c.fail("ood", None, "an object describing the saved ood_* arrays")
    if method is not CalibrationMethod.vector and not bool((arrays["calibration_scale"] > 0).all()):
        raise ValueError(
            f"{where}: calibration_scale (1 / temperature) must be > 0 for {method.value} scaling; {REFIT}."
        )
