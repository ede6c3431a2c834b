"""A UEC ensemble of Gaussian members and the variants compared in the paper's tables.

:class:`UecEnsemble` encodes texts with every member, fuses the K Gaussians with :func:`convolve` and
scores with the uncertainty-aware similarity. :class:`VariantScorer` turns the K member Gaussians of a
batch into the flat array an mteb encoder returns (``pack``) and scores two such arrays
(``similarity`` / ``similarity_pairwise``), for one named variant:

========================  ====================================================  ===================
variant                   representation                                        similarity
========================  ====================================================  ===================
``uec``                   Gaussian convolution, uncertainty weights (rule, T)    probit (or metric)
``uec_no_sim``            same fused mean                                       cosine
``uec_no_weights``        Gaussian convolution with uniform weights 1/K         probit (or metric)
``uniform``               mean of the L2-normalised member means                cosine
``weighted``              fixed simplex weights (chosen on validation)          cosine
``concat``                [u_1, ..., u_K] / sqrt(K) of unit member means         cosine (= mean cos_k)
``weighted_concat``       [sqrt(w_1) u_1, ..., sqrt(w_K) u_K] (w on validation)  cosine (= sum w_k cos_k)
``member``                one member's mean                                     cosine
``member_probit``         one member's Gaussian                                 probit (or metric)
``borda`` / ``rrf``       the K member means                                    rank fusion of cosines
========================  ====================================================  ===================

Every variant packs what mteb should see as *the* embedding: Gaussian variants the unit fused mean
(N, D), so mteb's own cosine scores (``main_score``) are meaningful; their variances travel to the
similarity hooks by another route (``UecMtebEncoder`` keeps them keyed by row). Concatenations pack the
(N, sum D_k) concatenation, rank fusion the K unit means side by side (N, K*D).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from ucse.config import parse_enum
from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.convolution import ConvolutionResult, TemperatureMode, WeightRule, convolve
from ucse.uec.distances import Metric, pairwise_similarity
from ucse.uec.fusion import borda_count, reciprocal_rank_fusion, uniform_ensemble, weighted_ensemble
from ucse.uec.members import Member
from ucse.uec.similarity import probit_score


class Variant(str, Enum):
    """Ensemble variants and baselines (see the module table)."""

    uec = "uec"
    uec_no_sim = "uec_no_sim"
    uec_no_weights = "uec_no_weights"
    uniform = "uniform"
    weighted = "weighted"
    concat = "concat"
    weighted_concat = "weighted_concat"
    member = "member"
    member_probit = "member_probit"
    borda = "borda"
    rrf = "rrf"


GAUSSIAN_VARIANTS = (Variant.uec, Variant.uec_no_weights, Variant.member_probit)
RANK_VARIANTS = (Variant.borda, Variant.rrf)
CONCAT_VARIANTS = (Variant.concat, Variant.weighted_concat)
OWN_SPACE_VARIANTS = (Variant.member, Variant.member_probit, *CONCAT_VARIANTS, *RANK_VARIANTS)
"""Rows that score each member in its own space (no common space needed): fed the members before alignment."""
WEIGHTED_VARIANTS = (Variant.weighted, Variant.weighted_concat)


def concatenate(means: Sequence[torch.Tensor], weights: Sequence[float] | None = None) -> torch.Tensor:
    """(N, sum D_k) [sqrt(w_k) * unit(mu_k)]_k: unit norm, and its dot product is sum_k w_k cos_k.

    ``weights=None`` is the plain concatenation, w_k = 1/K. Members may have different widths.
    """
    if len(means) == 0:
        raise ValueError("concatenation needs at least one member embedding, got none")
    w = [1.0 / len(means)] * len(means) if weights is None else [float(x) for x in weights]
    if len(w) != len(means) or any(x < 0 for x in w) or abs(sum(w) - 1) > 1e-5:
        raise ValueError(f"concatenation weights must be {len(means)} values >= 0 summing to 1, got {w}")
    return torch.cat([math.sqrt(wk) * F.normalize(m.float(), dim=-1) for wk, m in zip(w, means)], dim=1)


def check_same_dim(members: Sequence[Member]) -> int:
    """The members' common dimension D; a clear error when they differ or there are none."""
    if len(members) == 0:
        raise ValueError("an ensemble needs at least one member, got none")
    dims = {m.member_id: m.dim for m in members}
    if len(set(dims.values())) != 1:
        raise ValueError(
            f"ensemble members have different dimensions {dims}: Gaussian convolution adds member vectors, "
            "so all must share D (the paper's limitation); use same-D backbones or trained heads with one "
            "embed_dim"
        )
    return next(iter(dims.values()))


def fixed_weight_convolution(
    members: Sequence[GaussianEmbeddings], weights: Sequence[float]
) -> GaussianEmbeddings:
    """Gaussian convolution with input-independent weights w (K,): mean sum w mu, var sum w^2 var.

    Members are L2-normalised first (variances rescaled), as in :func:`convolve`.
    """
    w = torch.as_tensor(weights, dtype=torch.float32).flatten()
    if w.numel() != len(members):
        raise ValueError(f"got {w.numel()} weights for {len(members)} members")
    normed = [m.normalized() for m in members]
    mean = sum(wk * m.mean for wk, m in zip(w, normed))  # (N, D)
    var = sum(wk**2 * m.var for wk, m in zip(w, normed))  # (N, D)
    return GaussianEmbeddings(mean, var, {"member": "fixed(" + ",".join(m.member for m in members) + ")"})


def _tensor(x: object) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
    return t.float().reshape(1, -1) if t.ndim == 1 else t.float()


@dataclass
class VariantScorer:
    """One variant's packing of member Gaussians and its similarity on packed arrays.

    Attributes:
        variant: which variant.
        dim: member dimension D.
        n_members: K.
        rule: UEC coefficient rule.
        temperature: UEC temperature T.
        temperature_mode: how T enters the softmax (``sharpen`` = the paper's, see convolution.py).
        metric: similarity of Gaussian variants (``probit`` = the paper's).
        beta: variance scale of the probit score.
        member: member index for ``member`` / ``member_probit``.
        weights: (K,) fixed weights for ``weighted`` / ``weighted_concat``.
        member_dims: per-member widths, for the rows that score members in their own spaces (one member,
            concatenations, rank fusion) when the members' widths differ.
        rrf_k: RRF constant.
        expected_candidates: rank fusion ranks over the candidates of one similarity call; when set, a call
            with another number of candidates fails (mteb must hand over the whole corpus at once).
    """

    variant: Variant
    dim: int
    n_members: int
    rule: WeightRule = WeightRule.inverse_trace
    temperature: float = 1.0
    temperature_mode: TemperatureMode = TemperatureMode.sharpen
    metric: Metric = Metric.probit
    beta: float = 1.0
    member: int | None = None
    weights: tuple[float, ...] | None = None
    rrf_k: int = 60
    expected_candidates: int | None = None
    member_dims: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        self.variant = parse_enum(Variant, self.variant, "variant")
        self.rule = parse_enum(WeightRule, self.rule, "rule")
        self.temperature_mode = parse_enum(TemperatureMode, self.temperature_mode, "temperature_mode")
        self.metric = parse_enum(Metric, self.metric, "similarity")
        if self.variant in (Variant.member, Variant.member_probit) and not (
            self.member is not None and 0 <= self.member < self.n_members
        ):
            raise ValueError(
                f"variant {self.variant.value} needs member in [0, {self.n_members}), got {self.member}"
            )
        if self.variant in WEIGHTED_VARIANTS and (
            self.weights is None or len(self.weights) != self.n_members
        ):
            raise ValueError(
                f"variant '{self.variant.value}' needs {self.n_members} weights, got {self.weights}"
            )

    @property
    def dims(self) -> tuple[int, ...]:
        """Each member's width (``member_dims``, or D for all)."""
        return self.member_dims or (self.dim,) * self.n_members

    @property
    def width(self) -> int:
        """Columns of a packed array."""
        if self.variant in CONCAT_VARIANTS or self.variant in RANK_VARIANTS:
            return sum(self.dims)
        if self.variant in (Variant.member, Variant.member_probit):
            return self.dims[self.member]
        return self.dim

    @property
    def gaussian_variant(self) -> bool:
        """Whether this variant scores Gaussians (its variances must reach the similarity)."""
        return self.variant in GAUSSIAN_VARIANTS

    def convolution(self, members: Sequence[GaussianEmbeddings]) -> ConvolutionResult:
        """The UEC convolution (uncertainty weights) of the K member Gaussians."""
        return convolve(list(members), self.rule, self.temperature, temperature_mode=self.temperature_mode)

    def gaussian(self, members: Sequence[GaussianEmbeddings]) -> GaussianEmbeddings:
        """The normalised (N, D) Gaussian a Gaussian variant scores."""
        if self.variant is Variant.uec:
            fused = self.convolution(members).fused
        elif self.variant is Variant.uec_no_weights:
            fused = fixed_weight_convolution(members, [1.0 / len(members)] * len(members))
        elif self.variant is Variant.member_probit:
            fused = members[self.member]
        else:
            raise ValueError(f"variant {self.variant.value} is deterministic; it has no Gaussian")
        return fused.normalized()  # unit means so mu_s is a cosine (Sec. 3.3); variances rescaled alike

    def mean(self, members: Sequence[GaussianEmbeddings]) -> torch.Tensor:
        """(N, D) unit-norm representation of a deterministic (or any) variant, e.g. for classification."""
        means = [m.mean for m in members]
        if self.variant in GAUSSIAN_VARIANTS:
            return self.gaussian(members).mean
        if self.variant is Variant.uec_no_sim:
            out = self.convolution(members).fused.mean
        elif self.variant is Variant.uniform:
            out = uniform_ensemble(means)
        elif self.variant is Variant.weighted:
            out = weighted_ensemble(means, self.weights)
        elif self.variant is Variant.member:
            out = means[self.member]
        elif self.variant is Variant.concat:
            return concatenate(means)
        elif self.variant is Variant.weighted_concat:
            return concatenate(means, self.weights)
        else:
            raise ValueError(
                f"variant {self.variant.value} ranks per member; it has no single representation"
            )
        return F.normalize(out.float(), dim=-1)

    def pack(self, members: Sequence[GaussianEmbeddings]) -> np.ndarray:
        """(N, width) float32 array handed to mteb (the unit mean for Gaussian variants)."""
        if len(members) != self.n_members:
            raise ValueError(f"expected {self.n_members} member Gaussians, got {len(members)}")
        if self.variant in RANK_VARIANTS:
            out = torch.cat([F.normalize(m.mean, dim=-1) for m in members], dim=1)  # (N, K*D)
        else:
            out = self.mean(members)  # (N, D) or (N, sum D_k)
        return out.numpy().astype(np.float32)

    def _gauss(self, packed: object, var: object | None) -> GaussianEmbeddings:
        x = _tensor(packed)
        if x.shape[1] != self.width:
            raise ValueError(
                f"{self.variant.value} embeddings must have {self.width} columns, got {tuple(x.shape)}"
            )
        if var is None:
            raise ValueError(
                f"variant {self.variant.value} scores Gaussians: the similarity needs the variances of "
                "both sides (UecMtebEncoder passes them; pass var_a / var_b when calling directly)"
            )
        return GaussianEmbeddings(x, _tensor(var))

    def similarity(
        self, a: object, b: object, var_a: object | None = None, var_b: object | None = None
    ) -> torch.Tensor:
        """(Na, Nb) scores between packed arrays a (Na, width) and b (Nb, width) (+ variances if Gaussian)."""
        if self.variant in GAUSSIAN_VARIANTS:
            return pairwise_similarity(
                self._gauss(a, var_a), self._gauss(b, var_b), self.metric, beta=self.beta
            )
        x, y = _tensor(a), _tensor(b)
        if self.variant not in RANK_VARIANTS:
            return x @ y.T  # unit vectors: cosine (for concatenations: sum_k w_k cos_k)
        if self.expected_candidates is not None and y.shape[0] != self.expected_candidates:
            raise ValueError(
                f"{self.variant.value} ranks the whole corpus in one call: expected "
                f"{self.expected_candidates} "
                f"candidates, got {y.shape[0]} (raise mteb's corpus_chunk_size above the corpus size)"
            )
        ends = torch.tensor(self.dims).cumsum(0).tolist()
        starts = [0, *ends[:-1]]
        scores = [x[:, a:b] @ y[:, a:b].T for a, b in zip(starts, ends)]  # each member's own cosine
        if self.variant is Variant.borda:
            return borda_count(scores)
        return reciprocal_rank_fusion(scores, k=self.rrf_k)

    def similarity_pairwise(
        self, a: object, b: object, var_a: object | None = None, var_b: object | None = None
    ) -> torch.Tensor:
        """(N,) scores of row i of a with row i of b (STS)."""
        if self.variant in RANK_VARIANTS:
            raise ValueError(
                f"{self.variant.value} is a retrieval rank fusion; it has no pairwise (STS) score"
            )
        if self.variant not in GAUSSIAN_VARIANTS:
            x, y = _tensor(a), _tensor(b)
            return (x * y).sum(1)
        q, c = self._gauss(a, var_a), self._gauss(b, var_b)
        if q.n != c.n:
            raise ValueError(f"pairwise similarity needs equal row counts, got {q.n} and {c.n}")
        if self.metric is Metric.probit:
            mu_s = (q.mean * c.mean).sum(1)  # (N,)
            var_s = (q.mean**2 * c.var + q.var * (c.mean**2 + c.var)).sum(1)  # (N,) diagonal of Eq. 5
            return probit_score(mu_s, var_s, self.beta)
        rows = [pairwise_similarity(_row(q, i), _row(c, i), self.metric, self.beta)[0, 0] for i in range(q.n)]
        return torch.stack(rows)


def _row(g: GaussianEmbeddings, i: int) -> GaussianEmbeddings:
    return GaussianEmbeddings(g.mean[i : i + 1], g.var[i : i + 1])


class UecEnsemble:
    """K same-dimension members fused by uncertainty-driven Gaussian convolution (Sec. 3.2-3.3).

    Args:
        members: the members (anything with ``member_id``, ``dim`` and ``encode(texts)``).
        rule: coefficient rule (``inverse_trace`` = Eq. 4, ``inverse_cost``, ``softmax_trace``,
            ``softmax_precision``).
        temperature: T of the tempered softmax over members.
        temperature_mode: ``sharpen`` (the paper's: softmax(T * logit)) or ``divide``.
        similarity: metric of the fused Gaussians (``probit`` = Eq. 6; others of App. B.2).
        beta: variance scale of the probit score.
    """

    def __init__(
        self,
        members: Sequence[Member],
        rule: WeightRule | str = WeightRule.inverse_trace,
        temperature: float = 1.0,
        similarity: Metric | str = Metric.probit,
        beta: float = 1.0,
        temperature_mode: TemperatureMode | str = TemperatureMode.sharpen,
    ) -> None:
        self.members = list(members)
        self.dim = check_same_dim(self.members)
        self.rule = parse_enum(WeightRule, rule, "rule")
        self.similarity = parse_enum(Metric, similarity, "similarity")
        self.temperature_mode = parse_enum(TemperatureMode, temperature_mode, "temperature_mode")
        sharpen = self.temperature_mode is TemperatureMode.sharpen
        if not ((temperature >= 0 if sharpen else temperature > 0) and math.isfinite(temperature)):
            raise ValueError(
                f"temperature must be a finite number > 0 (0, equal weights, in sharpen mode), got "
                f"{temperature}"
            )
        self.temperature, self.beta = float(temperature), float(beta)

    @property
    def member_ids(self) -> list[str]:
        """Member ids in weight-column order."""
        return [m.member_id for m in self.members]

    def member_gaussians(self, texts: Sequence[str]) -> list[GaussianEmbeddings]:
        """K (N, D) Gaussians, one per member, checked to agree in shape."""
        out = [m.encode(texts) for m in self.members]
        for m, g in zip(self.members, out):
            if g.dim != self.dim:
                raise ValueError(f"member {m.member_id} returned dim {g.dim}, declared {self.dim}")
        return out

    def encode(self, texts: Sequence[str]) -> ConvolutionResult:
        """Fused (N, D) Gaussians and (N, K) weights of ``texts``."""
        return convolve(
            self.member_gaussians(texts), self.rule, self.temperature, temperature_mode=self.temperature_mode
        )

    def score(self, queries: GaussianEmbeddings, candidates: GaussianEmbeddings) -> torch.Tensor:
        """(Nq, Nc) similarity of fused Gaussians, normalised first so mu_s is a cosine."""
        return pairwise_similarity(queries.normalized(), candidates.normalized(), self.similarity, self.beta)

    def scorer(self, variant: Variant | str, **kwargs: object) -> VariantScorer:
        """A :class:`VariantScorer` for ``variant`` with this ensemble's rule, temperature and metric."""
        return VariantScorer(
            variant=parse_enum(Variant, variant, "variant"),
            dim=self.dim,
            n_members=len(self.members),
            rule=self.rule,
            temperature=self.temperature,
            temperature_mode=self.temperature_mode,
            metric=self.similarity,
            beta=self.beta,
            **kwargs,
        )
