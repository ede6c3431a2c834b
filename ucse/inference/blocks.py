"""Predicting a long input in blocks, so memory stays flat however many texts ``ucse predict`` is given.

Held whole, every text's head outputs (mean, variance, logits, pooled vector), its row (a dict of named
probabilities) and its row of the out-of-scope search's similarity block grow with the input: ``ucse
predict`` on Banking77's default run peaked at 1.10 GB (max RSS) for 10,000 texts and 2.25 GB for 50,000
(~29 KB per text). Predicted and written in blocks of :data:`BLOCK` texts: 1.12 and 1.15 GB, in the same time
(docs/RESULTS.md section 9). Within a block texts are length-sorted into batches as before; a text's batch
companions can differ from a whole-input run, which moves its outputs by float rounding only (the head and
the backbone mask padding; in bf16 that is up to ~0.01 in confidence).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tqdm.auto import tqdm

from ucse.inference.classifier import PROGRESS_MIN, UcseClassifier

BLOCK = 8192
"""Texts per block: ~100 MB of outputs and rows at 77 labels, ~130 MB for the out-of-scope search over a
10,000-row bank, and batches as full as a whole-input run's."""


def predict_blocks(
    clf: UcseClassifier,
    texts: list[str],
    top_k: int | None = None,
    sets: bool = True,
    progress: bool = False,
    block: int | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Yield :meth:`UcseClassifier.predict_with_uncertainty` rows of ``texts``, ``block`` texts at a time.

    The rows of all blocks, concatenated, are one row per text in input order. An input of one block is
    one :meth:`~UcseClassifier.predict_with_uncertainty` call, with its own progress bar. ``block``:
    texts per block (:data:`BLOCK` when ``None``).
    """
    block = block or BLOCK
    if len(texts) <= block:
        yield clf.predict_with_uncertainty(texts, top_k=top_k, sets=sets, progress=progress)
        return
    with tqdm(
        total=len(texts), unit="text", desc="predict", disable=not progress or len(texts) < PROGRESS_MIN
    ) as bar:
        for start in range(0, len(texts), block):
            part = texts[start : start + block]
            rows = clf.predict_with_uncertainty(part, top_k=top_k, sets=sets, progress=False)
            bar.update(len(part))
            yield rows
