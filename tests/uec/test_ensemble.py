"""UecEnsemble and VariantScorer against direct convolve / probit / fusion computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.convolution import convolve
from ucse.uec.ensemble import UecEnsemble, Variant, VariantScorer, fixed_weight_convolution
from ucse.uec.fusion import borda_count, reciprocal_rank_fusion, uniform_ensemble, weighted_ensemble
from ucse.uec.similarity import probit_similarity


class TableMember:
    """A member serving fixed random Gaussians per text (no model)."""

    def __init__(self, member_id: str, texts: list[str], dim: int, seed: int, var_scale: float) -> None:
        g = torch.Generator().manual_seed(seed)
        self.member_id = member_id
        self._dim = dim
        self.rows = {t: i for i, t in enumerate(texts)}
        self.mean = torch.randn(len(texts), dim, generator=g) * 3
        self.var = torch.rand(len(texts), dim, generator=g) * var_scale

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: list[str]) -> GaussianEmbeddings:
        idx = torch.tensor([self.rows[t] for t in texts])
        return GaussianEmbeddings(self.mean[idx], self.var[idx], {"member": self.member_id})


TEXTS = [f"text {i}" for i in range(12)]


@pytest.fixture
def members() -> list[TableMember]:
    return [TableMember(f"m{k}", TEXTS, 8, seed=k, var_scale=0.5 * (k + 1)) for k in range(3)]


def _normed(g: GaussianEmbeddings) -> tuple[torch.Tensor, torch.Tensor]:
    sq = (g.mean**2).sum(1, keepdim=True)
    return g.mean / sq.sqrt(), g.var / sq


@pytest.mark.parametrize("rule", ["inverse_trace", "inverse_cost", "softmax_trace", "softmax_precision"])
def test_encode_equals_direct_convolve(members, rule):
    ens = UecEnsemble(members, rule=rule, temperature=0.7)
    got = ens.encode(TEXTS)
    ref = convolve([m.encode(TEXTS) for m in members], rule, 0.7)
    torch.testing.assert_close(got.fused.mean, ref.fused.mean)
    torch.testing.assert_close(got.fused.var, ref.fused.var)
    torch.testing.assert_close(got.weights.sum(1), torch.ones(len(TEXTS)))


def test_inverse_trace_weights_by_hand(members):
    ens = UecEnsemble(members, rule="inverse_trace", temperature=1.0)
    traces = torch.stack([_normed(m.encode(TEXTS))[1].sum(1) for m in members], 1).double()  # (N, K)
    expected = (1 / traces) / (1 / traces).sum(1, keepdim=True)
    torch.testing.assert_close(ens.encode(TEXTS).weights.double(), expected, rtol=1e-5, atol=1e-6)


def test_uec_scorer_similarity_is_probit_of_fused(members):
    ens = UecEnsemble(members, rule="inverse_trace", temperature=1.0, beta=0.5)
    scorer = ens.scorer("uec")
    gauss = [m.encode(TEXTS) for m in members]
    packed = scorer.pack(gauss)
    assert packed.shape == (len(TEXTS), 8) and packed.dtype == np.float32  # the unit fused mean
    fused = convolve(gauss, "inverse_trace", 1.0).fused
    mean, var = _normed(fused)
    np.testing.assert_allclose(packed, mean.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="needs the variances"):
        scorer.similarity(packed[:5], packed[5:])
    # Reference probit written out: mu_s / sqrt(1 + pi/8 * beta * sigma_s^2), sigma_s^2 per pair summed.
    q, c = packed[:5], packed[5:]
    mu_s = mean[:5] @ mean[5:].T
    var_s = torch.stack(
        [
            ((mean[i] ** 2) * var[j] + var[i] * (mean[j] ** 2 + var[j])).sum()
            for i in range(5)
            for j in range(5, 12)
        ]
    ).reshape(5, 7)
    expected = mu_s / torch.sqrt(1 + math.pi / 8 * 0.5 * var_s)
    torch.testing.assert_close(scorer.similarity(q, c, var[:5], var[5:]), expected, rtol=1e-4, atol=1e-5)
    pair = scorer.similarity_pairwise(packed[:6], packed[6:], var[:6], var[6:])
    full = probit_similarity(
        GaussianEmbeddings(mean[:6], var[:6]), GaussianEmbeddings(mean[6:], var[6:]), beta=0.5
    )
    torch.testing.assert_close(pair, full.diagonal(), rtol=1e-4, atol=1e-5)


def test_ablations_and_baselines(members):
    ens = UecEnsemble(members)
    gauss = [m.encode(TEXTS) for m in members]
    normed = [_normed(g) for g in gauss]
    # Without uncertainty weights: uniform 1/K, variance sum var_k / K^2 (normalised members).
    g = fixed_weight_convolution(gauss, [1 / 3] * 3)
    torch.testing.assert_close(g.mean, sum(m for m, _ in normed) / 3)
    torch.testing.assert_close(g.var, sum(v for _, v in normed) / 9)
    no_sim = ens.scorer("uec_no_sim").pack(gauss)
    expected = F.normalize(convolve(gauss).fused.mean, dim=-1).numpy()
    np.testing.assert_allclose(no_sim, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        ens.scorer("uec_no_sim").similarity(no_sim, no_sim), expected @ expected.T, atol=1e-5
    )
    uni = ens.scorer("uniform").pack(gauss)
    np.testing.assert_allclose(uni, F.normalize(uniform_ensemble([x.mean for x in gauss]), dim=-1), atol=1e-6)
    w = (0.2, 0.3, 0.5)
    wtd = ens.scorer("weighted", weights=w).pack(gauss)
    np.testing.assert_allclose(
        wtd, F.normalize(weighted_ensemble([x.mean for x in gauss], w), dim=-1), atol=1e-6
    )
    one = ens.scorer("member", member=1).pack(gauss)
    np.testing.assert_allclose(one, normed[1][0].numpy(), atol=1e-6)
    probit_one = ens.scorer("member_probit", member=2)
    np.testing.assert_allclose(probit_one.pack(gauss), normed[2][0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probit_one.gaussian(gauss).var.numpy(), normed[2][1].numpy(), rtol=1e-5)
    # Concatenation by hand: [u_1, u_2, u_3] / sqrt(3); its dot product is the mean of the cosines.
    units = [F.normalize(x.mean, dim=-1) for x in gauss]
    cat = ens.scorer("concat").pack(gauss)
    np.testing.assert_allclose(cat, (torch.cat(units, 1) / 3**0.5).numpy(), atol=1e-6)
    cos = sum(u[:4] @ u[4:].T for u in units) / 3
    torch.testing.assert_close(ens.scorer("concat").similarity(cat[:4], cat[4:]), cos, rtol=1e-5, atol=1e-6)
    wcat = ens.scorer("weighted_concat", weights=w)
    packed = wcat.pack(gauss)
    wcos = sum(wk * (u[:4] @ u[4:].T) for wk, u in zip(w, units))
    torch.testing.assert_close(wcat.similarity(packed[:4], packed[4:]), wcos, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(packed, axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("variant", ["borda", "rrf"])
def test_rank_fusion_matches_fusion_functions(members, variant):
    ens = UecEnsemble(members)
    gauss = [m.encode(TEXTS) for m in members]
    scorer = ens.scorer(variant, expected_candidates=8, rrf_k=10)
    packed = scorer.pack(gauss)
    cos = [F.normalize(g.mean[:4], dim=-1) @ F.normalize(g.mean[4:], dim=-1).T for g in gauss]
    ref = borda_count(cos) if variant == "borda" else reciprocal_rank_fusion(cos, k=10)
    torch.testing.assert_close(scorer.similarity(packed[:4], packed[4:]), ref)
    with pytest.raises(ValueError, match="expected 8 candidates, got 5"):
        scorer.similarity(packed[:4], packed[4:9])
    with pytest.raises(ValueError, match="no pairwise"):
        scorer.similarity_pairwise(packed[:4], packed[4:8])


def test_bad_inputs_fail_clearly(members):
    small = TableMember("tiny", TEXTS, 4, seed=9, var_scale=1.0)
    with pytest.raises(ValueError, match=r"different dimensions \{'m0': 8, 'm1': 8, 'm2': 8, 'tiny': 4\}"):
        UecEnsemble([*members, small])
    with pytest.raises(ValueError, match=r"Invalid value rule=.bogus.; choose one of \[.inverse_trace."):
        UecEnsemble(members, rule="bogus")
    with pytest.raises(ValueError, match="Invalid value similarity='l7'; choose one of"):
        UecEnsemble(members, similarity="l7")
    with pytest.raises(ValueError, match="temperature must be"):
        UecEnsemble(members, temperature=-1.0)
    with pytest.raises(ValueError, match="temperature must be"):
        UecEnsemble(members, temperature=0.0, temperature_mode="divide")  # 0 = equal weights: sharpen only
    with pytest.raises(ValueError, match="Invalid value variant='best'; choose one of"):
        UecEnsemble(members).scorer("best")
    with pytest.raises(ValueError, match=r"needs member in \[0, 3\)"):
        VariantScorer(Variant.member, dim=8, n_members=3)
    with pytest.raises(ValueError, match="needs 3 weights"):
        VariantScorer(Variant.weighted, dim=8, n_members=3, weights=(0.5, 0.5))
    with pytest.raises(ValueError, match="at least one member"):
        UecEnsemble([])
    scorer = UecEnsemble(members).scorer("uec")
    with pytest.raises(ValueError, match="must have 8 columns"):
        scorer.similarity(np.zeros((2, 8)), np.zeros((2, 16)), np.zeros((2, 8)), np.zeros((2, 16)))
