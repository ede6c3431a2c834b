"""A per-backbone, text-keyed store of pooled sentence embeddings (the expensive part of a member).

A Laplace member's posterior sits on a map placed *after* the model's scored embedding (see
``ucse/uec/laplace.py``), so refitting the posterior, its prior or its variance scale never needs the
backbone again: only the pooled embeddings of the texts, stored here once per backbone identity.

Layout: ``<root>/<backbone-key>/pooled.safetensors`` (tensor ``pooled`` (N, H) float32) and
``texts.json`` (the N texts, row order). New texts are appended by rewriting both files atomically.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from ucse import atomic, json_read
from ucse.backbone import FrozenBackbone, validate_texts
from ucse.uec.digest import stable_digest

logger = logging.getLogger(__name__)


def pooled_key(backbone: FrozenBackbone) -> str:
    """Store key of a backbone: a digest of its weight fingerprint and its full config."""
    return stable_digest(["pooled", backbone.fingerprint, asdict(backbone.cfg)])


class PooledStore:
    """Pooled embeddings of one backbone, memoised by text on disk (``root=None``: memory only).

    Args:
        backbone: the frozen backbone (its fingerprint and config form the key).
        root: folder holding one sub-folder per backbone key.
        key: the sub-folder name (a digest of the backbone identity).
    """

    def __init__(self, backbone: FrozenBackbone, root: str | Path | None, key: str) -> None:
        self.backbone = backbone
        self.folder = None if root is None else Path(root) / key
        self.rows: dict[str, int] = {}
        self.pooled = torch.empty(0, backbone.hidden_size)
        self.encoded_texts = 0  # texts actually sent to the backbone (tests prove cache hits with it)
        self.chunk = 2048  # texts encoded between two writes
        if self.folder is not None and (self.folder / "texts.json").is_file():
            self._read()

    def _read(self) -> None:
        assert self.folder is not None
        try:
            texts = json_read.loads((self.folder / "texts.json").read_text())
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ValueError("texts.json is not a list of texts")
            pooled = load_file(str(self.folder / "pooled.safetensors"))["pooled"]
            if pooled.shape != (len(texts), self.backbone.hidden_size) or not bool(
                torch.isfinite(pooled).all()
            ):
                raise ValueError(f"pooled {tuple(pooled.shape)} does not match {len(texts)} texts")
        except (OSError, ValueError, KeyError, SafetensorError) as err:
            logger.warning("pooled store %s is unreadable (%s); it is rebuilt", self.folder, err)
            return
        self.pooled = pooled.float()
        self.rows = {t: i for i, t in enumerate(texts)}

    def get(self, texts: Sequence[str]) -> torch.Tensor:
        """(N, H) pooled embeddings of ``texts`` in input order; only unseen texts are encoded."""
        texts = validate_texts(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self.rows))
        for start in range(0, len(missing), self.chunk):  # written per chunk: a long pass resumes
            part = missing[start : start + self.chunk]
            new = self.backbone.pooled(part)  # (M, H)
            self.encoded_texts += len(part)
            base = len(self.pooled)
            self.pooled = torch.cat([self.pooled, new.float()])
            self.rows.update({t: base + i for i, t in enumerate(part)})
            self._write()
        return self.pooled[torch.tensor([self.rows[t] for t in texts], dtype=torch.long)]

    def _write(self) -> None:
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        texts = sorted(self.rows, key=self.rows.__getitem__)
        # Tensors first, texts last: a reader that finds texts.json finds matching tensors (checked).
        with atomic.atomic_file(self.folder / "pooled.safetensors", "wb") as fh:
            fh.write(save({"pooled": self.pooled.contiguous()}))
        atomic.write_json(self.folder / "texts.json", texts)
        info = {"model": self.backbone.cfg.model, "fingerprint": self.backbone.fingerprint}
        atomic.write_json(
            self.folder / "backbone.json", {**info, "config": asdict(self.backbone.cfg)}, default=str
        )
