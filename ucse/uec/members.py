"""UEC ensemble members: texts -> diagonal Gaussian embeddings (paper Sec. 3.1).

* :class:`HeadMember`: a trained UCSE head; mean = mu, variance = sigma^2 of its variance branch.
* :class:`LaplaceMember`: any frozen HF backbone made probabilistic post hoc by a diagonal Laplace
  approximation on a linear last layer (for BERT-like models the last block's FFN output projection
  ``encoder.layer[-1].output.dense``). Its features phi are that layer's *input*, pooled over real tokens
  like the embedding itself, captured with a forward hook; the variance is phi^2 . var(W) + var(b).
* :class:`CachedMember`: a text -> row lookup over precomputed member Gaussians, so the many ensemble
  variants (and mteb's repeated encode calls) never re-run a backbone.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from omegaconf import OmegaConf
from torch import nn

from ucse.atomic import atomic_dir
from ucse.backbone import FrozenBackbone, pool, texts_hash, validate_texts
from ucse.config import BackboneConfig
from ucse.export.encoder import UcseEncoder
from ucse.export.gaussian import GaussianEmbeddings
from ucse.uec.laplace import DiagonalLaplace

BERT_LAST_DENSE = "encoder.layer.-1.output.dense"  # BERT/MiniLM/MPNet: last block's FFN output projection
MEMBER_FILE = "member.json"


@runtime_checkable
class Member(Protocol):
    """Anything that embeds texts into diagonal Gaussians of a fixed dimension."""

    member_id: str

    @property
    def dim(self) -> int:
        """Embedding dimension D."""

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) Gaussians for N texts, in input order."""


def cache_root() -> Path:
    """Root of the UCSE cache: env ``UCSE_CACHE_DIR``, else ``~/.cache/ucse``."""
    return Path(os.environ.get("UCSE_CACHE_DIR") or Path.home() / ".cache" / "ucse").expanduser()


def stable_digest(obj: object) -> str:
    """24-hex-digit SHA-256 of ``obj``'s sorted JSON: a cache key that survives process restarts."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:24]


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
            raise FileNotFoundError(
                f"head member folder {self.head_dir} has no config.json; point it at a run's head/ folder "
                "(runs/<task>/<backbone>/<name>/head)"
            )
        self.encoder = UcseEncoder.from_dir(self.head_dir, device, backbone_overrides)
        self.member_id = member_id or self.head_dir.parent.name

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
            ]
        )

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) Gaussians N(mu, sigma^2) of the head; deterministic heads are refused."""
        out = self.encoder.encode_gaussian(validate_texts(texts))
        if out.var is None:
            raise ValueError(
                f"head member {self.member_id} ({self.head_dir}) is deterministic (head.uncertainty=false): "
                "it "
                "has no variance branch; train it with head.uncertainty=true or wrap its backbone as a "
                "Laplace member"
            )
        meta = {
            "member": self.member_id,
            "backbone": self.encoder.backbone.cfg.model,
            "source": "head",
            "head_dir": str(self.head_dir),
            "normalisation": "none",
        }
        return GaussianEmbeddings(torch.from_numpy(out.mean), torch.from_numpy(out.var), meta)


def _resolve_module(model: nn.Module, path: str) -> nn.Module:
    """``get_submodule`` that also accepts negative list indices (``encoder.layer.-1.output.dense``)."""
    module = model
    for part in path.split("."):
        if part.lstrip("-").isdigit():
            if not isinstance(module, (nn.ModuleList, nn.Sequential)):
                raise ValueError(f"'{part}' in layer path '{path}' indexes a {type(module).__name__}")
            module = module[int(part)]
        elif hasattr(module, part):
            module = getattr(module, part)
        else:
            children = [n for n, _ in module.named_children()]
            raise ValueError(
                f"layer path '{path}': {type(module).__name__} has no child '{part}' (children: {children}); "
                "set the member's `layer` to the dotted path of its last linear layer"
            )
    return module


def last_linear(model: nn.Module, path: str | None = None) -> tuple[str, nn.Linear]:
    """The linear layer the Laplace posterior is put on: ``path`` or the BERT-like default.

    Raises:
        ValueError: when the path does not exist or is not an ``nn.Linear``.
    """
    path = path or BERT_LAST_DENSE
    module = _resolve_module(model, path)
    if not isinstance(module, nn.Linear):
        raise ValueError(
            f"layer '{path}' of {type(model).__name__} is a {type(module).__name__}, not nn.Linear; set the "
            "member's `layer` to a Linear (for BERT-like models encoder.layer.-1.output.dense)"
        )
    return path, module


class LaplaceMember:
    """A frozen backbone with a diagonal Laplace posterior on one linear layer.

    The mean is the model's usual pooled embedding (``cfg.pooling`` of the last hidden state). The
    variance is that of the pooled output of the hooked linear layer y = W phi + b: pooling (an average
    over tokens) commutes with the linear map, so pooled y = W pooled(phi) + b exactly. It does not commute
    with the residual add + LayerNorm that follow in a BERT block, so the variance is that of the
    pre-LayerNorm projection, used as the embedding's variance: an approximation (its scale is that of
    the pre-LayerNorm output, not of the final embedding; see docs/RESULTS_UEC.md).

    Args:
        cfg: the backbone (any HF model, ``pkg:`` paths included).
        member_id: name in tables; default ``cfg.name``.
        layer: dotted path of the linear layer; default ``encoder.layer.-1.output.dense``.
        laplace: a fitted posterior, or ``None`` until :meth:`fit` / :meth:`load`.
        device: where the backbone runs.
        backbone: an already loaded backbone for ``cfg`` (shares the model, no reload).
    """

    def __init__(
        self,
        cfg: BackboneConfig,
        member_id: str | None = None,
        layer: str | None = None,
        laplace: DiagonalLaplace | None = None,
        device: str | torch.device = "cpu",
        backbone: FrozenBackbone | None = None,
    ) -> None:
        self.backbone = backbone if backbone is not None else FrozenBackbone(cfg, device)
        self.cfg = self.backbone.cfg
        self.member_id = member_id or cfg.name
        self.layer_path, self.layer = last_linear(self.backbone.model, layer)
        if self.layer.out_features != self.backbone.hidden_size:
            raise ValueError(
                f"layer '{self.layer_path}' outputs {self.layer.out_features} features but the embedding has "
                f"{self.backbone.hidden_size}; its variance must match the mean, pick a layer projecting to "
                "the hidden size (for BERT-like models encoder.layer.-1.output.dense)"
            )
        self.laplace = laplace

    @property
    def dim(self) -> int:
        """Embedding dimension D (the backbone's hidden size)."""
        return self.backbone.hidden_size

    def features(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Pooled embeddings (N, H) and pooled hooked-layer inputs phi (N, F), in input order."""
        texts = validate_texts(texts)
        captured: list[torch.Tensor] = []
        hook = self.layer.register_forward_hook(lambda _m, inputs, _out: captured.append(inputs[0]))
        mean = torch.empty(len(texts), self.backbone.hidden_size)
        phi = torch.empty(len(texts), self.layer.in_features)
        try:
            for idx, hidden, mask in self.backbone.iter_states(texts):
                tokens = captured.pop()  # (B, T, F): the layer's input for this batch
                mean[idx] = pool(hidden, mask, self.cfg.pooling).cpu()  # (B, H)
                phi[idx] = pool(tokens.float(), mask, self.cfg.pooling).cpu()  # (B, F), same pooling
        finally:
            hook.remove()
        return mean, phi

    def fit(self, pairs: Sequence[tuple[str, str]], **laplace_kwargs: object) -> LaplaceMember:
        """Fit the posterior on positive pairs (query i's positive is passage i), prior by marglik.

        Args:
            pairs: (text, positive text) pairs, grouped into in-batch-negative batches in this order.
            **laplace_kwargs: :class:`DiagonalLaplace` options (hessian, prior, temperature, batch_size, ...).
        """
        if len(pairs) < 2:
            raise ValueError(f"Laplace fit of {self.member_id} needs >= 2 positive pairs, got {len(pairs)}")
        _, phi_a = self.features([a for a, _ in pairs])
        _, phi_b = self.features([b for _, b in pairs])
        bias = None if self.layer.bias is None else self.layer.bias.detach().cpu()
        self.laplace = DiagonalLaplace(**laplace_kwargs).fit(
            phi_a, phi_b, self.layer.weight.detach().cpu(), bias
        )
        return self

    def encode(self, texts: Sequence[str]) -> GaussianEmbeddings:
        """(N, D) Gaussians: mean = pooled embedding, var = phi^2 . var(W) + var(b)."""
        if self.laplace is None:
            raise RuntimeError(
                f"Laplace member {self.member_id} is not fitted: call fit(pairs) or LaplaceMember.load(dir)"
            )
        mean, phi = self.features(texts)
        var = self.laplace.predict_var(phi)  # (N, D)
        meta = {
            "member": self.member_id,
            "backbone": self.cfg.model,
            "revision": self.cfg.revision,
            "pooling": self.cfg.pooling.value,
            "source": "laplace",
            "layer": self.layer_path,
            "prior_precision": self.laplace.prior_precision,
            "normalisation": "none",
        }
        return GaussianEmbeddings(mean, var, meta)

    def cache_key(self) -> str:
        """Identity of the embeddings this member produces (weights, pooling, layer, posterior)."""
        post = None if self.laplace is None else [self.laplace.prior_precision, self.laplace.log_lik]
        return stable_digest(["laplace", self.backbone.fingerprint, asdict(self.cfg), self.layer_path, post])

    def save(self, directory: str | Path) -> Path:
        """Write ``laplace.safetensors`` + ``laplace.json`` + ``member.json`` atomically."""
        if self.laplace is None:
            raise RuntimeError(f"Laplace member {self.member_id} is not fitted; nothing to save")
        with atomic_dir(directory) as tmp:
            self.laplace.save(tmp)
            info = {
                "member_id": self.member_id,
                "layer": self.layer_path,
                "fingerprint": self.backbone.fingerprint,
                "backbone": OmegaConf.to_container(OmegaConf.structured(self.cfg), enum_to_str=True),
            }
            (tmp / MEMBER_FILE).write_text(json.dumps(info, indent=2))
        return Path(directory)

    @classmethod
    def load(
        cls, directory: str | Path, device: str | torch.device = "cpu", backbone: FrozenBackbone | None = None
    ) -> LaplaceMember:
        """Read a member written by :meth:`save`; refuses it when the backbone weights changed since."""
        folder = Path(directory)
        if not (folder / MEMBER_FILE).is_file():
            raise FileNotFoundError(f"{folder / MEMBER_FILE} is missing; not a saved Laplace member folder")
        info = json.loads((folder / MEMBER_FILE).read_text())
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(BackboneConfig), info["backbone"]))
        member = cls(cfg, info["member_id"], info["layer"], DiagonalLaplace.load(folder), device, backbone)
        if member.backbone.fingerprint != info["fingerprint"]:
            raise ValueError(
                f"{folder}: the Laplace posterior was fitted on weights {info['fingerprint']} but "
                f"{cfg.model} now has {member.backbone.fingerprint}; refit the member"
            )
        return member


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
        if folder is not None and folder.is_dir():
            emb = GaussianEmbeddings.load(folder)
        else:
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
