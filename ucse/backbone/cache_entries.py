"""What the hidden-state cache holds, and removing what is no longer used (``ucse cache``).

The cache never evicts by itself: every (backbone, task, split, texts...) a user trains on stays on disk
(Banking77 with MiniLM-L6: 153 MiB; a 0.6B backbone on 1M texts: ~131 GB). This lists the entries with what
they were built for, their size and when a run last read them (the entry folder's modification time, which
:class:`ucse.backbone.cache.HiddenStateCache` sets on every read), and removes entries on request: those
unused for some days, or the least recently used until the entries fit a size. Only folders that are
entries are ever removed: a 64-hex name whose ``meta.json`` is a JSON object naming that same key (the file is
read back from disk: anything else there, the user's or another tool's, is left alone and counted apart).
An entry a run has open is kept: each open entry holds a shared lock that the prune asks for (flock on its
``meta.json``), and an entry read since it was listed is kept too; a run that looks an entry up after it was
removed builds it again. Temporary folders of builds are removed only where their process is dead (a long
build writes through a memory map, which leaves the folder's time as it was). Where another user reads a
shared cache without the right to set its folders' times, those reads are not counted as use.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ucse import json_read
from ucse.backbone.cache_folder import remove_unless_held, stale_temps

_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class CacheEntry:
    """One entry folder of the cache.

    Attributes:
        path: the folder.
        task: the task (or data file) name it was built for.
        split: the split (``train``, ``pool``...).
        model: the backbone's fingerprint (``sha256:...``).
        texts: how many texts it holds.
        bytes: the size of its files.
        used: when a run last read it (seconds since the epoch).
    """

    path: Path
    task: str
    split: str
    model: str
    texts: int
    bytes: int
    used: float


def files_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed: a link's own size)."""
    total = 0
    for top, _, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(top) / name).lstat().st_size
            except OSError:
                continue  # removed meanwhile
    return total


def _entry(folder: Path) -> CacheEntry | None:
    """The entry in ``folder``, or ``None`` where the folder is not one (see the module docstring)."""
    if not _KEY.fullmatch(folder.name) or folder.is_symlink() or not folder.is_dir():
        return None
    try:
        meta = json_read.loads((folder / "meta.json").read_text(encoding="utf-8"))
        used = folder.stat().st_mtime
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(meta, dict) or meta.get("key") != folder.name:
        return None
    parts = meta.get("parts") if isinstance(meta.get("parts"), dict) else {}
    n = meta.get("n")
    return CacheEntry(
        path=folder,
        task=str(parts.get("task", "?")),
        split=str(parts.get("split", "?")),
        model=str(parts.get("model", "?")),
        texts=n if type(n) is int else -1,
        bytes=files_bytes(folder),
        used=used,
    )


def list_entries(root: Path) -> tuple[list[CacheEntry], dict[str, int]]:
    """The entries under ``root``, least recently used first, and the bytes of everything else, by name.

    A folder is named ``name/``.
    """
    if not root.is_dir():
        return [], {}
    entries, other = [], {}
    for child in sorted(root.iterdir()):
        entry = _entry(child)
        if entry is not None:
            entries.append(entry)
        elif child.is_dir() and not child.is_symlink():
            other[f"{child.name}/"] = files_bytes(child)
        else:
            try:
                other[child.name] = child.lstat().st_size
            except OSError:
                continue
    entries.sort(key=lambda e: (e.used, e.path.name))
    return entries, other


def to_remove(
    entries: list[CacheEntry],
    unused_days: float | None = None,
    max_bytes: float | None = None,
    now: float | None = None,
) -> list[CacheEntry]:
    """Which entries a prune removes: unused too long, then the least recently used until the rest fit.

    Args:
        entries: :func:`list_entries`' entries (least recently used first).
        unused_days: remove the entries no run has read for more days than this (``None``: no age limit).
        max_bytes: then the least recently used until the entries left take at most this (``None``: no limit).
        now: the time to count ages from (default: now).
    """
    now = time.time() if now is None else now
    old = {e.path for e in entries if unused_days is not None and now - e.used > unused_days * 86400}
    left = sum(e.bytes for e in entries if e.path not in old)
    gone = []
    for e in entries:  # least recently used first
        if e.path in old:
            gone.append(e)
        elif max_bytes is not None and left > max_bytes:
            gone.append(e)
            left -= e.bytes
    return gone


def check_limit(name: str, value: float | None) -> None:
    """A prune's limit is ``None`` or a finite number >= 0.

    Raises:
        ValueError: naming ``name`` and the value.
    """
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}={value}: give a number >= 0")


@dataclass(frozen=True)
class Pruned:
    """What a prune removed (or, dry, would remove).

    Attributes:
        removed: the entries removed.
        kept: entries chosen but kept: a run holds them open, or read them since they were listed.
        temps: temporary folders of builds whose process is dead.
        listed: how many entries the cache held.
    """

    removed: list[CacheEntry]
    kept: list[CacheEntry]
    temps: list[Path]
    listed: int


def prune(
    root: Path, unused_days: float | None = None, max_bytes: float | None = None, dry_run: bool = False
) -> Pruned:
    """Remove :func:`to_remove`'s entries that no run holds, and the temporary folders of dead builds.

    Args:
        root: the cache folder.
        unused_days: remove the entries no run has read for more days than this.
        max_bytes: then the least recently used until the entries left take at most this.
        dry_run: remove nothing; say what would be removed (entries held open are found only by removing).

    Raises:
        ValueError: neither limit given, or one that is negative or not finite.
    """
    check_limit("unused_days", unused_days)
    check_limit("max_bytes", max_bytes)
    if unused_days is None and max_bytes is None:
        raise ValueError("give unused_days or max_bytes (or both): with neither, nothing is removed")
    entries, _ = list_entries(root)
    chosen = to_remove(entries, unused_days, max_bytes)
    temps = stale_temps(root, by_age=False) if root.is_dir() else []
    if dry_run:
        return Pruned(chosen, [], temps, len(entries))
    removed = [e for e in chosen if remove_unless_held(root, e.path, e.used)]
    for tmp in temps:
        shutil.rmtree(tmp, ignore_errors=True)
    return Pruned(removed, [e for e in chosen if e not in removed], temps, len(entries))


def human_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit it reaches (1 decimal; whole bytes below 1 KiB)."""
    p, unit = next(
        (p, u) for p, u in ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B")) if n >= 2**p or p == 0
    )
    return f"{n:.0f} B" if p == 0 else f"{n / 2**p:.1f} {unit}"


def describe(entry: CacheEntry) -> str:
    """One line of the listing: last used, size, texts, split, backbone, task."""
    when = datetime.fromtimestamp(entry.used, timezone.utc).strftime("%Y-%m-%d %H:%M")
    texts = str(entry.texts) if entry.texts >= 0 else "?"
    size = human_bytes(entry.bytes)
    return f"{when}  {size:>12}  {texts:>8}  {entry.split:<10}  {entry.model[:15]}  {entry.task}"
