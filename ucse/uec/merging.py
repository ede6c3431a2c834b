"""Parameter-level merging of same-architecture members (the paper's model-merging rows, App. B.4.4).

* uniform / weighted merge: theta = sum_k w_k theta_k (weights on the simplex);
* task arithmetic (Ilharco et al., 2022): theta = theta_A + alpha (theta_B - theta_C).

Members must share one architecture: the same parameter names and shapes (e.g. all-MiniLM-L6-v2 and its
sre fine-tune). With two members task arithmetic with A = C = the first and B = the second is
theta_1 + alpha (theta_2 - theta_1), i.e. the weighted merge with weights (1 - alpha, alpha).
The merged model is a deterministic member (zero variance): its rows compare with the ensembles.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ucse.backbone import FrozenBackbone
from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.digest import cache_root, stable_digest
from ucse.uec.pooled_store import PooledStore


class MergeError(ValueError):
    """Members whose parameters cannot be merged (different architectures)."""


def _check_same(states: Sequence[dict[str, torch.Tensor]], names: Sequence[str]) -> None:
    ref = states[0]
    for name, st in zip(names[1:], states[1:]):
        if st.keys() != ref.keys():
            extra = sorted(set(st) ^ set(ref))[:3]
            raise MergeError(
                f"cannot merge {names[0]} and {name}: different parameters (e.g. {extra}); parameter "
                "merging needs one architecture, use the representation-level ensembles instead"
            )
        for key, t in st.items():
            if t.shape != ref[key].shape:
                raise MergeError(
                    f"cannot merge {names[0]} and {name}: '{key}' is {tuple(ref[key].shape)} vs "
                    f"{tuple(t.shape)}; parameter merging needs one architecture"
                )


def merge_states(
    states: Sequence[dict[str, torch.Tensor]], weights: Sequence[float], names: Sequence[str] | None = None
) -> dict[str, torch.Tensor]:
    """sum_k w_k theta_k for floating parameters (integer buffers are taken from the first member)."""
    names = list(names or [f"#{i}" for i in range(len(states))])
    if len(states) != len(weights) or not states:
        raise MergeError(f"got {len(states)} models and {len(weights)} weights")
    _check_same(states, names)
    out = {}
    for key, ref in states[0].items():
        if ref.is_floating_point():
            out[key] = sum(float(w) * st[key].double() for w, st in zip(weights, states)).to(ref.dtype)
        else:
            out[key] = ref.clone()
    return out


def task_arithmetic_states(
    base: dict[str, torch.Tensor], plus: dict[str, torch.Tensor], minus: dict[str, torch.Tensor], alpha: float
) -> dict[str, torch.Tensor]:
    """theta_A + alpha (theta_B - theta_C) for floating parameters."""
    _check_same([base, plus, minus], ["A", "B", "C"])
    return {
        k: (v.double() + alpha * (plus[k].double() - minus[k].double())).to(v.dtype)
        if v.is_floating_point()
        else v
        for k, v in base.items()
    }


class MergedMember:
    """A backbone whose weights are a merge of members' weights; deterministic (zero-variance) Gaussians.

    Args:
        backbones: the K same-architecture backbones (the first one's config, tokenizer and pooling are used).
        state: merged state dict (from :func:`merge_states` / :func:`task_arithmetic_states`).
        member_id: name in tables.
        recipe: JSON-able description of the merge (part of the cache key).
    """

    def __init__(
        self, backbones: Sequence[FrozenBackbone], state: dict, member_id: str, recipe: object
    ) -> None:
        base = backbones[0]
        self.backbone = FrozenBackbone(base.cfg, base.device)
        self.backbone.model.load_state_dict(state)
        self.backbone.fingerprint = "merge:" + stable_digest([[b.fingerprint for b in backbones], recipe])
        self.member_id = member_id
        self.store = PooledStore(
            self.backbone, cache_root() / "uec" / "pooled", self.backbone.fingerprint[6:]
        )

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return self.backbone.hidden_size

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) unit pooled embeddings with zero variance."""
        mean = torch.nn.functional.normalize(self.store.get(texts), dim=-1)
        return GaussianEmbeddings(mean, torch.zeros_like(mean), {"member": self.member_id, "source": "merge"})

    def cache_key(self) -> str:
        """Identity of the merged weights."""
        return self.backbone.fingerprint
