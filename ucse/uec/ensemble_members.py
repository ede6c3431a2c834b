"""Building the members of a configured ensemble: fit pairs, cached Laplace fits, variance scales, alignment.

* Positive pairs come from the fit task's train split with *groups* of known positives (pairs sharing a
  text; same-label pairs), masked out of each other's in-batch negatives in the Laplace likelihood.
* A share of the groups (``fit.heldout_fraction``) is held out of the Laplace fit; on those held-out pairs
  every member (Laplace or head) gets its variance scale (``ucse/uec/calibration.py``), saved with it.
* Members whose space differs from the first member's are mapped into it by orthogonal Procrustes
  fitted on the fit pairs' texts (``ucse/uec/alignment.py``).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from ucse import json_read
from ucse.atomic import write_json
from ucse.backbone import FrozenBackbone
from ucse.config import BackboneConfig, ConfigError, TaskConfig, TaskType, load_group
from ucse.core.gaussian import GaussianEmbeddings
from ucse.data.loading import read_jsonl
from ucse.data.pairs import (
    label_positive_pairs,
    load_retrieval,
    load_sts,
    retrieval_positive_pairs,
    sts_positive_pairs,
)
from ucse.data.tasks import task_folder
from ucse.uec.alignment import AlignmentError, ProcrustesMap, fit_procrustes
from ucse.uec.calibration import (
    ScaleFit,
    contrastive_log_likelihood,
    fit_contrastive_scale,
    fit_variance_scale,
    pair_log_likelihood,
)
from ucse.uec.config import (
    AlignMode,
    EnsembleConfig,
    FitConfig,
    MemberConfig,
    MemberKind,
    MemberScales,
    PairSource,
    Space,
)
from ucse.uec.digest import cache_root, stable_digest
from ucse.uec.direct_sum import direct_sum
from ucse.uec.ensemble_task import task_config
from ucse.uec.label_scales import fit_label_scales, fused_nll, head_outputs
from ucse.uec.laplace_io import LaplaceFileError
from ucse.uec.laplace_member import LaplaceMember, shared_text_groups
from ucse.uec.members import HeadMember

logger = logging.getLogger(__name__)
FIT_OPTIONS = (
    "hessian",
    "prior",
    "temperature",
    "similarity",
    "batch_size",
    "refine_steps",
    "evidence_rounds",
)


class FitPairs:
    """Positive pairs with group ids, split into the Laplace fit part and the held-out (scale) part."""

    def __init__(self, pairs: list[tuple[str, str]], groups: list[int], heldout_fraction: float) -> None:
        if len(pairs) < 4:
            raise ValueError(
                f"the ensemble's fit split gives {len(pairs)} positive pairs; at least 4 are needed"
            )
        order = list(dict.fromkeys(groups))  # group ids in first-seen order
        n_held = (
            min(len(order) - 1, max(1, math.ceil(heldout_fraction * len(order)))) if heldout_fraction else 0
        )
        held = set(order[len(order) - n_held :])
        self.fit = [p for p, g in zip(pairs, groups) if g not in held]
        self.fit_groups = [g for g in groups if g not in held]
        self.heldout = [p for p, g in zip(pairs, groups) if g in held]
        self.heldout_groups = [g for g in groups if g in held]

    @classmethod
    def by_rows(cls, ds: Any, fraction: float, seed: int, max_pairs: int | None) -> FitPairs:
        """Same-label pairs; a share of each label's rows held out, paired among themselves (in no fit pair).

        Held out by group (as for STS), whole labels went: on two labels every in-batch negative was then a
        known positive and the fit's loss and gradient exactly zero (the posterior was the prior).
        """
        rng, by_label = random.Random(seed), {}  # label -> its rows, in first-seen order
        for i, y in enumerate(ds["label"]):
            by_label.setdefault(y, []).append(i)
        held: list[int] = []
        for rows in by_label.values():
            rng.shuffle(rows)
            take = math.ceil(fraction * len(rows)) if fraction and len(rows) >= 4 else 0
            held += rows[:take]
        fit_rows = sorted(set(range(len(ds))) - set(held))
        cap = None if max_pairs is None else max(1, math.ceil(fraction * max_pairs))
        out = cls.__new__(cls)
        ids = {y: i for i, y in enumerate(by_label)}  # one group id per label, in both parts
        out.fit, out.fit_groups = _label_pairs(ds.select(fit_rows), seed, max_pairs, ids)
        out.heldout, out.heldout_groups = _label_pairs(ds.select(sorted(held)), seed + 1, cap, ids)
        if len(out.fit) < 4:
            raise ValueError(f"the ensemble's fit split gives {len(out.fit)} positive pairs; 4 are needed")
        return out

    def negatives(self, limit: int = 256) -> tuple[list[str], list[int]]:
        """Partner texts of fit pairs, and their groups (a held-out pair's only in a split by rows)."""
        first = dict(zip((b for _, b in self.fit), self.fit_groups))  # text -> group, first seen order
        texts = list(first)[:limit]
        return texts, [first[t] for t in texts]

    def texts(self, limit: int = 4000) -> list[str]:
        """Unique texts of the fit pairs (for alignment), at most ``limit``."""
        return list(dict.fromkeys(t for pair in self.fit for t in pair))[:limit]


def fit_pairs(fit: FitConfig, task: TaskConfig, root: Path, task_of: Any) -> FitPairs:
    """Pairs and groups of a member's fit (``fit.source`` auto follows the fit task's type)."""
    fit_task = task_of(fit.task) if fit.task else task
    source = fit.source
    if source is PairSource.auto:
        source = {TaskType.sts: PairSource.sts, TaskType.retrieval: PairSource.retrieval}.get(
            fit_task.type, PairSource.labels
        )
    folder = task_folder(root, fit_task.name)
    if source is PairSource.sts:
        pairs = sts_positive_pairs(load_sts(folder, fit.split), fit.threshold)[: fit.max_pairs]
        groups = shared_text_groups(pairs)
    elif source is PairSource.retrieval:
        pairs = retrieval_positive_pairs(load_retrieval(folder, fit.split))[: fit.max_pairs]
        groups = shared_text_groups(pairs)
    else:
        ds = read_jsonl(folder / f"{fit.split}.jsonl")
        return FitPairs.by_rows(ds, fit.heldout_fraction, fit.seed, fit.max_pairs)
    return FitPairs(pairs, groups, fit.heldout_fraction)


def _label_pairs(ds: Any, seed: int, cap: int | None, ids: dict) -> tuple[list[tuple[str, str]], list[int]]:
    """Same-label pairs of ``ds`` and each pair's group id ``ids[label]`` (one label: known positives)."""
    label_of = dict(zip(ds["text"], ds["label"]))
    return (pairs := label_positive_pairs(ds, seed, cap)), [ids[label_of[a]] for a, _ in pairs]


def backbone_config(member: MemberConfig) -> BackboneConfig:
    """The member's backbone file merged with its overrides."""
    node = load_group("backbone", member.backbone).get("backbone", {})
    merged = OmegaConf.merge(OmegaConf.structured(BackboneConfig), node, member.overrides)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def _scale(member: Any, pairs: FitPairs, method: ScaleFit = ScaleFit.pairs) -> tuple[float, dict]:
    """The member's variance scale on the held-out pairs, and a record of the fit."""
    a = member.encode([x for x, _ in pairs.heldout])
    b = member.encode([y for _, y in pairs.heldout])
    info: dict = {"scale_fit": method.value, "heldout_pairs": len(pairs.heldout)}
    if method is ScaleFit.pairs:
        s = fit_variance_scale(a, b)
        info["heldout_loglik_raw"] = pair_log_likelihood(a, b, 1.0)
        info["heldout_loglik_scaled"] = pair_log_likelihood(a, b, s)
    else:
        # Candidates: every held-out partner (another anchor's positive is a negative unless it shares the
        # anchor's group) and partners of fit pairs (other groups, so always negatives).
        negatives, neg_groups = pairs.negatives()
        cand = b
        if negatives:
            neg = member.encode(negatives)
            cand = GaussianEmbeddings(torch.cat([b.mean, neg.mean]), torch.cat([b.var, neg.var]), b.meta)
        g = torch.tensor(pairs.heldout_groups)
        n = len(g)
        exclude = torch.zeros(n, cand.n, dtype=torch.bool)
        exclude[:, :n] = (g[:, None] == g[None]) & ~torch.eye(n, dtype=torch.bool)
        exclude[:, n:] = g[:, None] == torch.tensor(neg_groups, dtype=g.dtype)[None]  # same-label partners
        positive = torch.arange(n)
        s = fit_contrastive_scale(a, cand, positive, exclude)
        info["candidates"] = cand.n
        info["heldout_retrieval_loglik_raw"] = contrastive_log_likelihood(a, cand, positive, exclude, 1.0)
        info["heldout_retrieval_loglik_scaled"] = contrastive_log_likelihood(a, cand, positive, exclude, s)
    info["variance_scale"] = s
    return s, info


def _cached_scale(path: Path) -> dict | None:
    """A variance-scale record written earlier, or None when missing, unreadable or not a scale > 0."""
    try:
        record = json_read.loads(path.read_text())
        scale = float(record["variance_scale"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) and 0 < scale < float("inf") else None


def _fitted_scale(obj: Any, member: MemberConfig, pairs: FitPairs, tag: str = "") -> dict:
    """``obj``'s variance-scale record on the held-out pairs, from the scale cache or fitted (and cached)."""
    method = ScaleFit(member.fit.scale)
    negatives = pairs.negatives() if method is ScaleFit.contrastive else None
    key = stable_digest([obj.cache_key(), pairs.heldout, method.value, "mahalanobis", negatives])
    path = cache_root() / "uec" / "scales" / f"{member.id}{tag}-{key}.json"
    record = _cached_scale(path)
    if record is None:
        record = _scale(obj, pairs, method)[1]
        write_json(path, record)
    return record


def build_member(
    member: MemberConfig,
    pairs: FitPairs,
    device: torch.device,
    calibrate: bool = True,
    task: str | None = None,
    data_root: str | Path | None = None,
    space: Space = Space.scored,
) -> tuple[Any, dict]:
    """A fitted (and, with ``calibrate``, scaled) member plus a record of its fit; Laplace fits are cached.

    ``space`` applies to Laplace members (``scored`` or ``raw``); head members are always in the scored space.

    A head member evaluated on the task it was trained on (``task``) reads that task's token states from its
    run's hidden-state cache instead of running its backbone again.
    """
    if calibrate and not pairs.heldout:  # else the fit ran first and the scale failed on "texts is empty"
        raise ValueError(
            f"member '{member.id}': no held-out pairs to fit its variance scale (fit.heldout_fraction="
            f"{member.fit.heldout_fraction:g}, {len(set(pairs.fit_groups))} pair group(s)); raise "
            "fit.heldout_fraction, give the fit split pairs of more than one group, or set calibrate: false"
        )
    if member.kind is MemberKind.head:
        head = HeadMember(member.head_dir, member.id, device, member.overrides or None)
        info: dict = {"kind": "head"}
        if task is not None and head.use_run_states(task, data_root):
            info["states"] = "run cache"
        if calibrate:
            info.update(_fitted_scale(head, member, pairs))
            head.variance_scale = float(info["variance_scale"])
        return head, info
    backbone = FrozenBackbone(backbone_config(member), device)
    store = cache_root() / "uec" / "pooled"
    opts = {k: getattr(member.fit, k) for k in FIT_OPTIONS}
    key = stable_digest(
        [
            "scored-v1",
            backbone.fingerprint,
            OmegaConf.to_container(OmegaConf.structured(backbone.cfg)),
            opts,
            pairs.fit,
            pairs.heldout if calibrate else None,
            f"{ScaleFit(member.fit.scale).value}-mahalanobis" if calibrate else None,
        ]
    )
    folder = cache_root() / "uec" / "laplace" / f"{member.id}-{key}"
    if folder.is_dir():
        try:
            loaded = LaplaceMember.load(folder, device, backbone=backbone, store_root=store)
            record = json_read.loads((folder / "fit.json").read_text())
            if not isinstance(record, dict):
                raise ValueError(f"fit.json holds {type(record).__name__}, not an object")
        except (LaplaceFileError, ValueError, OSError, KeyError) as err:
            logger.warning("cached Laplace member %s is unusable (%s); refitting it", folder, err)
        else:
            return _in_space(loaded, record, space, pairs, member, calibrate)
    fitted = LaplaceMember(backbone.cfg, member.id, backbone=backbone, store_root=store)
    start = time.perf_counter()
    fitted.fit(pairs.fit, pairs.fit_groups, **opts)
    info = {"kind": "laplace", "fit_seconds": time.perf_counter() - start, **fitted.laplace.diagnostics}
    info["prior_precision"] = fitted.laplace.prior_precision
    if calibrate:
        scale, record = _scale(fitted, pairs, ScaleFit(member.fit.scale))
        fitted.variance_scale = scale
        info.update(record)
    logger.info("fitted Laplace member %s on %d pairs: %s", member.id, len(pairs.fit), info)
    fitted.save(folder)
    write_json(folder / "fit.json", info)
    return _in_space(fitted, info, space, pairs, member, calibrate)


def _in_space(
    fitted: LaplaceMember, info: dict, space: Space, pairs: FitPairs, member: MemberConfig, calibrate: bool
) -> tuple[LaplaceMember, dict]:
    """The fitted (scored-space) member moved to ``space``; the raw space gets its own variance scale.

    The posterior is the same in both spaces (it is fitted on the cosine likelihood); only the moments the
    member reports differ, so a raw member reuses the cached fit and refits (and caches) just its scale.
    """
    if space is Space.scored:
        return fitted, info
    fitted.space, fitted.variance_scale = space.value, 1.0
    info = {**info, "space": space.value}
    if calibrate:
        record = _fitted_scale(fitted, member, pairs, f"-{space.value}")
        fitted.variance_scale = float(record["variance_scale"])
        info.update(record)
    return fitted, info


class AlignedMember:
    """A member mapped into a reference space by a fitted :class:`ProcrustesMap`."""

    def __init__(self, member: Any, mapping: ProcrustesMap) -> None:
        self.member, self.mapping = member, mapping
        self.member_id = member.member_id

    @property
    def dim(self) -> int:
        """Width of the reference space."""
        return int(self.mapping.rotation.shape[1])

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """The member's Gaussians, aligned."""
        return self.mapping.apply(self.member.encode(texts))

    def cache_key(self) -> str:
        """The wrapped member's key plus the map's."""
        inner = getattr(self.member, "cache_key", lambda: self.member_id)()
        return stable_digest(
            [inner, "procrustes", self.mapping.rotation.sum().item(), self.mapping.fit_residual]
        )


def align_members(members: list[Any], mode: AlignMode, texts: list[str]) -> tuple[list[Any], dict]:
    """Map members into the first member's space where ``mode`` asks (auto: other widths), or side by side."""
    if mode is AlignMode.blocks:
        return direct_sum(members), {m.member_id: {"block_width": m.dim} for m in members}
    ref = members[0]
    out, info = [ref], {}
    ref_mean = None
    for m in members[1:]:
        if mode is AlignMode.none or (mode is AlignMode.auto and m.dim == ref.dim):
            if m.dim != ref.dim:
                raise AlignmentError(
                    f"member {m.member_id} is {m.dim}-d but {ref.member_id} is {ref.dim}-d; set align: auto "
                    "or procrustes in the ensemble config to map it into one space"
                )
            out.append(m)
            continue
        if ref_mean is None:
            ref_mean = ref.encode(texts).mean
        mapping = fit_procrustes(m.encode(texts).mean, ref_mean, m.member_id)
        info[m.member_id] = {"fit_residual": mapping.fit_residual, "rank": mapping.rank, "texts": len(texts)}
        out.append(AlignedMember(m, mapping))
    return out, info


def build_members(
    ens_cfg: EnsembleConfig,
    task: TaskConfig,
    root: Path,
    device: torch.device,
    temperature: float,
    space: Space = Space.scored,
) -> tuple[list[Any], list[Any], dict, dict]:
    """Every member of ``ens_cfg`` for ``task``: fitted, scaled, aligned (and label-scaled when configured).

    ``{task}`` in a member's ``head_dir`` becomes the task's name, so one config serves every task.

    Returns:
        (the members as built, the members as fused (aligned), member id -> fit record, alignment records).
    """
    built, fit_info = [], {}
    for m in ens_cfg.members:
        if m.head_dir:
            m.head_dir = m.head_dir.replace("{task}", task.name)
        pairs = fit_pairs(m.fit, task, root, lambda name: task_config(name, root))
        member, fit_info[m.id] = build_member(m, pairs, device, ens_cfg.calibrate, task.name, root, space)
        built.append(member)
    members, align_info = align_members(built, AlignMode(ens_cfg.align), pairs.texts())
    by_labels = ens_cfg.member_scales == MemberScales.labels.value or (
        ens_cfg.member_scales == MemberScales.validation.value and task.type is TaskType.classification
    )
    if by_labels:
        if not all(isinstance(m, HeadMember) for m in built):
            raise ConfigError(
                f"member_scales={MemberScales(ens_cfg.member_scales).value} on classification task "
                f"{task.name} fits the scales on the heads' validation labels, so every member must be a "
                "trained head (kind: head); use member_scales=none for Laplace members"
            )
        gauss, probs, labels = head_outputs(members, built, root)
        args = (ens_cfg.rule, temperature, ens_cfg.temperature_mode)
        scales, nll = fit_label_scales(gauss, probs, labels, *args)
        nll_before = fused_nll(gauss, probs, labels, [1.0] * len(built), *args)
        for m, s in zip(built, scales):
            m.variance_scale *= s  # aligned wrappers read the inner member's scale
            fit_info[m.member_id].update(
                {"label_scale": s, "validation_nll_before": nll_before, "validation_nll_after": nll}
            )
    return built, members, fit_info, align_info
