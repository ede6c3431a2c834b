"""The parameter-merging rows of an ensemble evaluation (uniform, weighted, task arithmetic).

Weights and alpha are chosen on the task's validation data (as the paper's App. B.4.4 grid search), each
candidate being a merged model that encodes the validation texts; the chosen merge is then scored by
mteb like a member. Only for members that are backbones of one architecture (Laplace members).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ucse.uec.ensemble import Variant, VariantScorer
from ucse.uec.fusion import PAPER_ALPHAS, simplex_grid
from ucse.uec.laplace_member import LaplaceMember
from ucse.uec.merging import MergedMember, MergeError, merge_states, task_arithmetic_states

logger = logging.getLogger(__name__)
MERGES = ("uniform", "weighted", "task_arithmetic")


MERGE_VALIDATION_PAIRS = 500  # each merge candidate re-encodes these: the first 500 STS validation pairs


def _validation_score(member: MergedMember, task: Any) -> float:
    means, score_fn = task.validation_means([member], MERGE_VALIDATION_PAIRS)
    return float(score_fn(means[0]))


def merge_members(merges: list[str], members: list[Any], task: Any, weight_step: float) -> dict[str, tuple]:
    """Name -> (MergedMember, note) for each requested merge; explains in the note what was skipped."""
    bad = [m for m in merges if m not in MERGES]
    if bad:
        raise ValueError(f"merges {bad} unknown; choose from {list(MERGES)}")
    if not merges:
        return {}
    if not all(isinstance(m, LaplaceMember) for m in members) or len(members) < 2:
        logger.warning("parameter merging needs >= 2 backbone (Laplace) members; merge rows skipped")
        return {}
    backbones = [m.backbone for m in members]
    states = [{k: v.detach().cpu() for k, v in b.model.state_dict().items()} for b in backbones]
    names = [m.member_id for m in members]
    try:
        merge_states(states, [1.0 / len(states)] * len(states), names)  # architecture check
    except MergeError as err:
        logger.warning("%s; merge rows skipped", err)
        return {}
    out: dict[str, tuple] = {}

    def build(weights: list[float], tag: str) -> MergedMember:
        state = merge_states(states, weights, names)
        return MergedMember(backbones, state, tag, {"weights": [round(w, 6) for w in weights]})

    if "uniform" in merges:
        out["merge_uniform"] = (build([1.0 / len(states)] * len(states), "merge_uniform"), "uniform weights")
    can_tune = task.has_validation
    if "weighted" in merges and can_tune:
        start, scores = time.perf_counter(), {}
        for w in simplex_grid(len(states), weight_step, weight_step).tolist():
            scores[tuple(w)] = _validation_score(build(w, "merge_weighted"), task)
        best = max(scores, key=scores.get)
        note = f"weights {[round(x, 2) for x in best]} on validation ({time.perf_counter() - start:.0f} s)"
        out["merge_weighted"] = (build(list(best), "merge_weighted"), note)
    if "task_arithmetic" in merges and can_tune:
        # theta_1 + alpha (theta_2 - theta_1): the first member is the base, the second gives the task vector.
        scores = {}
        for alpha in PAPER_ALPHAS:
            state = task_arithmetic_states(states[0], states[1], states[0], alpha)
            member = MergedMember(backbones, state, "task_arithmetic", {"alpha": alpha})
            scores[alpha] = (_validation_score(member, task), member)
        alpha = max(scores, key=lambda a: scores[a][0])
        out["task_arithmetic"] = (scores[alpha][1], f"alpha {alpha:g} on validation")
    return out


def merge_scorer(member: MergedMember) -> VariantScorer:
    """Cosine scorer of a merged (one-member) model."""
    return VariantScorer(Variant.member, dim=member.dim, n_members=1, member=0)
