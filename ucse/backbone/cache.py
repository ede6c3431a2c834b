"""Hidden-state cache: the frozen backbone runs once per (model, task, split, prompt, texts, ...).

On disk each entry is one folder named by its key (sha256 of the key parts)::

    <root>/<key>/states.npy   (sum_i T_i, H) fp16, or bf16 stored as its uint16 bit pattern
    <root>/<key>/offsets.npy  (N + 1,) int64; text i owns rows offsets[i]:offsets[i+1]
    <root>/<key>/meta.json    key parts, N, H, dtype, created, xxh3-128 checksums of the two .npy files

Entries are written batch by batch into a memory map inside ``<root>/.tmp-<key>-<pid>-<rand>`` and renamed
into place when complete, so a half-written entry is never visible (:mod:`ucse.backbone.cache_folder`).
Reads are memory-mapped and verified against the checksums (once per process); a corrupt entry is rebuilt
with a warning. A cache folder that cannot be written is a ``CacheError`` naming it and the fix.

With several processes (``devices=N``), every rank encodes the texts ``rank::world`` into a shard folder and
rank 0 assembles the shards into the same single-file entry a single process writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from ucse.backbone.cache_entries import files_bytes
from ucse.backbone.cache_folder import (
    check_cache_root,
    clean_stale,
    discard,
    publish,
    reserve,
    temp_folder,
)
from ucse.backbone.encoder import FrozenBackbone, validate_texts
from ucse.backbone.progress import PassProgress
from ucse.backbone.states import (
    CACHE_FORMAT,
    NP_DTYPES,
    CachedStates,
    CacheError,
    DeviceStates,
    OnTheFlyStates,
    SubsetStates,
    TokenStates,
    file_checksum,
    gather_rows,
    right_pad,
)
from ucse.config import CacheDtype, LongTexts

__all__ = [
    "CACHE_FORMAT",
    "CacheError",
    "CachedStates",
    "DeviceStates",
    "Dist",
    "HiddenStateCache",
    "OnTheFlyStates",
    "SubsetStates",
    "TokenStates",
    "gather_rows",
    "right_pad",
    "texts_hash",
]

logger = logging.getLogger(__name__)

_ASSEMBLE_TEXTS = 4096  # texts copied per step when assembling shards (bounds the RAM used)


class Dist(Protocol):
    """The collective operations a sharded build needs (Lightning's ``trainer.strategy`` has them)."""

    global_rank: int
    """This process's rank in 0..world_size-1."""
    world_size: int
    """Number of processes."""

    def barrier(self, name: str | None = None) -> None:
        """Wait until every process reaches this point."""
        ...

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        """``obj`` of rank ``src`` on every rank."""
        ...


def texts_hash(texts: Sequence[str]) -> str:
    """sha256 over the texts in order (length-prefixed so boundaries cannot shift)."""
    digest = hashlib.sha256()
    for t in texts:
        # surrogatepass: the same bytes for every valid text, and a lone surrogate reaches the tokenizer's
        # text check (which names its row) instead of failing here without a row
        data = t.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class HiddenStateCache:
    """Builds and reuses ``CachedStates`` entries under ``root``.

    Args:
        root: cache folder; default env ``UCSE_CACHE_DIR``, else ``~/.cache/ucse``.
        dtype: storage dtype of new entries.
        progress: show the backbone pass's progress (texts/s, ETA) while building.

    Attributes:
        builds: number of entries this object built or helped build (a cache hit does not count).
        used: the entry folders this object returned (built or reused), in order.

    Raises:
        CacheError: ``root`` exists but is not a folder.
    """

    def __init__(
        self, root: str | Path | None = None, dtype: CacheDtype | str = CacheDtype.fp16, progress: bool = True
    ) -> None:
        self.root = self.check_root(root)
        self.dtype = CacheDtype(dtype)
        self.progress = progress
        self.builds = 0
        self.used: list[Path] = []

    @staticmethod
    def check_root(root: str | Path | None = None) -> Path:
        """The cache folder, checked only (:func:`ucse.backbone.cache_folder.check_cache_root`)."""
        return check_cache_root(root)

    def key_parts(self, backbone: FrozenBackbone, texts: Sequence[str], task: str, split: str) -> dict:
        """Everything that determines the cached states (JSON-serialisable)."""
        cfg = backbone.cfg
        extra = {"skip_prompt_prefix": True} if cfg.skip_prompt_prefix else {}  # absent: old keys stay
        if cfg.long_texts is LongTexts.windows:  # absent for truncate: old keys stay
            extra["windows"] = cfg.max_windows
        if cfg.layer is not None:
            extra["layer"] = backbone.layer  # resolved to a non-negative index: -1 and L share an entry
        if getattr(backbone, "code_fingerprint", None):  # the model's own code, under trust_remote_code
            extra["code"] = backbone.code_fingerprint
        return {
            **extra,
            "format": CACHE_FORMAT,
            "model": backbone.fingerprint,
            "task": task,
            "split": split,
            "max_length": backbone.max_length,
            "prompt": cfg.prompt,
            "instruction": backbone.instruction,
            "append_eos": bool(cfg.append_eos),
            "precision": backbone.precision.value,  # the effective one: auto resolves per device
            "texts": texts_hash(texts),
            "n": len(texts),
            "dtype": self.dtype.value,
        }

    def key(self, backbone: FrozenBackbone, texts: Sequence[str], task: str, split: str) -> str:
        """sha256 hex of the key parts; also the entry's folder name."""
        parts = self.key_parts(backbone, validate_texts(texts), task, split)
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def size_bytes(self) -> int:
        """Total bytes of all files under the cache root (every entry, whichever run wrote it)."""
        return files_bytes(self.root) if self.root.is_dir() else 0

    def used_bytes(self) -> int:
        """Bytes of the entries this object returned: what a run's states take on disk.

        A shared cache folder also holds other runs' entries, which :meth:`size_bytes` counts.
        """
        return sum(files_bytes(e) for e in dict.fromkeys(self.used))

    def _open_valid(self, final: Path, parts: dict, key: str) -> CachedStates | None:
        """The entry at ``final`` if present and sound; a corrupt one is discarded with a warning."""
        try:
            inode = final.stat().st_ino
        except FileNotFoundError:
            return None
        try:
            return CachedStates(final, expected_parts=parts)
        except CacheError as err:
            logger.warning("Rebuilding corrupt cache entry: %s", err)
            discard(self.root, final, key, inode)
            return None

    def _mkdir_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CacheError(
                f"Cannot create cache folder '{self.root}' ({err}); set cache.dir or UCSE_CACHE_DIR to a "
                "writable folder."
            ) from err

    def get_or_build(
        self, backbone: FrozenBackbone, texts: Sequence[str], task: str, split: str, dist: Dist | None = None
    ) -> CachedStates:
        """Return the entry for these texts, building it (one backbone pass) if absent or corrupt.

        Args:
            backbone: the frozen backbone (its fingerprint, prompt, instruction, ... are part of the key).
            texts: the N texts of the split, in dataset order.
            task: task name.
            split: split name.
            dist: with ``world_size > 1``, every rank encodes its slice ``rank::world_size`` of the texts
                and rank 0 assembles the entry; every rank must call this with the same arguments.

        Returns:
            The memory-mapped entry; ``batch(i)`` rows follow ``texts`` order.

        Raises:
            CacheError: the cache folder cannot be written (read-only, full disk...), naming it and the fix.
        """
        try:
            entry = self._get_or_build(backbone, texts, task, split, dist)
        except OSError as err:
            raise CacheError(
                f"Cannot use the hidden-state cache folder '{self.root}' ({err.strerror or err}: "
                f"{err.filename or self.root}); set cache.dir=<a writable folder with free space> (or env "
                "UCSE_CACHE_DIR), or cache.enabled=false to encode the texts on the fly."
            ) from err
        self.used.append(entry.path)
        try:  # when a run last read it: what `ucse cache prune` goes by (ucse.backbone.cache_entries)
            os.utime(entry.path)
        except OSError:
            pass  # a read-only cache folder is still read
        return entry

    def _get_or_build(
        self, backbone: FrozenBackbone, texts: Sequence[str], task: str, split: str, dist: Dist | None
    ) -> CachedStates:
        texts = validate_texts(texts)
        parts = self.key_parts(backbone, texts, task, split)
        key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        final = self.root / key
        if dist is not None and dist.world_size > 1:
            return self._get_or_build_sharded(backbone, texts, parts, key, dist)
        entry = self._open_valid(final, parts, key)
        if entry is not None:
            return entry
        self._mkdir_root()
        clean_stale(self.root, key)
        tmp = temp_folder(self.root, key)
        try:
            self._build(tmp, backbone, texts, parts, key)
            self._seal(tmp)
            publish(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self.builds += 1
        return CachedStates(final, expected_parts=parts)

    def _get_or_build_sharded(
        self, backbone: FrozenBackbone, texts: list[str], parts: dict, key: str, dist: Dist
    ) -> CachedStates:
        """Every rank encodes ``texts[rank::world]``; rank 0 assembles the shards into the entry."""
        rank, world = dist.global_rank, dist.world_size
        final = self.root / key
        if rank == 0:
            self._mkdir_root()
            present = self._open_valid(final, parts, key) is not None  # discards a corrupt entry
            if not present:
                clean_stale(self.root, key)
        present = bool(dist.broadcast(present if rank == 0 else None, 0))
        if present:
            return CachedStates(final, expected_parts=parts)
        tag = dist.broadcast(uuid.uuid4().hex[:8] if rank == 0 else None, 0)
        shard = temp_folder(self.root, key, tag, rank)
        try:
            self._build(shard, backbone, texts[rank::world], parts, key)
            dist.barrier("ucse-cache-shards-written")
            if rank == 0:
                tmp = temp_folder(self.root, key, tag)
                try:
                    shards = [next(self.root.glob(f".tmp-{key}-*-{tag}r{r}")) for r in range(world)]
                    self._assemble(tmp, shards, texts, parts, key, backbone.hidden_size)
                    self._seal(tmp)
                    publish(tmp, final)
                finally:
                    if tmp.exists():
                        shutil.rmtree(tmp, ignore_errors=True)
            dist.barrier("ucse-cache-assembled")
        finally:
            if shard.exists():
                shutil.rmtree(shard, ignore_errors=True)
        self.builds += 1
        return CachedStates(final, expected_parts=parts)

    def _assemble(
        self, tmp: Path, shards: list[Path], texts: list[str], parts: dict, key: str, h: int
    ) -> None:
        """Interleave shard r's texts (global indices r, r + world, ...) into one entry in text order."""
        world = len(shards)
        offs = [np.load(s / "offsets.npy", allow_pickle=False) for s in shards]
        lengths = np.empty(len(texts), dtype=np.int64)
        for r, o in enumerate(offs):
            lengths[r::world] = np.diff(o)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # (N + 1,)
        tmp.mkdir(parents=True)
        out = np.lib.format.open_memmap(
            tmp / "states.npy", mode="w+", dtype=NP_DTYPES[self.dtype], shape=(int(offsets[-1]), h)
        )
        reserve(tmp / "states.npy")
        for r, (folder, o) in enumerate(zip(shards, offs)):
            src = np.load(folder / "states.npy", mmap_mode="r", allow_pickle=False)
            glob_idx = np.arange(r, len(texts), world)  # (n_r,) global index of the shard's texts
            for a in range(0, len(glob_idx), _ASSEMBLE_TEXTS):
                b = min(a + _ASSEMBLE_TEXTS, len(glob_idx))
                dest = _row_ranges(offsets[glob_idx[a:b]], lengths[glob_idx[a:b]])
                out[dest] = src[o[a] : o[b]]
        out.flush()
        del out
        np.save(tmp / "offsets.npy", offsets)
        self._write_meta(tmp, parts, key, len(texts), h)

    def _build(self, tmp: Path, backbone: FrozenBackbone, texts: list[str], parts: dict, key: str) -> None:
        """Write a complete entry into ``tmp`` batch by batch (never all states in RAM)."""
        tok = backbone.tokenized(texts)  # once: its lengths size the file, then the pass reads it
        lengths = backbone.token_lengths(texts, tok)  # (N,)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # (N + 1,)
        h = backbone.hidden_size
        tmp.mkdir(parents=True)
        states = np.lib.format.open_memmap(
            tmp / "states.npy", mode="w+", dtype=NP_DTYPES[self.dtype], shape=(int(offsets[-1]), h)
        )
        reserve(tmp / "states.npy")
        desc = f"backbone pass ({parts['task']}, {len(texts)} texts)"
        with PassProgress(len(texts), desc, enabled=self.progress) as progress:
            for idx, hidden, mask in backbone.iter_states(texts, tokenized=tok):  # (B,), (B, T, H), (B, T)
                idx_np = idx.numpy()
                keep = mask.bool()
                got = keep.sum(dim=1).cpu().numpy()  # (B,)
                if not np.array_equal(got, lengths[idx_np]):
                    b = int(np.flatnonzero(got != lengths[idx_np])[0])
                    i = idx_np[b]
                    raise CacheError(f"text {i}: model gave {got[b]} tokens, tokenizer {lengths[i]}")
                # Real tokens only, row-major: idx[0]'s tokens, then idx[1]'s, ... (left or right pads).
                block = self._encode_rows(hidden[keep], idx_np)  # (sum_b T_b, H), converted on the device
                # Each text's rows are contiguous in the file but a batch's texts are not adjacent (batches
                # are length-sorted): one scattered write of the whole block instead of one per text.
                states[_row_ranges(offsets[idx_np], lengths[idx_np])] = block
                progress.update(len(idx_np))
        states.flush()
        del states
        np.save(tmp / "offsets.npy", offsets)
        self._write_meta(tmp, parts, key, len(texts), h)

    def _write_meta(self, tmp: Path, parts: dict, key: str, n: int, h: int) -> None:
        meta = {
            "format": CACHE_FORMAT,
            "key": key,
            "parts": parts,
            "n": n,
            "hidden_size": h,
            "dtype": self.dtype.value,
            "created": datetime.now(timezone.utc).isoformat(),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))

    @staticmethod
    def _seal(tmp: Path) -> None:
        """Record the checksums of the finished files in meta.json (read back from the page cache)."""
        meta = json.loads((tmp / "meta.json").read_text())
        meta["checksums"] = {name: file_checksum(tmp / name) for name in ("states.npy", "offsets.npy")}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))

    def _encode_rows(self, rows: torch.Tensor, idx: np.ndarray) -> np.ndarray:
        """(R, H) float32 rows of the texts ``idx`` -> storage array; fp16 overflow is an error, not inf."""
        if self.dtype is CacheDtype.bf16:
            return rows.to(torch.bfloat16).view(torch.int16).cpu().numpy().view(np.uint16)
        half = rows.to(torch.float16)
        if not bool(torch.isfinite(half).all()):
            raise CacheError(
                f"Token states of a text among {idx[:5].tolist()} overflow fp16 (max |x| = "
                f"{rows.abs().max().item():.3g}); set cache.dtype=bf16."
            )
        return half.cpu().numpy()


def _row_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(starts[b], starts[b] + lengths[b])`` over b, without a Python loop."""
    total = int(lengths.sum())
    within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # position inside its text
    return np.repeat(starts, lengths) + within
