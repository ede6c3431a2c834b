"""Atomic artifact writes: write beside the target, then rename, so no reader sees a half-written file.

Every artifact of the package (run metrics, heads, Gaussian embeddings, plots, caches of fitted members)
goes through these helpers. Temporary siblings are named ``.<name>.ucse-<8 hex>.tmp`` (and
``.<name>.ucse-old-<8 hex>`` while a folder is swapped): a fixed ``ucse`` tag and a random suffix, so this
module can tell its own leftovers from the user's files (a user's ``.draft.tmp`` is never touched). A process
killed mid-write leaves them behind; :func:`clean_leftovers` removes them on the next run. Final files and
folders get the permissions the umask allows, also when a third-party writer (``safetensors``) made a 0600
file inside a folder being written.

Every JSON file is strict (RFC 8259): NaN and infinities are written as ``null``, never as the ``NaN``
tokens Python's ``json`` emits by default.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_TAG = "ucse"
_TMP = re.compile(rf"\.(?P<name>.+)\.{_TAG}-[0-9a-f]{{8}}\.tmp")
_OLD = re.compile(rf"\.(?P<name>.+)\.{_TAG}-old-[0-9a-f]{{8}}")
# os.link fails with these where a file system has no hard links (FAT, some network mounts).
_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def temp_name(name: str, old: bool = False) -> str:
    """A fresh temporary sibling name for ``name`` (``old``: the name a replaced folder is moved aside to)."""
    tag = secrets.token_hex(4)
    return f".{name}.{_TAG}-old-{tag}" if old else f".{name}.{_TAG}-{tag}.tmp"


def leftover_target(entry: str) -> tuple[str, bool] | None:
    """``(target name, moved aside)`` when ``entry`` is a temporary name this module makes, else ``None``."""
    for pattern, old in ((_TMP, False), (_OLD, True)):
        match = pattern.fullmatch(entry)
        if match:
            return match["name"], old
    return None


def _new_sibling(path: Path, make: Any) -> Path:
    """Create a fresh temporary sibling of ``path`` with ``make(tmp)`` (exclusive: never an existing name)."""
    for _ in range(100):
        tmp = path.parent / temp_name(path.name)
        try:
            make(tmp)
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def _name(err: OSError, path: Path) -> None:
    """Let ``err`` name ``path``: a failed ``write()`` names no file, and the user needs to know which."""
    if err.errno is not None and not err.filename:  # without an errno, a filename would garble str(err)
        err.filename = str(path)


@contextmanager
def atomic_file(path: str | Path, mode: str = "w", replace: bool = True) -> Iterator[IO[Any]]:
    """Yield a handle on a temporary sibling of ``path``; on success it is fsynced and renamed onto it.

    Args:
        path: the final file.
        mode: ``"w"`` (UTF-8 text) or ``"wb"``.
        replace: replace an existing ``path``; ``False`` publishes only if no file of that name exists by
            then (a hard link, atomic and exclusive), so a file that appeared meanwhile is never replaced.

    Raises:
        FileExistsError: ``replace=False`` and ``path`` exists when the write is done.
        OSError: a write failed (full disk, read-only folder...); it names ``path``, the temporary is gone.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fds: list[int] = []
    # os.open with 0o666 lets the umask decide the permissions (mkstemp would force 0600).
    tmp = _new_sibling(path, lambda p: fds.append(os.open(p, flags, 0o666)))
    try:
        with os.fdopen(fds[0], mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            tmp.replace(path)
        else:
            _publish_new(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        _name(err, path)
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _publish_new(tmp: Path, path: Path) -> None:
    """Give ``tmp`` the name ``path`` only if no file has it yet (check-then-rename would race)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "appeared while it was being written", str(path)) from None
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
        # No hard links here: claim the name exclusively (fails if taken), then rename onto our own claim.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        tmp.replace(path)
        return
    tmp.unlink()


def sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks (a head's manifest, a run's ``rows.parquet``)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_text(path: str | Path, text: str, replace: bool = True) -> None:
    """Write ``text`` to ``path`` atomically (``replace=False``: fail rather than replace a file)."""
    with atomic_file(path, replace=replace) as fh:
        fh.write(text)


def _umask() -> int:
    """The process umask (read by setting and restoring it: the only portable way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(folder: Path) -> None:
    """Give ``folder`` and everything in it the permissions the umask allows (executables keep ``x``).

    Third-party writers may create files 0600 (``safetensors.save_file`` does); an artifact must be as
    readable as any other file the user creates.
    """
    mask = _umask()
    for p in (folder, *folder.rglob("*")):
        if p.is_symlink():
            continue
        full = 0o777 if p.is_dir() or p.stat().st_mode & 0o100 else 0o666
        p.chmod(full & ~mask)


def strict_json(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, inf; numpy/torch scalars too) replaced by ``None``."""
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    if hasattr(obj, "item") and getattr(obj, "ndim", None) == 0:  # numpy / torch scalars
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, **dumps_kwargs: Any) -> str:
    """``json.dumps`` that writes strict JSON: NaN/inf become ``null`` (``allow_nan=False`` guards the rest).

    A ``default=`` converter's output is made strict too.
    """
    default = dumps_kwargs.pop("default", None)
    if default is not None:
        dumps_kwargs["default"] = lambda o: strict_json(default(o))
    return json.dumps(strict_json(obj), allow_nan=False, **dumps_kwargs)


def write_json(path: str | Path, obj: Any, **dumps_kwargs: Any) -> None:
    """Write ``obj`` as indented, strict JSON (NaN/inf -> ``null``) atomically."""
    dumps_kwargs.setdefault("indent", 2)
    write_text(path, dumps(obj, **dumps_kwargs) + "\n")


def clean_leftovers(folder: str | Path, name: str | None = None) -> list[Path]:
    """Remove the temporary siblings a killed writer left in ``folder`` (only those of ``name`` when given).

    Only names this module creates are touched (:func:`leftover_target`): ``.<name>.ucse-<hex>.tmp`` is
    deleted; ``.<name>.ucse-old-<hex>`` (a folder moved aside while being replaced) is put back when
    ``<name>`` itself is missing (the kill came between the two renames), else deleted. The caller must own
    ``folder`` (a run folder is locked first): a live writer's temporary looks the same as a dead one's.

    Returns:
        The paths removed or restored.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    done = []
    for p in sorted(folder.iterdir()):
        found = leftover_target(p.name)
        if found is None or (name is not None and found[0] != name):
            continue
        target = folder / found[0]
        if found[1] and not target.exists():
            p.replace(target)
        elif p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        done.append(p)
    return done


@contextmanager
def atomic_dir(path: str | Path, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``path``, on error it is removed.

    An existing ``path`` is moved aside first, deleted only after the new folder is in place, and put
    back if the final rename fails, so a crash leaves either the old or the new folder, never a mix.
    With ``replace=False`` the folder is renamed onto ``path`` only while that is missing or an empty
    folder (the kernel checks it in the rename itself), so a folder filled meanwhile is never replaced.

    Raises:
        FileExistsError: ``replace=False`` and ``path`` holds files when the folder is done.
        OSError: a write failed; it names ``path``, and the temporary folder is gone.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_sibling(path, lambda p: p.mkdir(0o777))  # the umask applies, as for any folder
    try:
        yield tmp
        follow_umask(tmp)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            _name(err, path)
        raise
    if not replace:
        try:
            tmp.rename(path)
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise FileExistsError(errno.EEXIST, "appeared while being written", str(path)) from None
            raise
        return
    old = None
    try:
        if path.exists():
            old = path.parent / temp_name(path.name, old=True)
            path.replace(old)
        tmp.replace(path)
    except BaseException:
        if old is not None and old.exists() and not path.exists():
            old.replace(path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
