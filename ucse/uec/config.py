"""Typed UEC ensemble configs: ``configs/ensemble/<name>.yaml`` merged onto these dataclasses by OmegaConf.

Unknown keys and bad enum values fail with a :class:`ucse.config.ConfigError` naming the key or value,
the valid choices and a "did you mean".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any, get_type_hints

from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from ucse.config import CONFIG_DIR, ConfigError, did_you_mean, parse_enum
from ucse.uec.calibration import ScaleFit
from ucse.uec.convolution import TemperatureMode, WeightRule
from ucse.uec.distances import Metric
from ucse.uec.ensemble import Variant
from ucse.uec.laplace import HessianType, PairSimilarity, PriorSelection

ENSEMBLE_DIR = CONFIG_DIR / "ensemble"


class AlignMode(str, Enum):
    """Whether members are mapped into the first member's space before fusion."""

    auto = "auto"
    procrustes = "procrustes"
    blocks = "blocks"  # each member in its own block of the direct sum of their spaces (uec/direct_sum.py)
    none = "none"


class MemberScales(str, Enum):
    """Member-level variance scales on top of each member's own."""

    none = "none"
    labels = "labels"  # trained heads: relative scales by the fused label NLL on validation (label_scales.py)
    validation = "validation"  # by the task family's validation score (validation_choice.py); labels on heads


class Space(str, Enum):
    """Where a Laplace member's Gaussian lives (its variance is that of the vector the probit scores)."""

    scored = "scored"  # y / ||y||, the normalised embedding the model's cosine sees (Jacobian of the norm)
    raw = "raw"  # y = W e + b before the normalisation, the paper's Laplace-on-the-last-layer space
    auto = "auto"  # both built, the one with the better validation score of the UEC row kept


class MemberKind(str, Enum):
    """How a member gets its variance."""

    laplace = "laplace"  # frozen backbone + post-hoc diagonal Laplace on its last linear layer
    head = "head"  # trained UCSE head: sigma^2 of its variance branch


class PairSource(str, Enum):
    """Positive pairs the Laplace posterior is fitted on."""

    auto = "auto"  # from the evaluated task: STS -> sts, retrieval -> retrieval
    sts = "sts"  # STS train pairs with score >= threshold
    retrieval = "retrieval"  # judged-relevant (query, doc) pairs of a qrels split
    labels = "labels"  # same-label pairs of a classification split


@dataclass
class FitConfig:
    """Laplace fit of one member (paper Sec. 3.1); the prior precision is chosen, never set by hand."""

    source: PairSource = PairSource.auto
    """Where the positive pairs come from."""
    task: str | None = None
    """Task providing the pairs; ``None`` = the evaluated task."""
    split: str = "train"
    """Split providing the pairs (never the evaluated test split)."""
    threshold: float = 4.0
    """STS score (0..5) at or above which a pair is positive."""
    max_pairs: int | None = 2000
    """Cap on pairs (first ones kept; label pairs are sampled with ``seed``)."""
    seed: int = 0
    """Seed of the label-pair sampling."""
    hessian: HessianType = HessianType.ggn
    """``ggn`` or ``ef``."""
    prior: PriorSelection = PriorSelection.marglik
    """``marglik`` (Laplace evidence) or ``val_loss``."""
    temperature: float = 0.05
    """InfoNCE temperature of the likelihood (all-MiniLM-L6-v2 was trained with scale 20 = 1/0.05)."""
    similarity: PairSimilarity = PairSimilarity.cosine
    """Similarity inside the likelihood's logits."""
    batch_size: int = 32
    """Pairs per in-batch-negatives group."""
    refine_steps: int = 300
    """L-BFGS iterations per MAP refinement (0 = keep the pretrained map as the MAP)."""
    evidence_rounds: int = 10
    """At most this many (refine MAP, choose prior by evidence) rounds."""
    heldout_fraction: float = 0.2
    """Share of the pair groups held out of the fit to fit the member's variance scale."""
    scale: ScaleFit = ScaleFit.pairs
    """Held-out likelihood the variance scale maximises: ``pairs`` (the positive pairs' differences) or
    ``contrastive`` (retrieving each positive among negatives by Mahalanobis distance; measured worse on
    STSBenchmark, 78.13 vs 80.15 Spearman: see docs/RESULTS_UEC.md)."""


@dataclass
class MemberConfig:
    """One ensemble member."""

    id: str = "member"
    """Name in tables and caches."""
    kind: MemberKind = MemberKind.laplace
    """Variance source."""
    backbone: str | None = None
    """A ``configs/backbone/<name>.yaml`` (laplace members)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """BackboneConfig fields overriding the backbone file, e.g. ``{max_length: 256}``."""
    head_dir: str | None = None
    """A trained head folder (head members); a relative path resolves against the config file's folder, and
    ``{task}`` is replaced by the evaluated task's name (one config for the heads of every task)."""
    fit: FitConfig = field(default_factory=FitConfig)
    """Laplace fit."""


@dataclass
class EnsembleConfig:
    """A named ensemble and the variants evaluated for it."""

    name: str = "ensemble"
    """Ensemble name (output folder)."""
    members: list[MemberConfig] = field(default_factory=list)
    """The K members (same D)."""
    rule: WeightRule = WeightRule.inverse_trace
    """UEC coefficient rule (``inverse_trace`` = Eq. 4, ``inverse_cost`` = Eq. 8)."""
    temperature: float | None = None
    """UEC temperature T; ``None`` = the paper's value for the task family (MTEB tasks 1.8, App. B.4.4;
    MIRACL 1.5, App. B.3.4; see ``ucse/uec/convolution.py``)."""
    equal_weights_fallback: bool = False
    """Also score equal weights (T = 0: the plain average of the members' Gaussians; with ``align: blocks``
    the concatenation of the unit-norm members) on the task family's validation split, beside the paper's T
    with the chosen member scales, and use them for the UEC rows where they score better (trained heads: by
    the fused label NLL on their validation split; recorded as ``choice.temperature``). UEC then does not
    trail plain averaging on validation."""
    temperature_family: str = "mteb"
    """Task family whose paper temperature applies when ``temperature`` is ``None``."""
    temperature_mode: TemperatureMode = TemperatureMode.sharpen
    """``sharpen`` (the paper's: softmax(T * logit), T = 1 is Eq. 4/8) or ``divide`` (softmax(logit / T))."""
    calibrate: bool = True
    """Fit each member's variance scale on held-out positive pairs (comparable variances across kinds)."""
    member_scales: MemberScales = MemberScales.none
    """``labels`` (trained heads of one task only): on top of each member's own scale, relative scales chosen
    jointly on the runs' validation split by the NLL of the UEC-weighted average of the heads' calibrated
    probabilities, so weights also reflect each head's reliability (``ucse/uec/label_scales.py``);
    ``validation`` (any members): the same relative scales chosen by the task family's validation score of the
    UEC row (STS: Spearman on the validation pairs; retrieval: nDCG@10 on the train queries; classification:
    the label NLL above), jointly with beta (``ucse/uec/validation_choice.py``); or ``none``."""
    space: Space = Space.scored
    """Laplace members' space: ``scored`` (y / ||y||: in-plane variance, so the probit term barely moves a
    cosine), ``raw`` (y before the normalisation, as the paper scores it) or ``auto`` (whichever gives the UEC
    row the better validation score; ``ucse/uec/validation_choice.py``). Head members are always scored."""
    align: AlignMode = AlignMode.auto
    """``auto`` (Procrustes only for members whose width differs from the first member's), ``procrustes``
    (align every member to the first on the train texts), ``blocks`` (no map: each member in its own block
    of the direct sum of the members' spaces, so nothing is lost; ``ucse/uec/direct_sum.py``) or ``none``
    (same-space members only)."""
    similarity: Metric = Metric.probit
    """Similarity of the Gaussian variants."""
    beta: float | None = None
    """Variance scale of the probit score (App. B.3.4); ``None`` = chosen on the validation split from
    ``beta_grid`` for each Gaussian variant (the paper searches it)."""
    beta_grid: list[float] = field(default_factory=lambda: [1e-4, 1e-3, 1e-2, 1e-1, 1.0])
    """Candidate betas: the paper's App. B.3.4 grid plus 1 (Eq. 6 unscaled)."""
    variants: list[Variant] = field(default_factory=lambda: list(Variant))
    """Variants to evaluate (borda/rrf only on retrieval tasks)."""
    weight_step: float = 0.1
    """Simplex grid step of the weighted ensemble."""
    weight_min: float = 0.1
    """Smallest weight on the grid."""
    rrf_k: int = 60
    """RRF constant."""
    merges: list[str] = field(default_factory=list)
    """Parameter-merging rows for same-architecture backbone members: ``uniform``, ``weighted`` (simplex
    grid of step ``merge_step`` on validation), ``task_arithmetic`` (alpha on the paper's grid)."""
    merge_retrieval: bool = False
    """Also build merge rows on retrieval tasks (each merged model re-encodes the whole corpus)."""
    merge_step: float = 0.2
    """Simplex grid step of the weighted merge (each grid point re-encodes the validation texts)."""


def validate(cfg: EnsembleConfig) -> EnsembleConfig:
    """Parse the choices (strings set in Python become members), check member consistency; returns ``cfg``."""
    cfg.rule = parse_enum(WeightRule, cfg.rule, "rule")
    cfg.similarity = parse_enum(Metric, cfg.similarity, "similarity")
    cfg.temperature_mode = parse_enum(TemperatureMode, cfg.temperature_mode, "temperature_mode")
    cfg.align = parse_enum(AlignMode, cfg.align, "align")
    cfg.member_scales = parse_enum(MemberScales, cfg.member_scales, "member_scales")
    cfg.space = parse_enum(Space, cfg.space, "space")
    if cfg.align == AlignMode.blocks.value and cfg.rule == WeightRule.softmax_precision.value:
        raise ConfigError(
            "align=blocks cannot be used with rule=softmax_precision: a member's precision sum would be "
            "infinite on the other members' blocks (zero variance there); use inverse_trace, inverse_cost or "
            "softmax_trace"
        )
    heads_only = all(m.kind is MemberKind.head for m in cfg.members)
    if cfg.member_scales == MemberScales.labels.value and not heads_only:
        raise ConfigError("member_scales=labels needs every member to be a trained head (kind: head)")
    if cfg.temperature is not None and not cfg.temperature > 0:
        raise ConfigError(
            f"Invalid value temperature={cfg.temperature}; it must be > 0 (or null for the paper's)"
        )
    if cfg.equal_weights_fallback and cfg.temperature_mode == TemperatureMode.divide.value:
        # equal weights are T = 0 in sharpen mode; divide mode has no T for them (T -> 0 is the argmax)
        raise ConfigError(
            "equal_weights_fallback=true needs temperature_mode=sharpen (its equal weights are T = 0 there); "
            "set temperature_mode: sharpen or equal_weights_fallback: false"
        )
    cfg.variants = [parse_enum(Variant, v, "variants[]") for v in cfg.variants]
    if not cfg.members:
        raise ConfigError(f"ensemble '{cfg.name}' has no members; list them under `members:`")
    ids = [m.id for m in cfg.members]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"ensemble '{cfg.name}' has duplicate member ids {ids}")
    for m in cfg.members:
        m.fit.hessian = parse_enum(HessianType, m.fit.hessian, f"members[{m.id}].fit.hessian")
        m.fit.prior = parse_enum(PriorSelection, m.fit.prior, f"members[{m.id}].fit.prior")
        m.fit.similarity = parse_enum(PairSimilarity, m.fit.similarity, f"members[{m.id}].fit.similarity")
        m.fit.scale = parse_enum(ScaleFit, m.fit.scale, f"members[{m.id}].fit.scale")
        if not 0 <= m.fit.heldout_fraction < 1:
            raise ConfigError(
                f"Invalid value members[{m.id}].fit.heldout_fraction={m.fit.heldout_fraction}; "
                "it must be in [0, 1)"
            )
        if m.kind is MemberKind.laplace and not m.backbone:
            raise ConfigError(f"laplace member '{m.id}' needs `backbone:` (a configs/backbone/<name>.yaml)")
        if m.kind is MemberKind.head and not m.head_dir:
            raise ConfigError(f"head member '{m.id}' needs `head_dir:` (a runs/.../head folder)")
    return cfg


def load_ensemble_config(name_or_path: str, overrides: list[str] | None = None) -> EnsembleConfig:
    """Load ``configs/ensemble/<name>.yaml`` (or a YAML path) onto :class:`EnsembleConfig`.

    Raises:
        ConfigError: unknown name, unknown key (named, with the valid keys) or bad value.
    """
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = ENSEMBLE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in ENSEMBLE_DIR.glob("*.yaml"))
        raise ConfigError(
            f"Unknown ensemble '{name_or_path}'. Valid choices: {', '.join(choices) or 'none'}."
            f"{did_you_mean(name_or_path, choices)} Add configs/ensemble/{name_or_path}.yaml to define it."
        )
    try:
        node = OmegaConf.load(path)
    except Exception as err:  # noqa: BLE001 - yaml's syntax errors are not ValueErrors; say which file, where
        raise ConfigError(
            f"{path} is not valid YAML: {' '.join(str(err).split())} (a value holding {{ }} must be quoted "
            "or written in block style)"
        ) from None
    try:
        merged = OmegaConf.merge(
            OmegaConf.structured(EnsembleConfig),
            node,
            OmegaConf.from_dotlist(overrides or []),
        )
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        key = str(getattr(err, "full_key", "") or "")
        leaf = key.rpartition(".")[2]
        if isinstance(err, ConfigKeyError):
            scope = getattr(err, "object_type", None)
            scope = scope if scope in (MemberConfig, FitConfig) else EnsembleConfig
            where = {MemberConfig: "a members[] entry", FitConfig: "a member's fit"}.get(
                scope, "the top level"
            )
            valid = [f.name for f in fields(scope)]
            raise ConfigError(
                f"Unknown key '{key}' in {where} of {path}. Valid keys there: {', '.join(valid)}."
                f"{did_you_mean(leaf, valid)}"
            ) from None
        owner = getattr(err, "object_type", None)
        hint = get_type_hints(owner).get(str(getattr(err, "key", ""))) if is_dataclass(owner) else None
        ref = getattr(err, "ref_type", None)  # a list field's element type
        types = (ref, *getattr(ref, "__args__", ()), hint, *getattr(hint, "__args__", ()))
        choices = next((t for t in types if isinstance(t, type) and issubclass(t, Enum)), None)
        if choices is not None:  # one message for every bad choice: the key, the value, the options, a guess
            try:
                parse_enum(choices, getattr(err, "value", None), re.sub(r"\[\d+\]", "[]", key))
            except ConfigError as bad:
                raise ConfigError(f"{bad} ({path})") from None
        raise ConfigError(f"Invalid value at '{key}' in {path}: {str(err).splitlines()[0]}") from None
    assert isinstance(cfg, EnsembleConfig)
    for m in cfg.members:  # head paths are relative to the config file, so configs work from any folder
        if m.head_dir and not Path(m.head_dir).expanduser().is_absolute():
            m.head_dir = str((path.parent / m.head_dir).resolve())
    try:
        return validate(cfg)
    except ConfigError as bad:  # the file too: validate() sees values, not where they came from
        raise ConfigError(f"{bad} ({path})") from None
