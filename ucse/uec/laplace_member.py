"""A frozen backbone made probabilistic by a Laplace posterior on its *scored* embedding (Sec. 3.1).

The model's embedding e(x) is its pooled last hidden state, L2-normalised: the vector the similarity
scores. A :class:`~ucse.uec.laplace.DiagonalLaplace` posterior is put on an affine map y = W e + b
placed after it, starting at (W, b) = (I, 0); the scored embedding is y / ||y||. Its MAP is refined on
the positive pairs (the pretrained map is not a stationary point of the in-batch InfoNCE), and its
mean and variance are those of y / ||y|| (normalisation linearised with its Jacobian). So the variance
is exactly about the vector that is scored, and refitting never needs the backbone again: the pooled
embeddings live in a :class:`~ucse.uec.pooled_store.PooledStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from omegaconf import OmegaConf

from ucse import atomic, json_read
from ucse.atomic import atomic_dir
from ucse.backbone import FrozenBackbone
from ucse.config import BackboneConfig
from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.digest import stable_digest
from ucse.uec.laplace import DiagonalLaplace
from ucse.uec.laplace_io import load_laplace, save_laplace
from ucse.uec.pooled_store import PooledStore, pooled_key

MEMBER_FILE = "member.json"
SPACES = ("scored", "raw")
"""``ucse.uec.config.Space``'s values but ``auto`` (the ensemble's choice between them, not a space).
Spelled out: that module imports the ensemble, which imports this one."""


class LaplaceMember:
    """A frozen backbone with a diagonal Laplace posterior on a map after its scored embedding.

    Args:
        cfg: the backbone (any HF model, ``pkg:`` paths included).
        member_id: name in tables; default ``cfg.name``.
        laplace: a fitted posterior, or ``None`` until :meth:`fit` / :meth:`load`.
        device: where the backbone runs.
        backbone: an already loaded backbone for ``cfg`` (shares the model, no reload).
        store_root: folder of the pooled-embedding store; ``None`` keeps it in memory.
        variance_scale: multiplies the predictive variance (fitted on held-out positives).
        space: ``scored`` (moments of y / ||y||) or ``raw`` (moments of y itself, before the normalisation).
    """

    def __init__(
        self,
        cfg: BackboneConfig,
        member_id: str | None = None,
        laplace: DiagonalLaplace | None = None,
        device: str | torch.device = "cpu",
        backbone: FrozenBackbone | None = None,
        store_root: str | Path | None = None,
        variance_scale: float = 1.0,
        space: str = "scored",
    ) -> None:
        if space not in SPACES:
            raise ValueError(f"space must be one of {SPACES}, got {space!r}")
        self.backbone = backbone if backbone is not None else FrozenBackbone(cfg, device)
        self.cfg = self.backbone.cfg
        self.member_id = member_id or cfg.name
        self.store = PooledStore(self.backbone, store_root, pooled_key(self.backbone))
        self.laplace = laplace
        self.variance_scale = float(variance_scale)
        self.space = space

    @property
    def dim(self) -> int:
        """Embedding dimension D (the backbone's hidden size)."""
        return self.backbone.hidden_size

    def features(self, texts: Sequence[str]) -> torch.Tensor:
        """(N, D) the model's scored embedding: pooled last hidden state, L2-normalised."""
        return F.normalize(self.store.get(texts), dim=-1)

    def fit(
        self, pairs: Sequence[tuple[str, str]], groups: Sequence[int] | None = None, **laplace_kwargs: object
    ) -> LaplaceMember:
        """Fit the posterior on positive pairs (query i's positive is passage i), prior by marglik.

        Args:
            pairs: (text, positive text) pairs, grouped into in-batch-negative batches in this order.
            groups: one int per pair; pairs of a group are known positives of each other (masked out of
                each other's negatives). Default: pairs sharing a text are grouped.
            **laplace_kwargs: :class:`DiagonalLaplace` options (hessian, prior, temperature, batch_size, ...).
        """
        if len(pairs) < 2:
            raise ValueError(f"Laplace fit of {self.member_id} needs >= 2 positive pairs, got {len(pairs)}")
        phi_a = self.features([a for a, _ in pairs])
        phi_b = self.features([b for _, b in pairs])
        groups = shared_text_groups(pairs) if groups is None else list(groups)
        eye = torch.eye(self.dim, dtype=torch.float64)
        self.laplace = DiagonalLaplace(**laplace_kwargs).fit(
            phi_a, phi_b, eye, None, groups=torch.as_tensor(groups)
        )
        return self

    def _require_fit(self) -> DiagonalLaplace:
        if self.laplace is None:
            raise RuntimeError(
                f"Laplace member {self.member_id} is not fitted: call fit(pairs) or LaplaceMember.load(dir)"
            )
        return self.laplace

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) Gaussians of y / ||y|| (``raw``: of y), variance times ``variance_scale``."""
        laplace, phi = self._require_fit(), self.features(texts)
        if self.space == "raw":
            mean, var = laplace.predict_mean(phi), laplace.predict_var(phi)
        else:
            mean, var = laplace.predict(phi)
        meta = {
            "member": self.member_id,
            "backbone": self.cfg.model,
            "revision": self.cfg.revision,
            "pooling": self.cfg.pooling.value,
            "source": "laplace",
            "prior_precision": self.laplace.prior_precision,
            "variance_scale": self.variance_scale,
            "normalisation": "none" if self.space == "raw" else "l2_jacobian",
        }
        return GaussianEmbeddings(mean, var * self.variance_scale, meta)

    def cache_key(self) -> str:
        """Identity of the embeddings this member produces (weights, config, posterior, scale)."""
        post = None if self.laplace is None else [self.laplace.prior_precision, self.laplace.log_lik]
        return stable_digest(
            [f"laplace-{self.space}", self.backbone.fingerprint, str(self.cfg), post, self.variance_scale]
        )

    def save(self, directory: str | Path) -> Path:
        """Write ``laplace.safetensors`` + ``laplace.json`` + ``member.json`` atomically."""
        self._require_fit()
        with atomic_dir(directory) as tmp:
            save_laplace(self.laplace, tmp)
            info = {
                "member_id": self.member_id,
                "fingerprint": self.backbone.fingerprint,
                "variance_scale": self.variance_scale,
                "backbone": OmegaConf.to_container(OmegaConf.structured(self.cfg), enum_to_str=True),
            }
            (tmp / MEMBER_FILE).write_text(atomic.dumps(info, indent=2))
        return Path(directory)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        device: str | torch.device = "cpu",
        backbone: FrozenBackbone | None = None,
        store_root: str | Path | None = None,
    ) -> LaplaceMember:
        """Read a member written by :meth:`save`; refuses it when the backbone weights changed since."""
        folder = Path(directory)
        if not (folder / MEMBER_FILE).is_file():
            raise FileNotFoundError(f"{folder / MEMBER_FILE} is missing; not a saved Laplace member folder")
        try:
            info = json_read.loads((folder / MEMBER_FILE).read_text())
            if not isinstance(info, dict):
                raise TypeError(f"expected a JSON object, got {type(info).__name__}")
            scale = float(info.get("variance_scale", 1.0))
            cfg_node = info["backbone"]
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(
                f"{folder / MEMBER_FILE}: unreadable member file ({err}); refit the member"
            ) from None
        if not (scale > 0 and scale != float("inf")):
            raise ValueError(
                f"{folder / MEMBER_FILE}: field 'variance_scale' must be > 0 and finite, got {scale}"
            )
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(BackboneConfig), cfg_node))
        laplace = load_laplace(folder)
        member = cls(cfg, info["member_id"], laplace, device, backbone, store_root, scale)
        if member.backbone.fingerprint != info["fingerprint"]:
            raise ValueError(
                f"{folder}: the Laplace posterior was fitted on weights {info['fingerprint']} but "
                f"{cfg.model} now has {member.backbone.fingerprint}; refit the member"
            )
        return member


def shared_text_groups(pairs: Sequence[tuple[str, str]]) -> list[int]:
    """Group id per pair: pairs connected through a shared text (union-find) are one group.

    A query with two relevant documents, or a sentence paired twice, gives pairs that must not serve as
    each other's in-batch negatives.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    roots: dict[str, int] = {}
    return [roots.setdefault(find(a), len(roots)) for a, _ in pairs]
