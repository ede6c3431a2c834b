"""Hidden-state cache: the frozen backbone runs once per (model, task, split, prompt, texts, ...).

On disk each entry is one folder named by its key (sha256 of the key parts)::

    <root>/<key>/states.npy   (sum_i T_i, H) fp16, or bf16 stored as its uint16 bit pattern
    <root>/<key>/offsets.npy  (N + 1,) int64; text i owns rows offsets[i]:offsets[i+1]
    <root>/<key>/meta.json    key parts, N, H, dtype, created

Entries are written batch by batch into a memory map inside ``<root>/.tmp-<key>-<pid>-<rand>`` and renamed
into place when complete, so a half-written entry is never visible. Reads are memory-mapped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from ucse.backbone.encoder import FrozenBackbone, validate_texts
from ucse.config import CacheDtype

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1
_NP_DTYPES = {CacheDtype.fp16: np.float16, CacheDtype.bf16: np.uint16}
_STALE_SECONDS = 24 * 3600


class CacheError(ValueError):
    """A cache entry is missing, corrupt or does not match what was asked for."""


@runtime_checkable
class TokenStates(Protocol):
    """Token states of N texts, served as right-padded batches."""

    lengths: np.ndarray
    """(N,) token count of each text."""
    hidden_size: int
    """Width H of the states."""

    def __len__(self) -> int:
        """Number of texts N."""
        ...

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Return hidden (B, Tmax, H) float32 and mask (B, Tmax) long, right-padded, for ``indices``."""
        ...


def _check_indices(indices: Sequence[int], n: int) -> list[int]:
    idx = [int(i) for i in indices]
    if not idx:
        raise IndexError("batch() needs at least one index.")
    bad = [i for i in idx if not 0 <= i < n]
    if bad:
        raise IndexError(f"indices {bad[:5]} out of range for {n} texts.")
    return idx


def right_pad(rows: Sequence[torch.Tensor], hidden_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack (T_i, H) rows into hidden (B, Tmax, H) float32 and mask (B, Tmax) long, padding on the right."""
    t_max = max(r.shape[0] for r in rows)
    hidden = torch.zeros(len(rows), t_max, hidden_size)  # (B, Tmax, H)
    mask = torch.zeros(len(rows), t_max, dtype=torch.long)  # (B, Tmax)
    for b, r in enumerate(rows):
        hidden[b, : r.shape[0]] = r
        mask[b, : r.shape[0]] = 1
    return hidden, mask


class CachedStates:
    """A validated, memory-mapped cache entry (see the module docstring for the layout).

    Args:
        path: the entry folder.
        expected_parts: when given, the key parts the entry must have been built for.

    Raises:
        CacheError: the folder is missing, corrupt or built for other key parts.
    """

    def __init__(self, path: str | Path, expected_parts: dict | None = None) -> None:
        self.path = Path(path)
        try:
            self.meta = json.loads((self.path / "meta.json").read_text())
            self.dtype = CacheDtype(self.meta["dtype"])
            n, h = int(self.meta["n"]), int(self.meta["hidden_size"])
            self.offsets = np.load(self.path / "offsets.npy", allow_pickle=False)
            self._states = np.load(self.path / "states.npy", mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CacheError(f"Cache entry '{self.path}' is unreadable ({err}); delete the folder.") from err
        problems = []
        if self.meta.get("format") != CACHE_FORMAT:
            problems.append(f"format {self.meta.get('format')} != {CACHE_FORMAT}")
        if self.meta.get("key") != self.path.name:
            problems.append(f"meta key {self.meta.get('key')!r} != folder name")
        if expected_parts is not None and self.meta.get("parts") != expected_parts:
            problems.append("key parts differ from the requested ones")
        if self.offsets.shape != (n + 1,) or not np.issubdtype(self.offsets.dtype, np.integer):
            problems.append(f"offsets {self.offsets.shape} {self.offsets.dtype}, expected ({n + 1},) int")
        elif self.offsets[0] != 0 or np.any(np.diff(self.offsets) < 1):
            problems.append("offsets are not strictly increasing from 0")
        elif self._states.ndim != 2 or self._states.shape != (int(self.offsets[-1]), h):
            problems.append(f"states shape {self._states.shape}, expected ({int(self.offsets[-1])}, {h})")
        if self._states.dtype != _NP_DTYPES[self.dtype]:
            problems.append(f"states dtype {self._states.dtype} does not match {self.dtype.value}")
        if problems:
            raise CacheError(f"Cache entry '{self.path}' is corrupt: {'; '.join(problems)}. Delete it.")
        self.lengths = np.diff(self.offsets)  # (N,)
        self.hidden_size = h

    def __len__(self) -> int:
        return len(self.lengths)

    def __reduce__(self) -> tuple:
        # DataLoader workers get a reopened memory map, not a pickled copy of all states.
        return (CachedStates, (self.path, self.meta.get("parts")))

    def states(self, i: int) -> torch.Tensor:
        """(T_i, H) float32 token states of text ``i``."""
        rows = np.array(self._states[self.offsets[i] : self.offsets[i + 1]])  # copy out of the memory map
        if self.dtype is CacheDtype.bf16:
            return torch.from_numpy(rows.view(np.int16)).view(torch.bfloat16).float()
        return torch.from_numpy(rows).float()

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden (B, Tmax, H) float32 and mask (B, Tmax) long for ``indices``, right-padded."""
        idx = _check_indices(indices, len(self))
        return right_pad([self.states(i) for i in idx], self.hidden_size)


class OnTheFlyStates:
    """Same interface as ``CachedStates`` but runs the backbone on every ``batch()`` call (no cache).

    Args:
        backbone: the frozen backbone.
        texts: the N texts.
        batch_size: texts per backbone forward inside one ``batch()`` call; default the backbone's.
    """

    def __init__(self, backbone: FrozenBackbone, texts: Sequence[str], batch_size: int | None = None) -> None:
        self.backbone = backbone
        self.texts = validate_texts(texts)
        self.batch_size = batch_size
        self.lengths = backbone.token_lengths(self.texts)  # (N,) tokenisation only
        self.hidden_size = backbone.hidden_size

    def __len__(self) -> int:
        return len(self.texts)

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden (B, Tmax, H) float32 and mask (B, Tmax) long for ``indices``, right-padded, on CPU."""
        idx = _check_indices(indices, len(self))
        rows = self.backbone.token_states([self.texts[i] for i in idx], self.batch_size)
        return right_pad(rows, self.hidden_size)


class SubsetStates:
    """Rows ``indices`` of another ``TokenStates``, in that order (a split as a view of a cached pool).

    Splits are views so that one cache entry per task serves every seed: a different seed carves a
    different validation slice out of train, but the pool of texts, and so the cache key, is the same.
    """

    def __init__(self, base: TokenStates, indices: Sequence[int]) -> None:
        self.base = base
        self.indices = np.asarray(_check_indices(indices, len(base)) if len(indices) else [], dtype=np.int64)
        self.lengths = np.asarray(base.lengths)[self.indices]
        self.hidden_size = base.hidden_size

    def __len__(self) -> int:
        return len(self.indices)

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded hidden (B, Tmax, H) and mask (B, Tmax) of the selected rows."""
        idx = _check_indices(indices, len(self))
        return self.base.batch(self.indices[idx].tolist())


def texts_hash(texts: Sequence[str]) -> str:
    """sha256 over the texts in order (length-prefixed so boundaries cannot shift)."""
    digest = hashlib.sha256()
    for t in texts:
        data = t.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


class HiddenStateCache:
    """Builds and reuses ``CachedStates`` entries under ``root``.

    Args:
        root: cache folder; default env ``UCSE_CACHE_DIR``, else ``~/.cache/ucse``.
        dtype: storage dtype of new entries.

    Attributes:
        builds: number of entries this object built (a cache hit does not count).
    """

    def __init__(self, root: str | Path | None = None, dtype: CacheDtype | str = CacheDtype.fp16) -> None:
        default = os.environ.get("UCSE_CACHE_DIR") or Path.home() / ".cache" / "ucse"
        self.root = Path(root if root is not None else default).expanduser()
        self.dtype = CacheDtype(dtype)
        self.builds = 0

    def key_parts(self, backbone: FrozenBackbone, texts: Sequence[str], task: str, split: str) -> dict:
        """Everything that determines the cached states (JSON-serialisable)."""
        cfg = backbone.cfg
        return {
            "format": CACHE_FORMAT,
            "model": backbone.fingerprint,
            "task": task,
            "split": split,
            "max_length": backbone.max_length,
            "prompt": cfg.prompt,
            "instruction": backbone.instruction,
            "append_eos": bool(cfg.append_eos),
            "precision": str(getattr(cfg.precision, "value", cfg.precision)),
            "texts": texts_hash(texts),
            "n": len(texts),
            "dtype": self.dtype.value,
        }

    def key(self, backbone: FrozenBackbone, texts: Sequence[str], task: str, split: str) -> str:
        """sha256 hex of the key parts; also the entry's folder name."""
        parts = self.key_parts(backbone, validate_texts(texts), task, split)
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def size_bytes(self) -> int:
        """Total bytes of all files under the cache root."""
        if not self.root.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    def get_or_build(
        self, backbone: FrozenBackbone, texts: Sequence[str], task: str, split: str
    ) -> CachedStates:
        """Return the entry for these texts, building it (one backbone pass) if absent or corrupt.

        Args:
            backbone: the frozen backbone (its fingerprint, prompt, instruction, ... are part of the key).
            texts: the N texts of the split, in dataset order.
            task: task name.
            split: split name.

        Returns:
            The memory-mapped entry; ``batch(i)`` rows follow ``texts`` order.
        """
        texts = validate_texts(texts)
        parts = self.key_parts(backbone, texts, task, split)
        key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        final = self.root / key
        if final.exists():
            try:
                return CachedStates(final, expected_parts=parts)
            except CacheError as err:
                logger.warning("Rebuilding corrupt cache entry: %s", err)
                self._discard(final, key)
        self.root.mkdir(parents=True, exist_ok=True)
        self._clean_stale(key)
        tmp = self.root / f".tmp-{key}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            self._build(tmp, backbone, texts, parts, key)
            try:
                tmp.rename(final)
            except OSError:
                if not final.exists():  # a concurrent builder may have won the rename; else a real error
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self.builds += 1
        return CachedStates(final, expected_parts=parts)

    def _build(self, tmp: Path, backbone: FrozenBackbone, texts: list[str], parts: dict, key: str) -> None:
        """Write a complete entry into ``tmp`` batch by batch (never all states in RAM)."""
        lengths = backbone.token_lengths(texts)  # (N,)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # (N + 1,)
        h = backbone.hidden_size
        tmp.mkdir(parents=True)
        states = np.lib.format.open_memmap(
            tmp / "states.npy", mode="w+", dtype=_NP_DTYPES[self.dtype], shape=(int(offsets[-1]), h)
        )
        for idx, hidden, mask in backbone.iter_states(texts):
            hidden, keep = hidden.cpu(), mask.cpu().bool()
            for b, i in enumerate(idx.tolist()):
                rows = hidden[b, keep[b]]  # (T_i, H)
                if rows.shape[0] != lengths[i]:
                    raise CacheError(f"text {i}: model gave {rows.shape[0]} tokens, tokenizer {lengths[i]}")
                states[offsets[i] : offsets[i + 1]] = self._encode_rows(rows, i)
        states.flush()
        del states
        np.save(tmp / "offsets.npy", offsets)
        meta = {
            "format": CACHE_FORMAT,
            "key": key,
            "parts": parts,
            "n": len(texts),
            "hidden_size": h,
            "dtype": self.dtype.value,
            "created": datetime.now(timezone.utc).isoformat(),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))  # written last: marks the entry complete

    def _encode_rows(self, rows: torch.Tensor, i: int) -> np.ndarray:
        """(T_i, H) float32 -> storage array; fp16 overflow is an error, not silent inf."""
        if self.dtype is CacheDtype.bf16:
            return rows.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        half = rows.to(torch.float16)
        if not bool(torch.isfinite(half).all()):
            raise CacheError(
                f"Token states of text {i} overflow fp16 (max |x| = {rows.abs().max().item():.3g}); "
                "set cache.dtype=bf16."
            )
        return half.numpy()

    def _discard(self, folder: Path, key: str) -> None:
        """Move a bad entry out of sight atomically, then delete it."""
        trash = self.root / f".tmp-{key}-{os.getpid()}-bad{uuid.uuid4().hex[:8]}"
        folder.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)

    def _clean_stale(self, key: str) -> None:
        """Delete temp folders of this key left by dead processes (or older than a day)."""
        for tmp in self.root.glob(f".tmp-{key}-*"):
            try:
                pid = int(tmp.name.split("-")[2])
            except (IndexError, ValueError):
                pid = -1
            old = time.time() - tmp.stat().st_mtime > _STALE_SECONDS
            if old or pid < 0 or (pid != os.getpid() and not _pid_alive(pid)):
                shutil.rmtree(tmp, ignore_errors=True)
