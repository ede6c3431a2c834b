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
from typing import Any

import numpy as np

from ucse.config.uncertainty import AbstainConfig, Uncertifiable
from ucse.uncertainty.selective import (
    AbstainThreshold,
    lowest_certifiable_error,
    offered_target,
    threshold_for_coverage,
    threshold_for_error,
)

log = logging.getLogger(__name__)


def setting_hint(run: str | Path | None, setting: str) -> str:
    """How a user changes ``setting`` (``key=value``) of a trained run, as a clause of a message.

    ``ucse calibrate`` where the run folder can reread its data; otherwise (``run`` is None: the estimator's
    scratch folder, a run trained on rows passed in memory, or no run at all) the setting at training.
    """
    if run is None:
        return f"retraining with `{setting}`"
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
    log.warning(
        "no threshold certifies error <= %.3f at delta %.2f on %d held-out texts: %s. With these "
        "texts no target below %.3f can be certified; %s, or uncertainty.abstain.coverage=0.9 "
        "(answers ~90 %%, no error bound) or more labelled data set one",
        a.target_error,
        a.delta,
        len(u),
        "no text will abstain" if answer else "every text will abstain",
        floor,
        "none below 0.99 is"
        if offer is None
        else f"the smallest that is, {offer:.2f}: "
        + setting_hint(run, f"uncertainty.abstain.target_error={offer:.2f}"),
    )
    return rule, {"lowest_certifiable_error": floor, "offered_target_error": offer}
