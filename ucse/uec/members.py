"""UEC ensemble members: texts -> diagonal Gaussian embeddings in the scored (unit-norm) space (Sec. 3.1).

* :class:`HeadMember`: a trained UCSE head; N(mu, sigma^2) of its variance branch, mapped through the
  L2 normalisation with its exact Jacobian (so every member's variance lives on the unit sphere the
  similarity scores).
* :class:`~ucse.uec.laplace_member.LaplaceMember` (re-exported here): any frozen backbone made
  probabilistic post hoc by a Laplace posterior on a map placed after its scored embedding.
* :class:`CachedMember`: a text -> row lookup over precomputed member Gaussians, so the many ensemble
  variants (and mteb's repeated encode calls) never re-run a backbone.

Every member carries a ``variance_scale`` (default 1) multiplying its variance: fitted on held-out
positive pairs (:func:`ucse.uec.calibration.fit_variance_scale`) it makes variances comparable across
member kinds (see ``docs/RESULTS_UEC.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from torch import nn

from ucse.backbone import texts_hash, validate_texts
from ucse.config.run_layout import RunFolder
from ucse.core.encoder import UcseEncoder
from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.digest import cache_root, stable_digest
from ucse.uec.laplace_curvature import normalised_moments
from ucse.uec.laplace_member import LaplaceMember

logger = logging.getLogger(__name__)


@runtime_checkable
class Member(Protocol):
    """Anything that embeds texts into diagonal Gaussians of a fixed dimension."""

    member_id: str

    @property
    def dim(self) -> int:
        """Embedding dimension D."""

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) Gaussians for N texts, in input order."""


__all__ = ["CachedMember", "HeadMember", "LaplaceMember", "Member", "cache_root", "stable_digest"]


class HeadMember:
    """A trained UCSE head folder (``runs/.../head``) with the backbone it names.

    Args:
        head_dir: folder with the head's ``config.json`` + ``model.safetensors``.
        member_id: name in tables; default the run folder name.
        device: where backbone and head run.
        backbone_overrides: e.g. ``{"max_length": 256}``.
    """

    def __init__(
        self,
        head_dir: str | Path,
        member_id: str | None = None,
        device: str | torch.device = "cpu",
        backbone_overrides: dict | None = None,
    ) -> None:
        self.head_dir = Path(head_dir)
        if not (self.head_dir / "config.json").is_file():
            # the usual cause: the member's run was never trained (the shipped ensembles name runs/...)
            state = "does not exist" if not self.head_dir.exists() else "has no config.json"
            raise FileNotFoundError(
                f"head member folder {self.head_dir} {state}; point it at a run's head/ folder "
                "(runs/<task>/<backbone>/<name>/head), or train that run first (the ensemble config's "
                "comment names its command: python train.py task=<task> backbone=<name> head=textcnn seed=0)"
            )
        self.encoder = UcseEncoder.from_dir(self.head_dir, device, backbone_overrides)
        self.member_id = member_id or self.head_dir.parent.name
        self.variance_scale = 1.0  # fitted on held-out positives by ucse.uec.calibration
        self.states_source = "backbone"

    def use_run_states(self, task: str, data_root: str | Path | None) -> bool:
        """Serve the texts of ``task`` from the hidden-state cache of the run that trained this head.

        An ensemble of trained heads is usually evaluated on the task they were trained on, whose token states
        the training run already cached: reusing them makes the ensemble cost one head pass per member
        instead of a second backbone pass (minutes for a decoder on CPU). Returns False, changing nothing,
        when the head has no run folder or its run trained on another task.
        """
        from ucse.evaluation.evaluate import attach_run_states, load_run  # evaluation sits above uec/

        run = self.head_dir.parent
        if not RunFolder(run).config.is_file():
            return False
        run, cfg = load_run(run, str(data_root) if data_root else None)
        if cfg.task.name != task:
            return False
        attach_run_states(self.encoder, cfg)
        self.states_source = "run cache"
        return True

    @property
    def dim(self) -> int:
        """Embedding dimension D of mu."""
        bottleneck = getattr(self.encoder.head, "bottleneck", None)
        if isinstance(getattr(bottleneck, "mu", None), nn.Linear):
            return int(bottleneck.mu.out_features)
        return int(self.encode(["probe"]).dim)  # heads without a Gaussian bottleneck: measure once

    def cache_key(self) -> str:
        """Identity of what this member computes (head weights + backbone), for embedding caches."""
        weights = (self.head_dir / "model.safetensors").stat()
        return stable_digest(
            [
                "head",
                str(self.head_dir.resolve()),
                weights.st_size,
                weights.st_mtime_ns,
                self.encoder.backbone.fingerprint,
                asdict(self.encoder.backbone.cfg),
                self.variance_scale,
                self.states_source,  # cached states are stored in fp16: not bit-identical to a backbone pass
            ]
        )

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) unit-norm Gaussians: N(mu, sigma^2) of the head through mu / ||mu|| (Jacobian), scaled."""
        out = self.encoder.encode_gaussian(validate_texts(texts))
        if out.var is None:
            raise ValueError(
                f"head member {self.member_id} ({self.head_dir}) is deterministic (head.gaussian=false): "
                "it "
                "has no variance branch; train it with head.gaussian=true or wrap its backbone as a "
                "Laplace member"
            )
        meta = {
            "member": self.member_id,
            "backbone": self.encoder.backbone.cfg.model,
            "source": "head",
            "head_dir": str(self.head_dir),
            "normalisation": "l2_jacobian",
            "variance_scale": self.variance_scale,
        }
        mean, var = normalised_moments(
            torch.from_numpy(out.mean).double(), torch.from_numpy(out.var).double()
        )
        return GaussianEmbeddings(mean, var * self.variance_scale, meta)


class CachedMember:
    """Serves a member's Gaussians from precomputed rows; unseen texts are encoded and memoised.

    Args:
        member: the wrapped member.
        cache_dir: folder for on-disk GaussianEmbeddings exports (one per text list), or ``None``.
    """

    def __init__(self, member: Member, cache_dir: str | Path | None = None) -> None:
        self.member = member
        self.member_id = member.member_id
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self._rows: dict[str, int] = {}
        self._mean: list[torch.Tensor] = []
        self._var: list[torch.Tensor] = []
        self.encoded_texts = 0  # texts actually sent to the backbone (lets tests prove cache hits)

    @property
    def dim(self) -> int:
        """Embedding dimension D of the wrapped member."""
        return self.member.dim

    def _key(self, texts: list[str]) -> str:
        key = getattr(self.member, "cache_key", lambda: self.member_id)()
        return f"{self.member_id}-{stable_digest([key, texts_hash(texts)])}"

    def precompute(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """Encode ``texts`` once (reading/writing the disk cache) and remember every row."""
        texts = list(dict.fromkeys(validate_texts(texts)))  # unique, first-seen order
        folder = None if self.cache_dir is None else self.cache_dir / self._key(texts)
        emb = None
        if folder is not None and folder.is_dir():
            try:
                emb = GaussianEmbeddings.load(folder)
                shape, want = tuple(emb.mean.shape), (len(texts), self.dim)
                if shape != want:  # a valid file of other texts: its rows would be served by position
                    raise ValueError(f"it holds {shape} embeddings where these texts need {want}")
            except (OSError, ValueError, TypeError) as err:  # truncated / corrupt / foreign cache entry
                emb = None
                logger.warning("cached embeddings %s are unreadable (%s); re-encoding", folder, err)
        if emb is None:
            emb = self.member.encode(texts)
            self.encoded_texts += len(texts)
            if folder is not None:
                emb.save(folder)
        self._add(texts, emb)
        return emb

    def _add(self, texts: list[str], emb: GaussianEmbeddings) -> None:
        base = sum(len(m) for m in self._mean)
        self._mean.append(emb.mean)
        self._var.append(emb.var)
        for i, t in enumerate(texts):
            self._rows[t] = base + i

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) Gaussians for ``texts``; only texts never seen before reach the backbone."""
        texts = validate_texts(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
        if missing:
            emb = self.member.encode(missing)
            self.encoded_texts += len(missing)
            self._add(missing, emb)
        mean, var = torch.cat(self._mean), torch.cat(self._var)
        rows = torch.tensor([self._rows[t] for t in texts])
        return GaussianEmbeddings(mean[rows], var[rows], {"member": self.member_id})
