"""The cache folder's housekeeping: temporary entry folders, publishing, discarding, stale leftovers.

An entry is built in ``<root>/.tmp-<key>-<pid>-<8 hex>`` (a shard of rank r: ``...<8 hex>r<r>``; a discarded
corrupt entry: ``...-bad<8 hex>``) and renamed to ``<root>/<key>`` when complete, so a half-written entry
is never visible under an entry's name. The cache folder is the user's choice and may hold anything else:
only these exact names of a dead process (or older than a day) are ever deleted.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from pathlib import Path

try:
    import fcntl
except ImportError:  # no advisory locks (Windows): an entry in use is then not kept from `ucse cache prune`
    fcntl = None

STALE_SECONDS = 24 * 3600


class CacheError(ValueError):
    """A cache entry is missing, corrupt or does not match what was asked for."""


def cache_root(root: str | Path | None = None) -> Path:
    """Where ucse caches: ``root`` (``cache.dir``), else env ``UCSE_CACHE_DIR``, else ``~/.cache/ucse``.

    Hidden states follow ``cache.dir``; what belongs to a model rather than a run (dequantised GGUF copies,
    extracted split packages, the fingerprint memo) and UEC's stores are placed without it, under
    ``UCSE_CACHE_DIR`` or ``~/.cache/ucse``: set that variable to keep everything off a small home folder.
    """
    default = os.environ.get("UCSE_CACHE_DIR") or Path.home() / ".cache" / "ucse"
    return Path(root if root is not None else default).expanduser()


def check_cache_root(root: str | Path | None = None, given_as: str = "cache.dir") -> Path:
    """The cache folder (``root``, else env ``UCSE_CACHE_DIR``, else ``~/.cache/ucse``): checked only.

    ``given_as``: how the caller's user gave ``root`` (``cache.dir``, or ``ucse cache``'s ``dir``).

    Raises:
        CacheError: it exists but is a file.
    """
    env = os.environ.get("UCSE_CACHE_DIR")
    source = given_as if root is not None else ("UCSE_CACHE_DIR" if env else "the default")
    path = cache_root(root)
    if path.exists() and not path.is_dir():
        raise CacheError(
            f"Cache folder '{path}' (from {source}) is a file, not a folder; "
            f"point {given_as} or UCSE_CACHE_DIR at a folder (it is created if missing)."
        )
    return path


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def temp_folder(root: Path, key: str, tag: str | None = None, rank: int | None = None) -> Path:
    """A temporary entry folder name of this process (``tag``: shared by the ranks of one build)."""
    shard = "" if rank is None else f"r{rank}"
    return root / f".tmp-{key}-{os.getpid()}-{tag or uuid.uuid4().hex[:8]}{shard}"


def publish(tmp: Path, final: Path) -> None:
    """Rename a complete entry into place (a concurrent builder that won the rename is fine)."""
    try:
        tmp.rename(final)
    except OSError:
        if not final.exists():
            raise


def discard(root: Path, folder: Path, key: str, inode: int | None = None) -> None:
    """Move a bad entry out of sight atomically, then delete it.

    Two processes can find the same bad entry: one moves it away first (the other's rename then failed,
    reported as an unwritable cache folder) and may publish a rebuilt one before the other gets here. With
    ``inode``, the folder found bad, a folder since replaced or removed is left alone.
    """
    trash = root / f".tmp-{key}-{os.getpid()}-bad{uuid.uuid4().hex[:8]}"
    try:
        if inode is not None and folder.stat().st_ino != inode:
            return  # another process's rebuilt entry
        folder.rename(trash)
    except FileNotFoundError:
        return  # another process moved it away first
    shutil.rmtree(trash, ignore_errors=True)


def stale_temps(root: Path, key: str | None = None, by_age: bool = True) -> list[Path]:
    """The temporary folders of ``key`` (any entry's: ``None``) left by dead processes (or older than a day).

    ``by_age=False`` leaves a live process's folder whatever its age (a long build writes through a memory
    map, which does not touch the folder's time); ``ucse cache prune`` asks so.
    """
    own = re.compile(rf"\.tmp-{key or '[0-9a-f]{64}'}-(?P<pid>\d+)-(?:bad)?[0-9a-f]{{8}}(?:r\d+)?")
    stale = []
    for tmp in root.glob(f".tmp-{key or ''}*"):
        match = own.fullmatch(tmp.name)
        if match is None:
            continue
        pid = int(match["pid"])
        try:
            old = by_age and time.time() - tmp.stat().st_mtime > STALE_SECONDS
        except OSError:
            continue  # removed meanwhile
        if old or (pid != os.getpid() and not pid_alive(pid)):
            stale.append(tmp)
    return stale


def clean_stale(root: Path, key: str | None = None, by_age: bool = True) -> list[Path]:
    """Delete :func:`stale_temps`' folders; return them."""
    stale = stale_temps(root, key, by_age)
    for tmp in stale:
        shutil.rmtree(tmp, ignore_errors=True)
    return stale


def reserve(path: Path) -> None:
    """Allocate a memory-mapped file's blocks before writing through the map.

    On a full disk a write through a sparse map is a SIGBUS that kills the process with no message;
    ``posix_fallocate`` fails with ENOSPC instead, which becomes a one-line error.
    """
    if hasattr(os, "posix_fallocate"):
        with path.open("r+b") as fh:
            os.posix_fallocate(fh.fileno(), 0, path.stat().st_size)


def hold_entry(folder: Path) -> int | None:
    """Hold a shared lock on an open entry (on its ``meta.json``) so that a prune leaves it alone.

    Returns the descriptor to close when the entry is no longer read (``None``: no lock taken). The lock is
    advisory: only :func:`remove_unless_held` heeds it. Forked processes share it; spawned ones take their own
    as they reopen the entry.
    """
    if fcntl is None:
        return None
    try:
        fd = os.open(folder / "meta.json", os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a prune renames the entry away (then rebuilt)
    except OSError:
        os.close(fd)
        return None
    return fd


def remove_unless_held(root: Path, folder: Path, used: float) -> bool:
    """Remove the entry ``folder`` unless a run holds it open or read it since ``used``; whether it did.

    ``used``: the folder's modification time when it was chosen (every read of an entry sets it).
    """
    try:
        fd = os.open(folder / "meta.json", os.O_RDONLY)
    except OSError:
        return False  # gone meanwhile, or not readable: not ours to remove
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a run that has it open holds it shared
        if folder.stat().st_mtime != used:
            return False  # a run read it since it was listed
        discard(root, folder, folder.name)
        return True
    except OSError:  # BlockingIOError: in use
        return False
    finally:
        os.close(fd)
