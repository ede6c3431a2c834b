"""Token states served as right-padded batches: a cache entry (memory-mapped or on a device), a view, or live.

``CachedStates`` reads and verifies an entry written by ``ucse.backbone.cache.HiddenStateCache`` (layout in
that module's docstring): its meta, shapes and the xxh3-128 checksums of its files.
"""

from __future__ import annotations

import logging
import os
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import torch
import xxhash

from ucse import json_read
from ucse.backbone.cache_folder import CacheError, hold_entry  # CacheError: readers import it from here
from ucse.backbone.encoder import FrozenBackbone, validate_texts
from ucse.config import CacheDtype

logger = logging.getLogger(__name__)

CACHE_FORMAT = 2  # 2: meta.json carries xxh3-128 checksums of states.npy and offsets.npy
NP_DTYPES = {CacheDtype.fp16: np.float16, CacheDtype.bf16: np.uint16}
_HASH_CHUNK = 1 << 24
_verified: set[tuple] = set()  # (path, size, mtime_ns, checksum) of files already verified by this process


def file_checksum(path: Path) -> str:
    """``xxh3_128:<hex>`` of a file's bytes, read in 16 MiB chunks.

    xxh3 (the ``xxhash`` package, which ``datasets`` already depends on) rather than sha256: this guards
    against corruption (torn writes, disk errors, a stray writer), not tampering, and it runs at ~14 GB/s
    against sha256's ~1 GB/s on this CPU, so verifying an entry on every open costs next to nothing.
    """
    digest = xxhash.xxh3_128()
    buf = bytearray(_HASH_CHUNK)
    view = memoryview(buf)
    with Path(path).open("rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            digest.update(view[:n])
    return f"xxh3_128:{digest.hexdigest()}"


def _checksum_problems(folder: Path, expected: dict) -> list[str]:
    """Files of an entry whose checksum differs from ``expected`` (once per process and file state)."""
    problems = []
    for name in ("states.npy", "offsets.npy"):
        want = expected.get(name)
        path = folder / name
        st = path.stat()
        memo = (str(path.resolve()), st.st_size, st.st_mtime_ns, want)
        if memo in _verified:
            continue
        got = file_checksum(path)
        if got != want:
            problems.append(f"{name} checksum {got} != recorded {want}")
        else:
            _verified.add(memo)
    return problems


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
            self.meta = json_read.loads((self.path / "meta.json").read_text())
            self.dtype = CacheDtype(self.meta["dtype"])
            n, h = self.meta["n"], self.meta["hidden_size"]
            if type(n) is not int or type(h) is not int:  # not int(): a written Infinity overflows it
                raise ValueError(f"'n' and 'hidden_size' must be integers, got {n!r} and {h!r}")
            self.offsets = np.load(self.path / "offsets.npy", allow_pickle=False)
            self._states = np.load(self.path / "states.npy", mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CacheError(
                f"Cache entry '{self.path}' is unreadable ({err}); "
                "delete that folder (the next run rebuilds it)."
            ) from err
        problems = []
        if self.meta.get("format") != CACHE_FORMAT:
            problems.append(f"format {self.meta.get('format')} != {CACHE_FORMAT}")
        if self.meta.get("key") != self.path.name:
            problems.append(f"meta key {self.meta.get('key')!r} != folder name")
        if expected_parts is not None and self.meta.get("parts") != expected_parts:
            problems.append("key parts differ from the requested ones")
        if n < 1 or h < 1:  # an entry holds at least one text: offsets[0] below must exist
            problems.append(f"n={n} texts of width {h}")
        elif self.offsets.shape != (n + 1,) or not np.issubdtype(self.offsets.dtype, np.integer):
            problems.append(f"offsets {self.offsets.shape} {self.offsets.dtype}, expected ({n + 1},) int")
        elif self.offsets[0] != 0 or np.any(np.diff(self.offsets) < 1):
            problems.append("offsets are not strictly increasing from 0")
        elif self._states.ndim != 2 or self._states.shape != (int(self.offsets[-1]), h):
            problems.append(f"states shape {self._states.shape}, expected ({int(self.offsets[-1])}, {h})")
        if self._states.dtype != NP_DTYPES[self.dtype]:
            problems.append(f"states dtype {self._states.dtype} does not match {self.dtype.value}")
        checksums = self.meta.get("checksums") or {}
        if not isinstance(checksums, dict):  # read back from disk: a string's .get() crashed the run
            problems.append(f"checksums {type(checksums).__name__}, expected an object")
        if not problems:
            problems = _checksum_problems(self.path, checksums)
        if problems:
            raise CacheError(
                f"Cache entry '{self.path}' is corrupt: {'; '.join(problems)}. "
                "Delete that folder (the next run rebuilds it)."
            )
        self.lengths = np.diff(self.offsets)  # (N,)
        self.hidden_size = h
        lock = hold_entry(self.path)  # while this object reads the entry, `ucse cache prune` leaves it
        if lock is not None:
            weakref.finalize(self, os.close, lock)

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
        with warnings.catch_warnings():
            # The map is read-only and DeviceStates only ever reads it (copied to the device, or gathered
            # from on the CPU): torch's "not writable" warning would reach users on every GPU run.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            states = torch.from_numpy(np.asarray(self._states))
        return DeviceStates(states, self.offsets, self.dtype, device)


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
