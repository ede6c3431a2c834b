"""The abstention rule a profile ships: ``uncertainty.abstain`` turned into a threshold on held-out rows.

Split from :mod:`ucse.uncertainty.fit`: the choice between the coverage rule and the certified error target
(selection with guaranteed risk, :mod:`ucse.uncertainty.selective`), and what a user is told and offered when
no threshold certifies the target with the rows at hand.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ucse.config.run_layout import run_of_head
from ucse.config.uncertainty import AbstainConfig, Uncertifiable
from ucse.uncertainty.conformal import order_rank
from ucse.uncertainty.selective import (
    AbstainThreshold,
    answer_all_bound,
    lowest_certifiable_error,
    offered_target,
    threshold_for_coverage,
    threshold_for_error,
)

if TYPE_CHECKING:
    from ucse.uncertainty.profile import UncertaintyProfile

log = logging.getLogger(__name__)


def setting_hint(run: str | Path | None, setting: str) -> str:
    """How a user changes ``setting`` (``key=value``) of a trained run, as a clause of a message.

    ``ucse calibrate`` where the run folder can reread its data; otherwise (``run`` is None: the estimator's
    scratch folder, a run trained on rows passed in memory, or no run at all) the setting at training.
    """
    if run is None:  # from Python: the estimator takes the setting as an override, in Python's spelling
        key, _, value = setting.partition("=")
        try:
            shown = repr(float(value)) if value not in ("nan", "inf", "-inf") else repr(value)
        except ValueError:
            shown = repr(value)
        return f"retraining with `{setting}` (UcseClassifier: overrides={{{key!r}: {shown}}})"
    return f"`ucse calibrate run={run} {setting}`"


def recalibration_run(info: Any, run: str | Path) -> str | Path | None:
    """``run``, or None where a profile's ``info`` says ``ucse calibrate`` cannot serve the run.

    ``info["recalibrate"]`` is recorded when the profile is fitted; a profile read back without it (older, or
    damaged: it is untrusted) keeps the command.
    """
    return None if isinstance(info, dict) and info.get("recalibrate") is False else run


def fit_abstain(
    u: np.ndarray, correct: np.ndarray, a: AbstainConfig, delta: float, run: str | Path | None
) -> tuple[AbstainThreshold | None, dict[str, Any]]:
    """The abstention threshold of ``a`` on N held-out rows.

    Args:
        u: (N,) the default score, higher = more uncertain.
        correct: (N,) bool, whether each row's prediction was right.
        a: the abstention settings.
        delta: the failure probability each SGR test is run at (``a.delta``, divided over the score
            candidates when the score was chosen on the same rows).
        run: the run folder, named in the ``ucse calibrate`` command the warning offers (None: the warning
            offers the setting for the next training, :func:`setting_hint`).

    Returns:
        (the threshold, or ``None`` without a rule; what goes into the profile's ``info`` when the target
        cannot be certified: ``lowest_certifiable_error`` and ``offered_target_error``).
    """
    if a.coverage is not None:
        return threshold_for_coverage(u, correct, a.coverage), {}
    if a.target_error is None:
        return None, {}
    rule = dataclasses.replace(threshold_for_error(u, correct, a.target_error, delta), delta=a.delta)
    if rule.achievable:
        return rule, {}
    answer = a.if_uncertifiable == Uncertifiable.answer
    if answer:  # no threshold: never abstain (the threshold -inf of the rule would abstain on all)
        rule = dataclasses.replace(
            rule, threshold=math.inf, val_coverage=1.0, val_error=float(1 - correct.mean())
        )
    floor = lowest_certifiable_error(u, correct, delta)
    offer = offered_target(u, correct, delta, floor)
    everything = answer_all_bound(correct, delta)
    if offer is None and everything < 0.99:  # certified only by answering all: no abstention setting to offer
        what = (
            f"No target that leaves any text out can be certified with these texts (they certify only an "
            f"error <= {math.ceil(everything * 100 - 1e-9) / 100:.2f} with every text answered)"
        )
    elif offer is None:
        what = "No target up to 0.99 can be certified with these texts"
    else:
        hint = setting_hint(run, f"uncertainty.abstain.target_error={offer:.2f}")
        what = f"The smallest target they certify is {offer:.2f} ({hint})"
    log.warning(
        "no threshold certifies error <= %.3f at delta %.2f on %d held-out texts: %s. %s; %s; more "
        "labelled data certifies smaller targets",
        a.target_error,
        a.delta,
        len(u),
        "no text will abstain" if answer else "every text will abstain",
        what,
        coverage_hint(len(u)),
    )
    return rule, {"lowest_certifiable_error": floor, "offered_target_error": offer}


OFFERED_COVERAGE = 0.9
"""The ``uncertainty.abstain.coverage`` offered where no error target can be certified."""


def coverage_leaves_out(n: int, coverage: float = OFFERED_COVERAGE) -> bool:
    """Whether the coverage rule on ``n`` held-out texts leaves any of them out.

    Its rank ceil((n + 1) c) is then below n; else the threshold is their largest score (or above it), and
    texts like them are all answered.
    """
    return order_rank(n, coverage) < n


def coverage_hint(n: int, coverage: float = OFFERED_COVERAGE) -> str:
    """What ``uncertainty.abstain.coverage`` does with ``n`` held-out texts (little, on very few)."""
    setting = f"uncertainty.abstain.coverage={coverage:g} answers"
    if coverage_leaves_out(n, coverage):
        return f"{setting} ~{coverage:.0%} of texts instead (no error bound)"
    return f"{setting} every text like these {n} (too few held-out texts to leave {1 - coverage:.0%} out)"


def uncertifiable_fix(profile: UncertaintyProfile, run: str | Path | None) -> str | None:  # None: retrain
    """What to run when the saved abstention rule certified no threshold (``None`` when it did)."""
    a = profile.abstain
    if a is None or a.achievable:
        return None
    where = recalibration_run(profile.info, run)
    offer = profile.info.get("offered_target_error")
    if isinstance(offer, float) and math.isfinite(offer):
        setting = f"uncertainty.abstain.target_error={offer:.2f}"
        return f"{setting_hint(where, setting)} sets the smallest target these held-out texts certify"
    n = profile.info.get("n_validation")
    if isinstance(n, int) and not coverage_leaves_out(n):
        return f"with {n} held-out texts no abstention setting changes that"
    setting = f"uncertainty.abstain.coverage={OFFERED_COVERAGE:g}"
    return f"{setting_hint(where, setting)} abstains on ~{100 * (1 - OFFERED_COVERAGE):.0f} % instead"


def uncertifiable_outcome(profile: UncertaintyProfile) -> str:
    """What an uncertified abstention rule does to every text: its threshold is +inf or -inf."""
    return "no text abstains" if profile.abstain.threshold == math.inf else "every text abstains"


def uncertifiable_message(profile: UncertaintyProfile, run: str | Path | None) -> str | None:
    """The one sentence ``predict`` and the Python API say when no abstention threshold was certified."""
    fix = uncertifiable_fix(profile, run)
    if fix is None:
        return None
    a = profile.abstain
    outcome = uncertifiable_outcome(profile)
    return (
        f"no abstention threshold was certifiable on the held-out texts (target error {a.target}), so "
        f"{outcome}; {fix} (or retrain with more labelled data)"
    )


def warn_if_uncertifiable(profile: UncertaintyProfile, head_dir: str | Path) -> None:
    """Say once, where predictions are served, that the saved abstention rule certified no threshold."""
    message = uncertifiable_message(profile, run_of_head(head_dir))  # not the parent: an export is no run
    if message is not None:
        log.warning("%s: %s", head_dir, message)
