"""A trained head plus its frozen backbone as a text encoder into Gaussian embeddings, without Lightning."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from ucse.backbone.cache import OnTheFlyStates, SubsetStates, TokenStates
from ucse.backbone.encoder import FrozenBackbone, validate_texts
from ucse.backbone.pooling import unit_pool
from ucse.config import BackboneConfig, Precision
from ucse.config.run_layout import resolve_head_dir
from ucse.heads import load_head
from ucse.heads.base import Head, HeadOutput
from ucse.heads.meta import stored_backbone, stored_instruction

log = logging.getLogger(__name__)


@dataclass
class EncodedBatch:
    """Head outputs for N texts.

    Attributes:
        mean: (N, D) mu, the embedding.
        var: (N, D) sigma^2, or ``None`` for a deterministic head.
        logits: (N, C) class scores computed on mu.
        pooled: (N, H) the frozen backbone's pooled vectors, L2-normalised (the backbone's pooling, before any
            head): the features of the out-of-scope flag, which no head training has shaped.
    """

    mean: np.ndarray
    var: np.ndarray | None
    logits: np.ndarray
    pooled: np.ndarray | None = None


class UcseEncoder:
    """Encodes texts into (mean, variance) with a saved head (``head/``) and the backbone it names.

    Implements the ``TextEncoder`` protocol (``encode(texts) -> (N, D)``) so it plugs into the MTEB
    adapter; ``encode_gaussian`` gives the variance too. Inference is deterministic: mu, not a sample.
    """

    def __init__(
        self,
        head: Head,
        meta: dict,
        backbone: FrozenBackbone,
        batch_size: int = 64,
        compile_head: bool = False,
    ) -> None:
        self.head = head.eval()
        self.meta = meta
        self.backbone = backbone
        self.batch_size = batch_size
        self.compile_head = compile_head  # the head through torch.compile (ucse.heads.compiled)
        self._compiled: Any = None  # a ucse.heads.compiled.CompiledHead once compile_head runs
        self._known: dict[str, int] = {}
        self._known_states: TokenStates | None = None

    def attach_states(self, texts: list[str], states: TokenStates) -> None:
        """Serve these texts from precomputed token states (e.g. a run's cache pool), not the backbone.

        The states must come from this backbone with this prompt; the hidden-state cache's key guarantees
        that for the pool a training run built. Texts not in ``texts`` are still encoded on the fly.
        """
        if len(texts) != len(states):
            raise ValueError(f"attach_states: {len(texts)} texts but {len(states)} token-state rows.")
        self._known = {t: i for i, t in enumerate(texts)}
        self._known_states = states

    def states_for(self, texts: list[str]) -> TokenStates:
        """Token states of ``texts``: a view of the attached states when all are known, else computed."""
        if self._known_states is not None and all(t in self._known for t in texts):
            return SubsetStates(self._known_states, [self._known[t] for t in texts])
        return OnTheFlyStates(self.backbone, list(texts))

    def _autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast for the head wherever the backbone itself runs bf16, else nothing.

        On a GPU the backbone runs in bf16 weights, and an fp32 head would cost far more than its FLOPs
        (measured +9.7 % latency on short texts over a 0.6B backbone). On a CPU with native bf16 (where
        ``precision=auto`` runs the backbone bf16) the TextCNN's convolutions under autocast took a third of
        their fp32 time: predict / encode 0.655 -> 0.769 on Banking77 (docs/RESULTS.md section 9), the same
        3,080 labels and out-of-scope flags, calibrated confidence within 0.016. An fp32 backbone (AVX2 CPUs,
        ``precision=fp32``) keeps an fp32 head.
        """
        if self.backbone.precision is Precision.bf16:
            return torch.autocast(self.backbone.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _run(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """The head on (B, T, H) states and a (B, T) mask: compiled when ``compile_head``, else eager."""
        if not self.compile_head:
            return self.head(hidden, mask)
        if self._compiled is None or self._compiled.head is not self.head:  # compiled once per head
            # imported here: torch._dynamo alone adds ~1 s to every `import ucse` that never compiles
            from ucse.heads.compiled import CompiledHead

            self._compiled = CompiledHead(self.head)
        return self._compiled(hidden, mask)

    @classmethod
    def from_dir(
        cls,
        head_dir: str | Path,
        device: torch.device | str = "cpu",
        backbone_overrides: dict | None = None,
        trust_remote_code: bool = False,
        compile_head: bool = False,
    ) -> UcseEncoder:
        """Load ``head_dir`` (``config.json`` + ``model.safetensors``) and the backbone recorded in it.

        Args:
            head_dir: a head folder written by :func:`ucse.heads.save_head`, or the run folder holding it.
            device: where to run.
            backbone_overrides: the caller's changes to the stored backbone config.
            trust_remote_code: let the backbone's own model code run. Only the caller turns it on (here or in
                ``backbone_overrides``): a ``trust_remote_code`` stored in the head is ignored, so a run
                folder from elsewhere can never make ucse execute code.
            compile_head: run the head through ``torch.compile`` (opt-in: :mod:`ucse.heads.compiled`).

        Raises:
            ValueError: when the head's files or its ``meta.backbone`` are invalid, or the backbone's weights
                (their fingerprint) or hidden size are not the ones the head was trained on (checked before
                any text goes through it).
        """
        head_dir = resolve_head_dir(head_dir)
        head, meta = load_head(head_dir)
        overrides = dict(backbone_overrides or {})
        trust = bool(trust_remote_code or overrides.pop("trust_remote_code", False))
        stored = stored_backbone(meta, head_dir / "config.json")
        if stored.pop("trust_remote_code", False) and not trust:
            log.warning(
                "%s asks for trust_remote_code; ignored (a stored head never enables it). Pass "
                "trust_remote_code=true yourself if you trust that model's code.",
                head_dir,
            )
        merged = OmegaConf.merge(OmegaConf.structured(BackboneConfig), stored, overrides)
        bcfg = OmegaConf.to_object(merged)
        bcfg.trust_remote_code = trust
        instruction = stored_instruction(meta, head_dir / "config.json")
        backbone = FrozenBackbone(bcfg, device, instruction=instruction)
        trained_on = meta.get("backbone_fingerprint")
        if trained_on is not None and trained_on != backbone.fingerprint:  # heads saved before it: unchecked
            if not _same_hub_repo(str(trained_on), backbone.fingerprint):
                raise ValueError(
                    f"The head in {head_dir} was trained on backbone weights {str(trained_on)[:80]!r} but "
                    f"'{bcfg.model}' now loads {backbone.fingerprint[:80]!r} (other weights or tokenizer "
                    "files); use the backbone the head was trained on, or retrain the head on this one."
                )
            # A hub repo is named by the commit its revision resolves to (by the branch, before 2026-11-28):
            # another commit may change the weights or only a README, which the name cannot tell.
            log.warning(
                "%s was trained on %s; the hub cache now resolves that repo to %s. If the weights changed "
                "since, retrain the head.", head_dir, str(trained_on)[:80], backbone.fingerprint[:80],
            )  # fmt: skip
        expected = int(head.spec.hidden_size)
        if backbone.hidden_size != expected:
            raise ValueError(
                f"The head in {head_dir} was trained on {expected}-d token states but backbone "
                f"'{bcfg.model}' gives {backbone.hidden_size}-d ones; use the backbone the head was trained "
                "on (the one in its config.json)."
            )
        return cls(head.to(backbone.device), meta, backbone, compile_head=compile_head)

    @property
    def label_names(self) -> list[str]:
        """Class names in logit order."""
        return list(self.meta.get("label_names", []))

    @torch.inference_mode()
    def run_states(self, states: TokenStates) -> EncodedBatch:
        """Run the head over precomputed token states (e.g. a cached split) in length-sorted batches.

        The outputs are written into arrays allocated once, in input order: a list of per-row tensors
        stacked at the end held every row twice (2 x 4.9 KB per text for a 384-d head, ~1 GB at 100k texts).
        """
        n = len(states)
        if n == 0:
            raise ValueError("run_states needs at least one row of token states")
        order = np.argsort(-np.asarray(states.lengths), kind="stable")
        device = next(self.head.parameters()).device
        arrays: dict[str, np.ndarray | None] = {}
        for start in range(0, n, self.batch_size):
            idx = order[start : start + self.batch_size]
            hidden, mask = states.batch(idx.tolist())  # (B, T, H), (B, T)
            with self._autocast():
                out = self._run(hidden.to(device).float(), mask.to(device))
            parts = {
                "mean": out.mean,  # (B, D)
                "var": out.var,  # (B, D) or None
                "logits": out.logits,  # (B, C)
                "pooled": self._pooled(hidden, mask),  # (B, H)
            }
            if not arrays:
                arrays = {
                    k: None if v is None else np.empty((n, v.shape[1]), dtype=np.float32)
                    for k, v in parts.items()
                }
            for k, v in parts.items():
                if v is not None:
                    arrays[k][idx] = v.float().cpu().numpy()
        return EncodedBatch(arrays["mean"], arrays["var"], arrays["logits"], arrays["pooled"])

    def _pooled(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, H) float32 unit vectors: the backbone's pooling of (B, T, H) states, L2-normalised."""
        return unit_pool(hidden, mask.to(hidden.device), self.backbone.cfg.pooling)

    @torch.inference_mode()
    def run_texts(self, texts: list[str], batch_size: int | None = None) -> EncodedBatch:
        """Texts -> head outputs, backbone batch straight into the head on the backbone's device.

        The backbone's padded batch (left or right padding; the head's masking handles both) goes to the
        head without a round trip through CPU memory, so on a GPU the head adds only its own compute.
        ``batch_size``: texts per forward, as :meth:`FrozenBackbone.iter_states` takes it (default: the
        backbone's own).
        """
        texts = validate_texts(texts)
        n = len(texts)
        mean: torch.Tensor | None = None
        var: torch.Tensor | None = None
        logits: torch.Tensor | None = None
        pooled: torch.Tensor | None = None
        for idx, hidden, mask in self.backbone.iter_states(texts, batch_size):  # (B,), (B, T, H), (B, T)
            with self._autocast():
                out = self._run(hidden, mask)
            unit = self._pooled(hidden, mask)  # (B, H)
            if mean is None:  # allocate once the output widths are known; filled in input order
                mean = torch.empty(n, out.mean.shape[1])
                logits = torch.empty(n, out.logits.shape[1])
                var = None if out.var is None else torch.empty(n, out.var.shape[1])
                pooled = torch.empty(n, unit.shape[1])
            parts = [out.mean, out.logits, unit] + ([] if out.var is None else [out.var])
            host = torch.cat([t.float() for t in parts], dim=1).cpu()  # one device->host copy per batch
            d, c, h = mean.shape[1], logits.shape[1], unit.shape[1]
            mean[idx], logits[idx], pooled[idx] = host[:, :d], host[:, d : d + c], host[:, d + c : d + c + h]
            if var is not None:
                var[idx] = host[:, d + c + h :]
        assert mean is not None and logits is not None and pooled is not None
        return EncodedBatch(
            mean=mean.numpy(),
            var=None if var is None else var.numpy(),
            logits=logits.numpy(),
            pooled=pooled.numpy(),
        )

    def encode_gaussian(self, texts: list[str]) -> EncodedBatch:
        """Texts -> mean, variance and logits (attached states serve known texts, the backbone the rest)."""
        texts = list(validate_texts(texts))
        known = [i for i, t in enumerate(texts) if t in self._known] if self._known_states is not None else []
        if not known:
            return self.run_texts(texts)
        if len(known) == len(texts):
            return self.run_states(self.states_for(texts))
        unknown = [i for i, t in enumerate(texts) if t not in self._known]
        a = self.run_states(self.states_for([texts[i] for i in known]))
        b = self.run_texts([texts[i] for i in unknown])
        order = np.argsort(np.asarray(known + unknown))  # back to input order

        def join(x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
            return None if x is None or y is None else np.concatenate([x, y])[order]

        mean, logits = join(a.mean, b.mean), join(a.logits, b.logits)
        assert mean is not None and logits is not None
        return EncodedBatch(mean=mean, var=join(a.var, b.var), logits=logits, pooled=join(a.pooled, b.pooled))

    def encode(self, texts: list[str]) -> np.ndarray:
        """Texts -> (N, D) mu embeddings."""
        return self.encode_gaussian(texts).mean


def _same_hub_repo(a: str, b: str) -> bool:
    """Whether two fingerprints name the same hub repo (and GGUF file) at revisions that may differ."""

    def repo(f: str) -> tuple[str, str] | None:
        if not f.startswith("hub:") or "@" not in f:
            return None
        name, _, rest = f.partition("@")
        return name, rest.partition("#")[2]  # (hub:<id>, gguf file or "")

    return repo(a) is not None and repo(a) == repo(b)
