"""Out-of-scope examples (``data.ood_path``) set the out-of-scope threshold.

Without examples the threshold keeps ``tpr`` of held-out in-scope texts: a guarantee about in-scope texts, and
nothing about how many out-of-scope ones are caught. A practitioner with examples of what users really send
(CLINC150's "oos" class, an intent bot's logged fallbacks) can do better: the threshold t that maximises the
balanced accuracy

    J(t) = P_in(score <= t) + P_out(score > t) - 1          (Youden's J)

over the held-out in-scope scores (the ones the ``tpr`` threshold is set on: validation, or cross-fitted when
the head was refitted on every labelled row) and the examples' scores. Ties go to the largest t (keep more
in-scope texts; under ``calibration.prior=target`` the held-out rows are weighted to the target mix, under
``balanced`` to every label alike). The
examples are in-sample for this choice, so their flagged share is optimistic on few
examples: the record says how many there were.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ucse.data.texts import read_texts


def read_ood_texts(path: str | Path, text_column: str = "text") -> list[str]:
    """The texts of an out-of-scope examples file: ``.txt`` (one per line) or a table with ``text_column``.

    Raises:
        DataError: a missing column (listing the columns found), no text, or a blank / non-string text
            (naming the file and line).
        FileNotFoundError: the file does not exist.
    """
    return read_texts(str(path), text_column, "data.ood_path", "data.text_column")


def youden_threshold(
    inscope: torch.Tensor, outscope: torch.Tensor, weights: torch.Tensor | None = None
) -> tuple[float, dict[str, Any]]:
    """The threshold maximising in-scope kept + out-of-scope flagged (a text is flagged when score > t).

    Args:
        inscope: (N,) held-out in-scope scores.
        outscope: (M,) out-of-scope examples' scores.
        weights: (N,) the in-scope rows' weights (a target class mix), or ``None``: equal.

    Returns:
        (t, a record: the in-scope share kept and the examples' share flagged at t, J, the example count).
    """
    a, order = torch.sort(inscope.double())
    b = torch.sort(outscope.double()).values
    w = torch.ones_like(a) if weights is None else weights.double()[order]  # (N,) in sorted order
    mass = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(w, 0)]) / w.sum()  # (N + 1,)
    cands = torch.unique(torch.cat([a, b]))  # every distinct score is a cut point; sorted ascending
    kept = mass[torch.searchsorted(a, cands, right=True)]  # (K,) (weighted) share of in-scope <= t
    flagged = 1.0 - torch.searchsorted(b, cands, right=True).double() / len(b)  # share of examples > t
    j = kept + flagged - 1.0
    best = int(torch.nonzero(j == j.max()).max())  # the largest t among the best
    record = {
        "threshold_from": "examples",
        "n_examples": len(b),
        "inscope_kept": float(kept[best]),
        "examples_flagged": float(flagged[best]),
        "youden_j": float(j[best]),
    }
    return float(cands[best]), record


def apply_examples(det: Any, encoder: Any, calibrator: Any, texts: list[str], tune: bool) -> dict[str, Any]:
    """Score the examples once; ``tune``: set ``det``'s threshold from them, else record their flagged share.

    Args:
        det: a fitted :class:`~ucse.uncertainty.ood_detector.OodDetector` (``heldout_scores`` set to tune).
        encoder: the run's :class:`~ucse.core.encoder.UcseEncoder` (backbone + head).
        calibrator: the profile's calibrator (the probability scores read calibrated probabilities).
        texts: the out-of-scope examples.
        tune: ``uncertainty.ood.threshold`` is ``examples`` (or ``auto``); ``False`` keeps the ``tpr`` rule.

    Returns:
        What was added to ``det.info``.
    """
    if tune and det.heldout_scores is None:
        raise ValueError("the detector has no held-out in-scope scores (it was loaded, not fitted)")
    out = encoder.run_texts(texts)
    scores = det.scores(det.features(out.mean, out.pooled), calibrator.probs(out.logits), out.logits)
    if tune:
        det.threshold, record = youden_threshold(det.heldout_scores, scores, det.heldout_weights)
    else:
        record = {"examples_flagged": float((scores > det.threshold).double().mean())}
    det.info.update(record)
    return record
