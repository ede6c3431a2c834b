"""Members side by side: each in its own block of the direct sum of every member's space (``align: blocks``).

Mapping a member into another's space (orthogonal Procrustes, ``ucse/uec/alignment.py``) loses what the two
spaces do not share: all-mpnet-base-v2 (768-d) fits into all-MiniLM-L6-v2's 384-d space with a relative
residual of 0.62 (docs/RESULTS_UEC.md). The direct sum loses nothing: member k's mean and variance fill
dimensions [o_k, o_k + D_k) of a sum_k D_k space and are zero elsewhere. The convolution is then, block by
block,

    mean = [pi_1 mu_1, ..., pi_K mu_K],    var = [pi_1^2 var_1, ..., pi_K^2 var_K],

and for unit-norm members the fused cosine is sum_k pi_k(x) pi_k(y) cos_k(x, y) / (||pi(x)|| ||pi(y)||): the
members' own similarities averaged with the uncertainty weights of both inputs. With equal weights it is the
concatenation of the unit-norm members. Traces and norms are unchanged by the zero padding, so every weight
rule but ``softmax_precision`` (a sum of 1 / var over dimensions, infinite on the zeros) gives the weights it
gives aligned members.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.digest import stable_digest


class BlockMember:
    """A member whose Gaussians fill dimensions [start, start + member.dim) of a ``total``-d space.

    Args:
        member: any member (``member_id``, ``dim``, ``encode(texts) -> GaussianEmbeddings``).
        start: the block's first dimension.
        total: the width of the direct sum.
    """

    def __init__(self, member: Any, start: int, total: int) -> None:
        if not 0 <= start <= total - member.dim:
            raise ValueError(f"block [{start}, {start + member.dim}) of {member.member_id} exceeds {total}")
        self.member, self.start, self.total = member, start, total
        self.member_id = member.member_id

    @property
    def dim(self) -> int:
        """Width of the direct sum."""
        return self.total

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, total) Gaussians: the member's in its block, zero mean and zero variance elsewhere."""
        g = self.member.encode(texts)
        block = slice(self.start, self.start + g.dim)
        mean = torch.zeros(g.mean.shape[0], self.total, dtype=g.mean.dtype)
        var = torch.zeros_like(mean, dtype=g.var.dtype)
        mean[:, block], var[:, block] = g.mean, g.var
        return GaussianEmbeddings(mean, var, {**g.meta, "block": [self.start, self.total]})

    def cache_key(self) -> str:
        """The wrapped member's key plus the block's place."""
        inner = getattr(self.member, "cache_key", lambda: self.member_id)()
        return stable_digest([inner, "block", self.start, self.total])


def direct_sum(members: list[Any]) -> list[BlockMember]:
    """Every member in its own block, in order: member k at offset sum_{j<k} D_j of a sum_k D_k space."""
    total = sum(m.dim for m in members)
    starts = [sum(m.dim for m in members[:k]) for k in range(len(members))]
    return [BlockMember(m, s, total) for m, s in zip(members, starts)]
