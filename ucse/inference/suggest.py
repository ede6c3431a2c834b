"""The unlabelled texts to label next for a trained run: ``ucse suggest`` and :func:`suggest_to_label`.

The run's model reads the texts once (backbone and head, as ``predict``); :mod:`ucse.uncertainty.acquisition`
picks the ones to label. Copies of a text (the same words up to case and punctuation) are offered once: the
first stands for all. Texts the run's out-of-scope flag raises are left out by default: no label of the run
fits them, so a labeller could only skip them (a trial's first picks were "What is the capital of France?"
and an emoji, the model's least sure texts because they are none of its labels). Each row carries the
model's guess, so a labeller sees what the model would answer, and an empty label column under the run's own
column names, so the file, once filled in, can be added to the training file as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ucse.data.duplicates import text_key
from ucse.inference.config import SUGGEST_FIELDS
from ucse.uncertainty.acquisition import Strategy, margins, select_to_label

if TYPE_CHECKING:
    from ucse.inference.classifier import UcseClassifier


@dataclass
class Suggestions:
    """The texts to label next, the least sure first, and what the model says of them.

    Attributes:
        positions: (k,) the picked texts' positions in the input.
        guess: (k,) the label the model gives each (values of the classifier's ``classes_``).
        confidence: (k,) its calibrated probability.
        margin: (k,) the gap between the two likeliest labels' probabilities.
        copies: input texts left out as copies of an earlier one.
        out_of_scope: distinct texts left out because the out-of-scope flag raised them.
        labelled: input texts left out as already labelled (or copies of a labelled text).
        known: input texts left out as copies of ``known_texts`` (the run's own labelled rows).
    """

    positions: np.ndarray
    guess: np.ndarray
    confidence: np.ndarray
    margin: np.ndarray
    copies: int
    out_of_scope: int
    labelled: int = 0
    known: int = 0


def suggest_to_label(
    clf: UcseClassifier,
    texts: list[str],
    n: int,
    strategy: Strategy | str = Strategy.diverse_margin,
    seed: int = 0,
    include_out_of_scope: bool = False,
    progress: bool = False,
    labelled: np.ndarray | None = None,
    known_texts: Sequence[str] | None = None,
) -> Suggestions:
    """The texts to label next, the least sure first.

    Args:
        clf: a fitted (or loaded) :class:`~ucse.inference.classifier.UcseClassifier`.
        texts: the unlabelled texts.
        n: how many to pick (fewer when fewer distinct texts are left).
        strategy: ``diverse_margin`` (default), ``margin`` or ``random`` (the baseline to compare with).
        seed: seeds ``random`` and the clustering.
        include_out_of_scope: keep the texts the run's out-of-scope flag raises among the candidates.
        progress: show a progress bar on long inputs.
        labelled: (N,) bool, texts that already have a label (a table whose label column is filled in on
            some rows): left out, and so are their copies among the others.
        known_texts: texts labelled elsewhere (``ucse suggest`` passes every row of the run's own data): input
            texts that are copies of one (up to case and punctuation) are left out. A trial's second round on
            the same pool was offered 6 texts it had labelled and trained on in the first.

    Returns:
        :class:`Suggestions` (no picks where every text is left out).
    """
    if n < 1:
        raise ValueError(f"n={n}: pick at least one text.")
    if labelled is not None and len(labelled) != len(texts):
        raise ValueError(f"labelled has {len(labelled)} entries for {len(texts)} texts.")
    strategy = Strategy(strategy)
    keys = [text_key(t) for t in texts]
    done = set() if labelled is None else {k for k, known in zip(keys, labelled) if known}
    elsewhere = {text_key(t) for t in known_texts or ()} - done  # a labelled row of the input counts there
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        if k not in done and k not in elsewhere:
            first.setdefault(k, i)
    left = sum(k in done for k in keys)  # labelled rows and their unlabelled copies
    known = sum(k in elsewhere for k in keys)
    unique = np.fromiter(first.values(), dtype=np.int64, count=len(first))  # (U,) a position per text
    if not len(unique):
        empty = np.zeros(0)
        return Suggestions(np.zeros(0, dtype=np.int64), clf.classes_[:0], empty, empty, 0, 0, left, known)
    out = clf.encode_gaussian([texts[i] for i in unique], progress=progress)
    decided = clf.profile_.apply(out.mean, out.var, out.logits, pooled=out.pooled)
    keep = np.ones(len(unique), dtype=bool)  # (U,)
    if decided.ood is not None and not include_out_of_scope:
        keep = ~np.asarray(decided.ood, dtype=bool)
    rows = np.flatnonzero(keep)  # (K,) candidates among unique
    features = out.pooled if out.pooled is not None else out.mean  # the backbone's view: no head shaped it
    picked = (
        rows[select_to_label(decided.probs[rows], features[rows], n, strategy, seed)] if len(rows) else rows
    )
    ordered = clf.classes_[np.argsort(clf.columns_)]  # head column -> label
    return Suggestions(
        positions=unique[picked],
        guess=ordered[decided.prediction[picked]],
        confidence=np.asarray(decided.confidence, dtype=np.float64)[picked],
        margin=margins(decided.probs[picked]),
        copies=len(texts) - left - known - len(unique),
        out_of_scope=int(len(unique) - len(rows)),
        labelled=left,
        known=known,
    )


def run_ood_examples(run: Path) -> list[str]:
    """The out-of-scope examples a run was trained with (``data.ood_path``), where that file is still there.

    They are labelled, as none of the run's labels: a pick among them would be labelled twice (a trial's
    "lost property at the town hall" was offered after it had gone into the examples file). A file moved
    or unreadable gives none: the picks are made without them.
    """
    from ucse.config import ConfigError, from_yaml
    from ucse.config.run_layout import RunFolder
    from ucse.uncertainty.ood_examples import read_ood_texts

    cfg = from_yaml(RunFolder(run).config)
    path = cfg.data.ood_path
    if not path or not Path(path).expanduser().is_file():
        return []
    try:
        return read_ood_texts(Path(path).expanduser(), cfg.data.text_column)
    except (ConfigError, OSError, ValueError):
        return []


def suggestion_rows(
    texts: list[str],
    picks: Suggestions,
    columns: tuple[str, str],
    ids: tuple[str, list[Any]] | None = None,
    fields: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The rows ``ucse suggest`` writes, least sure first.

    Args:
        texts: the input texts.
        picks: :func:`suggest_to_label`'s answer.
        columns: the run's (text column, label column) names: the label column is left empty to fill in.
        ids: ``(id column, one id per input text)`` to copy into each row first, or ``None``.
        fields: the added fields' names (:func:`field_names`); ``None``: their own.

    Returns:
        Per pick: [the id,] the text, an empty label, ``guess``, ``confidence`` and ``margin`` (to 4
        decimals: a file for people), ``line`` (the text's 1-based position in the input).
    """
    name = fields or {f: f for f in SUGGEST_FIELDS}
    guesses = picks.guess.tolist()  # Python values: ints stay ints, names strings
    rows = []
    for k, i in enumerate(picks.positions.tolist()):
        row: dict[str, Any] = {} if ids is None else {ids[0]: ids[1][i]}
        row |= {
            columns[0]: texts[i],
            columns[1]: "",
            name["guess"]: guesses[k],
            name["confidence"]: round(float(picks.confidence[k]), 4),
            name["margin"]: round(float(picks.margin[k]), 4),
            name["line"]: i + 1,
        }
        rows.append(row)
    return rows


def field_names(own: tuple[str, ...]) -> dict[str, str]:
    """The added fields' names in the output: their own, or ``suggest_<field>`` where a column has it.

    ``own``: the run's text and label columns and the id column. The run's column names are fixed by the
    training file the rows go back to, so the added fields give way.
    """
    taken = set(own)
    out = {}
    for f in SUGGEST_FIELDS:
        new = f
        while new in taken:
            new = f"suggest_{new}"
        out[f] = new
        taken.add(new)
    return out
