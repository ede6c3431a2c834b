"""UEC: uncertainty-driven embedding convolution (Laplace, Gaussian convolution, probit similarity)."""

from ucse.uec.convolution import ConvolutionResult, WeightRule, coefficient_logits, convolve
from ucse.uec.distances import Metric, pairwise_similarity
from ucse.uec.ensemble import UecEnsemble, Variant, VariantScorer, fixed_weight_convolution
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
