"""What UEC's weights cannot learn from one member alone, chosen on the task family's validation split.

Each member's own variance scale (``ucse/uec/calibration.py``) is fitted on that member's held-out positive
pairs, so it normalises the member's traces to *its own* spread: two members of different quality come out
with near-equal traces and UEC's weights stay near-uniform (docs/RESULTS_UEC.md). Two choices fix what the
member cannot see, both by the validation score of the UEC row itself (never the test split):

- **member scales** (``member_scales: validation``): relative scales s_k (s_1 = 1, the others on a log
  grid) multiplying member k's variances, so the weight pi_k(x) = softmax_k(-T log(s_k tr Sigma_k(x)))
  (Eq. 4) gains a per-member offset beside its per-input term. Chosen jointly with the probit beta; STS is
  scored by Spearman on the validation pairs, retrieval by nDCG@10 on the train queries (the family's own
  validation signal). Classification heads use the label NLL instead (``ucse/uec/label_scales.py``).
- **space** (``space: auto``): Laplace members in the scored space (y / ||y||, the vector the model's cosine
  sees) or the raw one (y before the normalisation). In the scored space the Jacobian of the normalisation
  puts the variance in the tangent plane of the unit mean, so the probit term of Eq. 6 hardly changes a
  ranking; in the raw space the radial variance reaches it. Both are built; the better UEC row is kept.

Grids, not optimisers: K is a handful of members, and a softmax over members has plateaus a local search
stalls on; each grid point is one convolution and one validation score of precomputed Gaussians.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from ucse.config import TaskType
from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.config import EnsembleConfig, MemberKind, MemberScales, Space
from ucse.uec.ensemble import UecEnsemble, Variant
from ucse.uec.ensemble_members import build_members
from ucse.uec.label_scales import SCALE_GRID, fused_nll, head_outputs
from ucse.uec.members import HeadMember


class FixedMember:
    """A member whose Gaussians of one text list are computed already (variances times ``scale``).

    Args:
        gaussian: (N, D) Gaussians of the validation texts.
        member_id: name.
        scale: variance multiplier.
    """

    def __init__(self, gaussian: GaussianEmbeddings, member_id: str, scale: float = 1.0) -> None:
        self.gaussian, self.member_id, self.scale = gaussian, member_id, float(scale)

    @property
    def dim(self) -> int:
        """Embedding dimension D."""
        return self.gaussian.dim

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """The stored Gaussians (``texts`` must be the list they were computed for)."""
        if len(texts) != self.gaussian.n:
            raise ValueError(
                f"{self.member_id}: holds {self.gaussian.n} validation rows, asked for {len(texts)}"
            )
        g = self.gaussian
        return GaussianEmbeddings(g.mean, g.var * self.scale, g.meta)


def uec_validation(
    gaussians: Sequence[GaussianEmbeddings],
    task: Any,
    cfg: EnsembleConfig,
    temperature: float,
    scales: Sequence[float] | None = None,
) -> tuple[float, float]:
    """Best validation score of the UEC row over the beta grid (``cfg.beta`` when fixed), and that beta.

    Args:
        gaussians: K (N, D) aligned member Gaussians of ``task.validation_texts()``.
        task: the :class:`~ucse.uec.ensemble_task.EnsembleTask` (its ``validate``).
        cfg: the ensemble config (rule, metric, temperature mode, beta grid).
        temperature: UEC's T.
        scales: K variance multipliers (default all 1).
    """
    scales = [1.0] * len(gaussians) if scales is None else list(scales)
    fixed = [FixedMember(g, f"m{k}", s) for k, (g, s) in enumerate(zip(gaussians, scales))]
    ens = UecEnsemble(fixed, cfg.rule, temperature, cfg.similarity, temperature_mode=cfg.temperature_mode)
    scorer = ens.scorer(Variant.uec)
    best, best_beta = -math.inf, math.nan
    for beta in [cfg.beta] if cfg.beta is not None else cfg.beta_grid:
        scorer.beta = float(beta)
        score = task.validate(scorer, fixed)
        if score > best + 1e-12:
            best, best_beta = score, float(beta)
    return best, best_beta


def fit_validation_scales(
    gaussians: Sequence[GaussianEmbeddings],
    task: Any,
    cfg: EnsembleConfig,
    temperature: float,
    grid: Sequence[float] = SCALE_GRID,
) -> tuple[list[float], dict]:
    """Relative member scales (first fixed at 1) maximising the UEC row's validation score.

    Exhaustive over ``len(grid) ** (K - 1)`` scale vectors, each with its best beta; ties go to the vector
    nearest all-ones (sum of |log s_k|), so scales move only when the validation score says so.

    Returns:
        (the K scales, a record: validation score and beta before (all ones) and after).
    """
    results: dict[tuple[float, ...], tuple[float, float]] = {}
    for rest in itertools.product(grid, repeat=len(gaussians) - 1):
        scales = (1.0, *map(float, rest))
        results[scales] = uec_validation(gaussians, task, cfg, temperature, scales)
    best = max(results, key=lambda s: (round(results[s][0], 10), -sum(abs(math.log(x)) for x in s)))
    ones = tuple([1.0] * len(gaussians))
    before = results[ones] if ones in results else uec_validation(gaussians, task, cfg, temperature)
    record = {
        "validation_before": before[0],
        "beta_before": before[1],
        "validation_after": results[best][0],
        "beta_after": results[best][1],
        "grid_points": len(results),
    }
    return list(best), record


def choose_members(
    ens_cfg: EnsembleConfig, task_cfg: Any, task: Any, root: Any, device: Any, temperature: float
) -> tuple[list[Any], list[Any], dict, dict, dict]:
    """:func:`~ucse.uec.ensemble_members.build_members` plus the space and scales chosen on validation.

    Args:
        ens_cfg: the ensemble config (``space``, ``member_scales``).
        task_cfg: the evaluated task's config.
        task: its :class:`~ucse.uec.ensemble_task.EnsembleTask` (validation texts and scorer).
        root: data root.
        device: where backbones run.
        temperature: UEC's T.

    Returns:
        (members as built, members as fused, fit records, alignment records, the choice's record).
    """
    laplace = any(m.kind is MemberKind.laplace for m in ens_cfg.members)
    tuned = task.has_validation and task.type is not TaskType.classification
    if ens_cfg.space == Space.auto.value:
        spaces = [Space.scored, Space.raw] if laplace and tuned else [Space.scored]
    else:
        spaces = [Space(ens_cfg.space)]
    by_validation = (
        ens_cfg.member_scales == MemberScales.validation.value and tuned and len(ens_cfg.members) > 1
    )
    candidates: dict[Space, tuple] = {}
    for space in spaces:
        built, members, fit_info, align_info = build_members(
            ens_cfg, task_cfg, root, device, temperature, space
        )
        record: dict = {"space": space.value}
        score, gauss = math.nan, None
        if by_validation or len(spaces) > 1:
            gauss = [m.encode(task.validation_texts()) for m in members]
            if by_validation:
                scales, fit = fit_validation_scales(gauss, task, ens_cfg, temperature)
                for m, s in zip(built, scales):
                    m.variance_scale *= s  # aligned wrappers read the inner member's scale
                    fit_info[m.member_id]["validation_scale"] = s
                record.update(fit, scales=scales)
                score = fit["validation_after"]
            else:
                score, beta = uec_validation(gauss, task, ens_cfg, temperature)
                record.update(validation=score, beta=beta)
        candidates[space] = (built, members, fit_info, align_info, record, score, gauss)
    chosen = max(candidates, key=lambda sp: candidates[sp][5])  # ties and nan keep the first (scored)
    built, members, fit_info, align_info, record, score, gauss = candidates[chosen]
    if len(spaces) > 1:
        record["space_validation"] = {sp.value: c[5] for sp, c in candidates.items()}
    if ens_cfg.equal_weights_fallback and len(ens_cfg.members) > 1:
        if tuned:  # by the family's validation score
            if gauss is None:  # not encoded above (one space, no member scales)
                gauss = [m.encode(task.validation_texts()) for m in members]
                score, _ = uec_validation(gauss, task, ens_cfg, temperature)
            # T = 0: equal weights (softmax of zeros); the chosen scales still scale the fused variance the
            # probit reads (``gauss`` was encoded before they were applied to the members)
            equal, beta = uec_validation(gauss, task, ens_cfg, 0.0, record.get("scales"))
            record["equal_weights"] = {"validation": equal, "beta": beta, "uec_validation": score}
        elif all(isinstance(m, HeadMember) for m in built):  # heads: by the fused label NLL, lower is better
            heads, probs, labels = head_outputs(members, built, root)  # the scales fitted above included
            ones = [1.0] * len(built)
            nll, equal_nll = (
                fused_nll(heads, probs, labels, ones, ens_cfg.rule, t, ens_cfg.temperature_mode)
                for t in (temperature, 0.0)
            )
            record["equal_weights"] = {"validation_nll": equal_nll, "uec_validation_nll": nll}
            score, equal = -nll, -equal_nll
        else:
            return built, members, fit_info, align_info, record
        # strictly better only: a tie keeps the paper's weights
        record["temperature"] = 0.0 if equal > score + 1e-12 else temperature
    return built, members, fit_info, align_info, record
