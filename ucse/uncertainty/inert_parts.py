"""Which parts of a fitted profile answer the same for every text, because the held-out texts were too few.

A split-conformal quantile over n held-out texts exists only from ``rows_to_keep(level)`` texts on: below it
the prediction sets' quantile is +inf (every set holds every label) and the out-of-scope threshold is +inf (no
text is flagged). Both are the documented, valid answers of the rules, but a user who reads a set or a flag
must be told that it carries nothing here, and what setting would make it carry something.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from ucse.config.run_layout import profile_repair, run_of_head, wants_profile
from ucse.uncertainty.keep_threshold import keepable_tpr, mixed_as, rows_to_keep

log = logging.getLogger(__name__)


def inert_sets(profile: Any) -> str | None:
    """Why every prediction set holds every label, or ``None`` when the sets' quantile is finite somewhere."""
    q, c = profile.qhat, profile.conformal
    if c is None or q is None or any(math.isfinite(v) for v in (q if isinstance(q, list) else [q])):
        return None
    n = profile.info.get("n_validation")
    text = (
        f"every prediction set holds every label: a set at alpha {c.alpha:g} needs "
        f"{rows_to_keep(1 - c.alpha)}+ held-out texts"
    )
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        alpha = round(1 - keepable_tpr(n), 2)
        text += f", {n} here (uncertainty.conformal.alpha={alpha:.2f} sets one, or more labelled data)"
    return text


def inert_flag(profile: Any) -> str | None:
    """Why the out-of-scope flag flags no text; ``None`` when its threshold is finite or set by examples."""
    o = profile.ood
    if o is None or math.isfinite(o.threshold) or o.info.get("threshold_from") == "examples":
        return None
    said = mixed_as(o.info)
    if said:
        tpr = o.info.get("keepable_tpr")
        lower = f"uncertainty.ood.tpr={tpr:.2f}" if isinstance(tpr, float) else "a lower uncertainty.ood.tpr"
        return (
            "the out-of-scope flag flags no text: the held-out texts are too few to keep "
            f"{100 * o.tpr:.0f} % of in-scope texts {said} ({lower} sets one)"
        )
    n = o.info.get("n_heldout")
    text = (
        f"the out-of-scope flag flags no text: a threshold keeping {100 * o.tpr:.0f} % of in-scope texts "
        f"needs {rows_to_keep(o.tpr)}+ held-out texts"
    )
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        text += f", {n} here (uncertainty.ood.tpr={keepable_tpr(n):.2f} sets one; so do out-of-scope examples"
        text += " given at training, data.ood_path=)"
    return text


def inert_messages(profile: Any) -> list[str]:
    """:func:`inert_sets` and :func:`inert_flag`, those that apply (none for ``None``)."""
    if profile is None:
        return []
    return [m for m in (inert_sets(profile), inert_flag(profile)) if m is not None]


def warn_if_inert(profile: Any, head_dir: str | Path) -> None:
    """Say once, where predictions are served, which parts answer the same for every text."""
    for message in inert_messages(profile):
        log.warning("%s: %s", head_dir, message)


def unfitted_message(profile: Any, head_dir: str | Path) -> str | None:
    """Why a run's head is served without the profile its training was to fit (``None``: nothing missing).

    A run writes its head and results, then fits the profile: stopped in between (Ctrl-C, a crash, a killed
    job) it looks finished, and its predictions carry the plain softmax with no abstention, sets or flag.
    A head outside a run, or a run trained with ``uncertainty.enabled=false``, has nothing missing.
    """
    run = None if profile.fitted else run_of_head(head_dir)
    if run is None or not wants_profile(run, if_unreadable=True):  # unreadable: it may well be missing
        return None
    from ucse.data.run_rows import intact as rows_intact  # here: `datasets` is no import of predict's

    return (
        f"{run} has no uncertainty profile (the run stopped before fitting it, or was trained by "
        "ucse.training.train, which fits none): confidences are the plain softmax, and no text abstains or "
        f"gets a prediction set or an out-of-scope flag; {profile_repair(run, rows_intact(run))}."
    )


def warn_if_unfitted(profile: Any, head_dir: str | Path) -> None:
    """Say it where predictions are served (:func:`unfitted_message`)."""
    message = unfitted_message(profile, head_dir)
    if message is not None:
        log.warning("%s", message)
