"""What a run's uncertainty profile needs from the training split: outputs, class Gaussians, the flag.

Split from :mod:`ucse.uncertainty.fit` (one concept: what the profile needs from the rows the head was
trained on, read from the run's hidden-state cache).
"""

from __future__ import annotations

import numpy as np
import torch

from ucse.backbone.cache import SubsetStates, TokenStates
from ucse.config import TrainConfig
from ucse.config.uncertainty import OodConfig
from ucse.core.encoder import EncodedBatch, UcseEncoder
from ucse.data import TaskData
from ucse.training.neighbours import joint_features
from ucse.training.run import build_states
from ucse.uncertainty.density import ClassGaussians, fit_class_gaussians_streamed
from ucse.uncertainty.ood_detector import (
    BANK_DTYPE,
    OodDetector,
    OodStats,
    fit_ood,
    fit_ood_on_distances,
    flag_features,
    reads_mean,
)


def encode_splits(
    cfg: TrainConfig, encoder: UcseEncoder, data: TaskData, splits: tuple[str, ...]
) -> dict[str, EncodedBatch]:
    """Head outputs of the named splits, from the hidden-state cache the training run filled."""
    states, _ = build_states(cfg, encoder.backbone, data)
    return {s: encoder.run_states(states[s]) for s in splits}


TRAIN_BLOCK = 16384
"""Training rows run through the head at a time when the profile's class Gaussians are streamed (the kept
outputs of a block: 16384 x (D + H) float32, 50 MB for MiniLM)."""


def stream_train_gaussians(
    train: TokenStates, labels: np.ndarray, encoder: UcseEncoder, keys: tuple[str, ...], num_classes: int
) -> dict[str, ClassGaussians]:
    """Class Gaussians of the named head outputs on the training split, computed block by block.

    ``mean`` (mu: the density scores) and ``pooled`` (the out-of-scope flag's features). Instead of keeping
    all the split's outputs (4.9 KB per text for a 384-d head, ~470 MiB at 100k texts; docs/RESULTS.md
    section 5), the head runs over the cached states twice (class means, then the residuals' sums); a
    split of one block is run once and its outputs reused.
    """
    starts = range(0, len(train), TRAIN_BLOCK)

    def block(start: int) -> tuple[dict[str, torch.Tensor], np.ndarray]:
        idx = list(range(start, min(start + TRAIN_BLOCK, len(train))))
        out = encoder.run_states(SubsetStates(train, idx))
        return {k: torch.from_numpy(getattr(out, k)) for k in keys}, labels[idx]

    if len(starts) == 1:
        only = [block(0)]
        return fit_class_gaussians_streamed(lambda: only, num_classes)
    return fit_class_gaussians_streamed(lambda: (block(s) for s in starts), num_classes)


FILL_BLOCK = 4096
"""Rows run through the head at a time while the bank fills (one pass: small blocks cost nothing extra; the
search's own block is ``ucse.training.neighbours.BANK_BLOCK``)."""


def stream_bank(rows: TokenStates, encoder: UcseEncoder) -> torch.Tensor:
    """(N, D + H) ``joint_knn`` bank of the cached ``rows``, filled block by block (no outputs are kept)."""
    bank = None
    for start in range(0, len(rows), FILL_BLOCK):
        idx = list(range(start, min(start + FILL_BLOCK, len(rows))))
        out = encoder.run_states(SubsetStates(rows, idx))
        block = joint_features(out.mean, out.pooled)  # (B, D + H) unit rows, float32
        if bank is None:
            bank = torch.empty(len(rows), block.shape[1], dtype=BANK_DTYPE)
        bank[start : start + len(idx)] = block
    assert bank is not None, "no rows"
    return bank


def matched_rows(n: int, heldout_bank_rows: np.ndarray, seed: int) -> np.ndarray | None:
    """Which of the shipped head's ``n`` training rows its flag searches: as many as the held-out rows' banks.

    The flag's threshold is a quantile of held-out rows' distances to their nearest row in a bank of m rows
    (the other folds, or the training rows before the refit); a new text searched in all n > m rows finds a
    nearer one, so in-scope texts were kept more often than the target (docs/RESULTS.md section 3). A new
    text's nearest row in a random m-row subset is distributed as a held-out row's in its own m-row bank
    (the bank-size part of the split-conformal exchangeability; the heads still differ). On 18 small runs:
    runs more than 2 points above a 0.95 target 4 -> 1, below it 3 -> 5 (MassiveIntent, whose sampled rows
    are mixed unlike its test split), cross-domain AUROC -0.006..+0.008 (docs/RESULTS.md section 3).

    Args:
        n: the rows the shipped head trained on.
        heldout_bank_rows: (N,) the size of each held-out row's bank.
        seed: draws the subset.

    Returns:
        (m,) ascending row indices, m the mean held-out bank size; ``None`` (every row) when m >= n.
    """
    m = int(round(float(np.mean(heldout_bank_rows))))
    if m >= n:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, m, replace=False))


def stream_matched_bank(
    parts: list[TokenStates], encoder: UcseEncoder, heldout_bank_rows: np.ndarray | None, seed: int
) -> torch.Tensor:
    """The ``joint_knn`` bank of the rows ``parts`` hold end to end, only the :func:`matched_rows` among them.

    Only the kept rows run through the head (the whole bank is 10-20 % larger: Banking77, 9,002 of 10,003
    rows, 1.22 -> 1.08 s on 2 CPU cores). Their batches hold other companions than in a whole-bank pass, so a
    row's bf16 outputs could round differently; on three saved runs the bank was the same to the bit.
    """
    n = sum(len(p) for p in parts)
    keep = None if heldout_bank_rows is None else matched_rows(n, heldout_bank_rows, seed)
    if keep is None:
        return torch.cat([stream_bank(part, encoder) for part in parts])
    blocks, offset = [], 0
    for part in parts:
        idx = keep[(keep >= offset) & (keep < offset + len(part))] - offset  # this part's kept rows
        offset += len(part)
        if len(idx):
            blocks.append(stream_bank(SubsetStates(part, idx.tolist()), encoder))
    return torch.cat(blocks)


def fit_run_ood(
    ocfg: OodConfig,
    data: TaskData,
    outs: dict[str, EncodedBatch],
    held: EncodedBatch,
    probs: torch.Tensor,
    refitted: bool,
    seed: int = 0,
    stats: OodStats | None = None,
    held_distances: np.ndarray | None = None,
) -> OodDetector:
    """Fit a run's out-of-scope flag: statistics of the training rows' features, a threshold.

    Most feature scores read the backbone's pooled unit vectors (``EncodedBatch.pooled``), which no head
    training has shaped: when the head was trained on every labelled row (``head=auto``'s refit), their
    threshold is cross-fitted over those rows. ``joint_knn`` reads the head's mu as well, so a refitted head's
    own rows would look more in scope than new texts (docs/RESULTS.md section 4): its threshold is set on the
    held-out distances of the selection models instead (``held_distances``, saved by ``head=auto``).

    Args:
        ocfg: score, tpr, k.
        data: the run's data (labels).
        outs: the shipped head's outputs of ``train`` (and ``validation`` when ``refitted``).
        held: the in-scope texts the threshold is set on: the validation outputs, or (``refitted``) the
            saved held-out outputs, which belong to the last rows of train + validation.
        probs: (N, C) their calibrated probabilities.
        refitted: the shipped head was trained on train + validation (``heldout.safetensors`` exists): the
            statistics are fitted on both.
        seed: fold shuffling.
        stats: the statistics already fitted on the training split (:func:`stream_train_gaussians`), or
            ``joint_knn``'s bank (:func:`stream_bank`, over train + validation when ``refitted``); then
            ``outs`` needs no ``train``. Cross-fitted scores take none.
        held_distances: (N, K) ascending distances of the held-out rows to their nearest training rows under
            the models that did not train on them (``joint_knn`` with ``refitted``).
    """
    c = len(data.label_names)
    joint = reads_mean(ocfg.score)
    if joint and stats is None:  # the bank from the outputs given (bench/uncertainty.py)
        parts = [outs["train"]] + ([outs["validation"]] if refitted else [])
        stats = OodStats(bank=torch.cat([joint_features(o.mean, o.pooled) for o in parts]).to(BANK_DTYPE))
    if not refitted:
        x = None if stats is not None else outs["train"].pooled
        feats = flag_features(ocfg.score, held.mean, held.pooled)
        return fit_ood(
            ocfg, x, data.labels("train"), c, probs, held.logits, features=feats, seed=seed, stats=stats
        )
    labels = np.concatenate([data.labels("train"), data.labels("validation")])
    if joint:
        if held_distances is None or held_distances.shape[1] < ocfg.k:
            have = 0 if held_distances is None else held_distances.shape[1]
            fix = (
                f"choose uncertainty.ood.k <= {have}"
                if have
                else "retrain the run with this version (its heldout.safetensors has no distances)"
            )
            raise ValueError(
                f"uncertainty.ood.score=joint_knn with k={ocfg.k} needs each held-out row's distances to its "
                f"{ocfg.k} nearest training rows under the selection models; this run saved {have}: {fix}, "
                "or choose another uncertainty.ood.score"
            )
        return fit_ood_on_distances(ocfg, stats, len(labels), torch.from_numpy(held_distances[:, ocfg.k - 1]))
    x = np.concatenate([outs["train"].pooled, outs["validation"].pooled])
    rows = np.arange(len(labels) - len(held.logits), len(labels))
    return fit_ood(ocfg, x, labels, c, probs, held.logits, rows=rows, seed=seed)
