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
        idx = np.asarray(_check_indices(indices, len(self)), dtype=np.int64)
        rows, keep = gather_rows(self.offsets[idx], self.lengths[idx])  # (B, T), (B, T)
        block = np.asarray(self._states[rows.reshape(-1)])  # (B*T, H): one fancy-indexed read of the map
        hidden = _to_float(torch.from_numpy(block), self.dtype).view(*rows.shape, self.hidden_size)
        mask = torch.from_numpy(keep).long()
        return hidden.masked_fill_(~mask.bool().unsqueeze(-1), 0.0), mask

    def nbytes(self) -> int:
        """Bytes of the stored token states."""
        return int(self._states.nbytes)

    def to_device(self, device: torch.device | str) -> DeviceStates:
        """Copy the states into (accelerator) memory once; batches are then gathered there."""
        return DeviceStates(torch.from_numpy(np.asarray(self._states)), self.offsets, self.dtype, device)


def gather_rows(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers (B, Tmax) of a right-padded batch of texts stored as contiguous row ranges, and its mask.

    Text b owns rows ``starts[b] : starts[b] + lengths[b]``; padding positions point at the text's first row
    (any valid row: they are zeroed after the read) so that one fancy-indexed read fetches the whole batch.
    """
    t = np.arange(int(lengths.max()))  # (T,)
    keep = t[None, :] < lengths[:, None]  # (B, T)
    rows = np.where(keep, starts[:, None] + t[None, :], starts[:, None])  # (B, T)
    return rows, keep


def _to_float(block: torch.Tensor, dtype: CacheDtype) -> torch.Tensor:
    """Stored rows (fp16, or bf16 kept as its uint16/int16 bit pattern) -> float32."""
    if dtype is CacheDtype.bf16:
        return block.view(torch.int16).view(torch.bfloat16).float()
    return block.float()


class DeviceStates:
    """A cache entry held in device memory (e.g. a GPU), batches gathered there without host round trips.

    Written because the frozen backbone is so much larger than the head that, on a GPU, a training epoch
    over memory-mapped states is bound by host-side batch assembly and copies rather than by the head.

    Args:
        states: (sum_i T_i, H) stored rows (fp16, or bf16 bit patterns as int16/uint16).
        offsets: (N + 1,) row offsets; text i owns rows offsets[i]:offsets[i+1].
        dtype: storage dtype.
        device: where to keep them.
    """

    def __init__(
        self, states: torch.Tensor, offsets: np.ndarray, dtype: CacheDtype, device: torch.device | str
    ) -> None:
        self.device = torch.device(device)
        if dtype is CacheDtype.bf16:
            states = states.view(torch.int16).view(torch.bfloat16)
        self.states = states.to(self.device)  # (sum T_i, H) fp16 / bf16
        self.offsets = torch.as_tensor(np.asarray(offsets), dtype=torch.long, device=self.device)  # (N + 1,)
        self.lengths = np.diff(np.asarray(offsets))  # (N,) on the host: samplers read it
        self._lengths = self.offsets[1:] - self.offsets[:-1]  # (N,) on the device
        self.hidden_size = int(states.shape[1])

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden (B, Tmax, H) float32 and mask (B, Tmax) long on the device, right-padded."""
        idx = _check_indices(indices, len(self))
        t_max = int(self.lengths[idx].max())  # host-side lengths: no device sync
        sel = torch.as_tensor(idx, dtype=torch.long).to(self.device, non_blocking=True)  # (B,)
        t = torch.arange(t_max, device=self.device)  # (T,)
        keep = t[None, :] < self._lengths[sel][:, None]  # (B, T)
        rows = torch.where(keep, self.offsets[sel][:, None] + t[None, :], self.offsets[sel][:, None])
        hidden = self.states[rows].float().masked_fill_(~keep.unsqueeze(-1), 0.0)  # (B, T, H)
        return hidden, keep.long()


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
        for idx, hidden, mask in backbone.iter_states(texts):  # (B,), (B, T, H), (B, T)
            idx_np = idx.numpy()
            keep = mask.bool()
            got = keep.sum(dim=1).cpu().numpy()  # (B,)
            if not np.array_equal(got, lengths[idx_np]):
                b = int(np.flatnonzero(got != lengths[idx_np])[0])
                i = idx_np[b]
                raise CacheError(f"text {i}: model gave {got[b]} tokens, tokenizer {lengths[i]}")
            # Real tokens only, row-major: idx[0]'s tokens in order, then idx[1]'s, ... (left or right pads).
            block = self._encode_rows(hidden[keep], idx_np)  # (sum_b T_b, H), converted on the device
            # Each text's rows are contiguous in the file but a batch's texts are not adjacent (batches are
            # length-sorted): one scattered write of the whole block instead of one small write per text.
            dest = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in idx_np])
            states[dest] = block
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
