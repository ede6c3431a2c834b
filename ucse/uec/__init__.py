"""UEC: uncertainty-driven embedding convolution (Laplace, Gaussian convolution, probit similarity)."""

from ucse.uec.alignment import AlignmentError, ProcrustesMap, fit_procrustes
from ucse.uec.calibration import fit_variance_scale, pair_log_likelihood
from ucse.uec.convolution import (
    ConvolutionResult,
    TemperatureMode,
    WeightRule,
    coefficient_logits,
    convolve,
    paper_temperature,
)
from ucse.uec.distances import Metric, pairwise_similarity
from ucse.uec.ensemble import UecEnsemble, Variant, VariantScorer, concatenate, fixed_weight_convolution
from ucse.uec.fusion import (
    borda_count,
    reciprocal_rank_fusion,
    select_alpha,
    select_weights,
    simplex_grid,
    task_arithmetic,
    uniform_ensemble,
    weighted_ensemble,
)
from ucse.uec.laplace import DiagonalLaplace, HessianType, PairSimilarity, PriorSelection
from ucse.uec.members import CachedMember, HeadMember, LaplaceMember, Member
from ucse.uec.similarity import TopkStrategy, cosine_topk, probit_similarity, similarity_moments, topk

__all__ = [
    "AlignmentError",
    "ProcrustesMap",
    "TemperatureMode",
    "concatenate",
    "fit_procrustes",
    "fit_variance_scale",
    "pair_log_likelihood",
    "paper_temperature",
    "CachedMember",
    "ConvolutionResult",
    "DiagonalLaplace",
    "HeadMember",
    "HessianType",
    "LaplaceMember",
    "Member",
    "Metric",
    "PairSimilarity",
    "PriorSelection",
    "TopkStrategy",
    "UecEnsemble",
    "Variant",
    "VariantScorer",
    "WeightRule",
    "borda_count",
    "coefficient_logits",
    "convolve",
    "cosine_topk",
    "fixed_weight_convolution",
    "pairwise_similarity",
    "probit_similarity",
    "reciprocal_rank_fusion",
    "select_alpha",
    "select_weights",
    "similarity_moments",
    "simplex_grid",
    "task_arithmetic",
    "topk",
    "uniform_ensemble",
    "weighted_ensemble",
]
