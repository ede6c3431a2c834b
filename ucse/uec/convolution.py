"""Uncertainty-driven Gaussian convolution of K member embeddings (paper Sec. 3.2, App. A.1).

z(x) = sum_k pi_k(x) z_k(x) with independent z_k ~ N(mu_k, diag var_k) is Gaussian (Eq. 1):

    mean = sum_k pi_k mu_k,     var = sum_k pi_k^2 var_k.

The coefficients pi_k(x) depend on row x only, from that row's member statistics:

* ``inverse_trace`` (Eq. 4): pi_k ∝ 1 / tr(Sigma_k(x)).
* ``inverse_cost`` (Eq. 8): pi_k ∝ 1 / (tr(Sigma_k(x)) + ||mu_k(x)||^2); the cost c_k is the per-model
  surrogate loss of Eq. 7. (After member normalisation ||mu_k||^2 = 1, so this is 1 / (tr + 1).)
* ``softmax_trace``: logit l_k = -tr(Sigma_k), so pi = softmax(-T tr) in the default ``sharpen`` mode
  (below): the exact minimiser of Eq. 7 plus an entropy term (1/T) * sum pi log pi (``divide`` mode:
  softmax(-tr / T), entropy weight T). The paper's Lagrangian step in App. A.1 for the *linear* Eq. 7 only
  fixes a vertex; the entropy-regularised form is the well-posed version described in the ICLR summary.
* ``softmax_precision``: logit l_k = sum_d 1/var_kd, the reference code's variant (kept as an option).

Temperature (the one place it is defined; ``TemperatureMode``). Every rule has a per-member logit l_k
(for the inverse rules l_k = -log c_k, so softmax(l) is Eq. 4 / Eq. 8 exactly):

* ``sharpen`` (default, the paper's semantics): pi = softmax(T * l). App. B.3.4 introduces T "to sharpen
  the ensemble coefficients" and fixes T > 1 (1.5 on MIRACL, App. B.3.4; 1.8 on MMTEB, App. B.4.4), so T
  multiplies: for the inverse rules pi_k ∝ c_k^-T; T = 1 is Eq. 4 / 8, T > 1 sharpens. For traces [1, 3]:
  Eq. 4 gives [0.75, 0.25], T = 1.5 gives [0.839, 0.161].
* ``divide``: pi = softmax(l / T), the usual softmax temperature and this library's earlier behaviour
  (T > 1 flattens: [0.675, 0.325] for the example). The authors' code (MLAI-Yonsei/UEC,
  ``exp_mteb/run_uec.py``, read through the project's code index) weights by ``softmax_precision`` in this
  mode: logits sum_d 1/var_d, divided by T, after dividing each member's variances by their squared L2 norm;
  this library follows the paper's equations by default (``inverse_trace``, ``sharpen``).

:func:`paper_temperature` gives T per task family. Each row's weights use only that row's member
statistics, so adding, removing or permuting other rows never changes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch

from ucse.core.gaussian import GaussianEmbeddings


class WeightRule(str, Enum):
    """Rule mapping each member's (mean, variance) at one input to its convolution coefficient."""

    inverse_trace = "inverse_trace"
    inverse_cost = "inverse_cost"
    softmax_trace = "softmax_trace"
    softmax_precision = "softmax_precision"


class TemperatureMode(str, Enum):
    """How T enters the coefficient softmax (see the module docstring)."""

    sharpen = "sharpen"  # pi = softmax(T * logit): the paper's "temperature to sharpen", T = 1 is Eq. 4/8
    divide = "divide"  # pi = softmax(logit / T): the conventional softmax temperature (earlier behaviour)


PAPER_TEMPERATURES = {"mteb": 1.8, "miracl": 1.5}  # App. B.4.4 (MMTEB) and App. B.3.4 (MIRACL)


def paper_temperature(family: str = "mteb") -> float:
    """The paper's fixed T for a task family: ``"mteb"`` 1.8 (App. B.4.4), ``"miracl"`` 1.5 (App. B.3.4)."""
    try:
        return PAPER_TEMPERATURES[family.lower()]
    except KeyError:
        raise ValueError(
            f"no paper temperature for family {family!r}; known: {sorted(PAPER_TEMPERATURES)}"
        ) from None


def coefficients(
    mean: torch.Tensor,
    var: torch.Tensor,
    rule: WeightRule | str,
    temperature: float = 1.0,
    mode: TemperatureMode | str = TemperatureMode.sharpen,
) -> torch.Tensor:
    """(N, K) float64 convolution coefficients of K members' (K, N, D) means and variances.

    ``temperature=0`` in ``sharpen`` mode gives equal weights (softmax of zeros): the ensemble's
    ``equal_weights_fallback`` scores it on validation beside the paper's T.
    """
    try:
        mode = TemperatureMode(mode)
    except ValueError:
        raise ValueError(
            f"temperature_mode={mode!r} invalid; choose one of {[m.value for m in TemperatureMode]}"
        ) from None
    floor_ok = temperature >= 0 if mode is TemperatureMode.sharpen else temperature > 0
    if not floor_ok or not math.isfinite(temperature):
        raise ValueError(
            f"temperature must be a finite number > 0 (0 allowed in sharpen mode), got {temperature}"
        )
    logits = coefficient_logits(mean, var, rule)
    scaled = logits * temperature if mode is TemperatureMode.sharpen else logits / temperature
    return torch.softmax(scaled, dim=1)


@dataclass
class ConvolutionResult:
    """Fused Gaussian embedding plus the coefficients that produced it.

    Attributes:
        fused: (N, D) Gaussian with mean sum_k pi_k mu_k and var sum_k pi_k^2 var_k.
        weights: (N, K) float32 coefficients pi_k(x), rows on the simplex (for the language heatmap).
        members: the K member ids, column order of ``weights``.
    """

    fused: GaussianEmbeddings
    weights: torch.Tensor
    members: list[str]


def _check_members(members: list[GaussianEmbeddings]) -> None:
    if len(members) == 0:
        raise ValueError("convolve() needs at least one member GaussianEmbeddings, got an empty list")
    for i, m in enumerate(members):
        if not isinstance(m, GaussianEmbeddings):
            raise TypeError(f"member {i} is a {type(m).__name__}, expected GaussianEmbeddings")
    # keyed by position too: two members of one name would otherwise share a key and skip the check
    dims = {f"#{i} {m.member}": m.dim for i, m in enumerate(members)}
    if len(set(dims.values())) > 1:
        raise ValueError(
            f"members have different dimensions {dims}; Gaussian convolution adds vectors so all members "
            "need the same D (the paper's stated limitation); truncate (Matryoshka) or pick same-D members"
        )
    counts = {f"#{i} {m.member}": m.n for i, m in enumerate(members)}
    if len(set(counts.values())) > 1:
        raise ValueError(f"members embed different numbers of rows {counts}; they must embed the same inputs")


def coefficient_logits(
    mean: torch.Tensor, var: torch.Tensor, rule: WeightRule | str, eps: float = 1e-30
) -> torch.Tensor:
    """Per-row, per-member logits (N, K) before the tempered softmax.

    Args:
        mean: (K, N, D) member means.
        var: (K, N, D) member variances.
        rule: the weighting rule.
        eps: floor on traces / variances so zero variance gives a large finite logit, not inf/NaN.

    Returns:
        (N, K) float64 logits; pi = softmax(T * logits, dim=1) (``sharpen``) or softmax(logits / T, dim=1)
        (``divide``).
    """
    try:
        rule = WeightRule(rule)
    except ValueError:
        raise ValueError(f"rule={rule!r} invalid; choose one of {[r.value for r in WeightRule]}") from None
    var = var.double()
    trace = var.sum(-1).T  # (N, K)
    if rule is WeightRule.inverse_trace:
        return -trace.clamp_min(eps).log()
    if rule is WeightRule.inverse_cost:
        cost = trace + (mean.double() ** 2).sum(-1).T  # (N, K) Eq. 7 cost c_k
        return -cost.clamp_min(eps).log()
    if rule is WeightRule.softmax_trace:
        return -trace
    return (1.0 / var.clamp_min(eps)).sum(-1).T  # softmax_precision (reference code)


def convolve(
    members: list[GaussianEmbeddings],
    rule: WeightRule | str = WeightRule.inverse_trace,
    temperature: float = 1.0,
    normalize: bool = True,
    temperature_mode: TemperatureMode | str = TemperatureMode.sharpen,
) -> ConvolutionResult:
    """Fuse K members' Gaussian embeddings of the same N inputs into one Gaussian per input.

    Args:
        members: K GaussianEmbeddings, each (N, D).
        rule: coefficient rule (see module docstring).
        temperature: T > 0 of the tempered softmax over members.
        temperature_mode: ``sharpen`` (paper: softmax(T * logit)) or ``divide`` (softmax(logit / T)).
        normalize: L2-normalise each member's means and rescale its variances by 1/||mu||^2 first (the
            paper's setting); disable only for members already normalised.

    Returns:
        ConvolutionResult with the fused (N, D) Gaussian and the (N, K) weights.
    """
    _check_members(members)
    if normalize:
        members = [m.normalized() for m in members]
    mean = torch.stack([m.mean for m in members])  # (K, N, D)
    var = torch.stack([m.var for m in members])  # (K, N, D)
    weights = coefficients(mean, var, rule, temperature, temperature_mode)  # (N, K)
    w = weights.T.to(mean.dtype)[..., None]  # (K, N, 1)
    fused_mean = (w * mean).sum(0)  # (N, D)
    fused_var = (w**2 * var).sum(0)  # (N, D): independent members, Var(sum a_k z_k) = sum a_k^2 Var z_k
    names = [m.member for m in members]
    meta = {
        "member": "uec(" + ",".join(names) + ")",
        "members": names,
        "rule": WeightRule(rule).value,
        "temperature": temperature,
        "temperature_mode": TemperatureMode(temperature_mode).value,
        "normalisation": "l2_mean_var_rescaled" if normalize else members[0].meta.get("normalisation"),
        "count": mean.shape[1],
        "dim": mean.shape[2],
    }
    return ConvolutionResult(GaussianEmbeddings(fused_mean, fused_var, meta), weights.float(), names)
