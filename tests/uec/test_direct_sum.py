"""``align: blocks``: members side by side in the direct sum of their spaces, against hand computation."""

from __future__ import annotations

import pytest
import torch

from ucse.config import ConfigError
from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.config import (
    AlignMode,
    EnsembleConfig,
    MemberConfig,
    MemberKind,
    load_ensemble_config,
    validate,
)
from ucse.uec.convolution import WeightRule, convolve
from ucse.uec.direct_sum import BlockMember
from ucse.uec.ensemble_members import align_members


class _Fixed:
    """A member with fixed (N, D) Gaussians, rows addressed by their text ``"0"``, ``"1"``..."""

    def __init__(self, name: str, mean: torch.Tensor, var: torch.Tensor) -> None:
        self.member_id, self.mean, self.var = name, mean, var

    @property
    def dim(self) -> int:
        return self.mean.shape[1]

    def encode(self, texts):
        rows = [int(t) for t in texts]
        return GaussianEmbeddings(self.mean[rows], self.var[rows], {"member": self.member_id})


def _members(n: int = 6) -> list[_Fixed]:
    g = torch.Generator().manual_seed(0)
    a = _Fixed("a", torch.randn(n, 3, generator=g), 0.1 * torch.rand(n, 3, generator=g) + 0.01)
    b = _Fixed("b", torch.randn(n, 5, generator=g), 0.1 * torch.rand(n, 5, generator=g) + 0.01)
    return [a, b]


def test_blocks_place_each_member_in_its_own_dimensions():
    members = _members()
    texts = [str(i) for i in range(6)]
    out, info = align_members(members, AlignMode.blocks, texts)
    assert all(isinstance(m, BlockMember) and m.dim == 8 for m in out) and set(info) == {"a", "b"}
    ga, gb = (m.encode(texts) for m in out)
    torch.testing.assert_close(ga.mean[:, :3], members[0].mean, rtol=0, atol=0)
    torch.testing.assert_close(gb.var[:, 3:], members[1].var, rtol=0, atol=0)
    assert not ga.mean[:, 3:].any() and not ga.var[:, 3:].any()
    assert not gb.mean[:, :3].any() and not gb.var[:, :3].any()


RULES = [WeightRule.inverse_trace, WeightRule.inverse_cost, WeightRule.softmax_trace]


@pytest.mark.parametrize("rule", RULES)
def test_fused_cosine_is_the_weighted_mean_of_the_members_cosines(rule):
    """cos(fused x, fused y) = sum_k pi_k(x) pi_k(y) cos_k(x, y) / (||pi(x)|| ||pi(y)||), the weights those of
    the members in their own spaces (traces and norms do not see the zero padding)."""
    members = _members()
    texts = [str(i) for i in range(6)]
    blocks, _ = align_members(members, AlignMode.blocks, texts)
    fused = convolve([m.encode(texts) for m in blocks], rule, temperature=1.8)
    own = [m.encode(texts).normalized() for m in members]
    # the weights by hand, from the members in their own spaces (module docstring of convolution.py)
    traces = torch.stack([o.var.double().sum(1) for o in own], dim=1)  # (N, K)
    logits = {
        WeightRule.inverse_trace: -traces.log(),
        WeightRule.inverse_cost: -(traces + 1.0).log(),
        WeightRule.softmax_trace: -traces,
    }[rule]
    pi = torch.softmax(1.8 * logits, dim=1)  # (N, K), sharpen: softmax(T * l)
    torch.testing.assert_close(fused.weights.double(), pi, rtol=1e-6, atol=1e-7)
    cos = torch.stack([o.mean.double() @ o.mean.double().T for o in own])  # (K, N, N): unit means
    num = torch.einsum("ik,jk,kij->ij", pi, pi, cos)
    want = num / (pi.norm(dim=1)[:, None] * pi.norm(dim=1)[None, :])
    m = fused.fused.mean.double()
    got = (m @ m.T) / (m.norm(dim=1)[:, None] * m.norm(dim=1)[None, :])
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_blocks_refuse_the_precision_rule():
    cfg = EnsembleConfig(
        name="x",
        members=[MemberConfig(id="m", kind=MemberKind.laplace, backbone="minilm-l6")],
        align=AlignMode.blocks,
        rule=WeightRule.softmax_precision,
    )
    with pytest.raises(ConfigError, match="align=blocks cannot be used with rule=softmax_precision"):
        validate(cfg)


def test_the_refusal_names_the_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nmembers:\n  - {id: a, kind: laplace, backbone: minilm-l6}\n"
        "align: blocks\nrule: softmax_precision\n"
    )
    with pytest.raises(ConfigError, match=r"rule=softmax_precision.*\(.*mine\.yaml\)$"):
        load_ensemble_config(str(path))
