"""Atomic artifact writes: write beside the target, then rename, so no reader sees a half-written file.

Every artifact of the package (run metrics, heads, Gaussian embeddings, plots, caches of fitted members)
goes through these helpers. Temporary siblings are named ``.<name>.<random>.tmp`` (and
``.<name>.old-<random>`` while a folder is swapped); a process killed mid-write leaves them behind, and
:func:`clean_leftovers` removes them on the next run. Final files and folders get the permissions the
umask allows (``mkstemp`` and ``mkdtemp`` would leave them 0600 / 0700).

Every JSON file is strict (RFC 8259): NaN and infinities are written as ``null``, never as the ``NaN``
tokens Python's ``json`` emits by default.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_file(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Yield a handle on a temporary sibling of ``path``; on success it is fsynced and renamed onto it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).chmod(0o666 & ~_umask())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_file(path) as fh:
        fh.write(text)


def _umask() -> int:
    """The process umask (read by setting and restoring it: the only portable way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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

    Only names this module creates are touched: ``.<name>.<random>.tmp`` is deleted; ``.<name>.old-<random>``
    (a folder moved aside while being replaced) is put back when ``<name>`` itself is missing (the kill came
    between the two renames), else deleted.

    Returns:
        The paths removed or restored.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    done = []
    for p in sorted(folder.iterdir()):
        if not p.name.startswith(f".{name}." if name is not None else "."):
            continue
        if ".old-" in p.name:
            target = folder / p.name[1 : p.name.rindex(".old-")]
            if name is not None and target.name != name:
                continue
            if not target.exists():
                p.replace(target)
                done.append(p)
                continue
        elif not p.name.endswith(".tmp"):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        done.append(p)
    return done


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``path``, on error it is removed.

    An existing ``path`` is moved aside first, deleted only after the new folder is in place, and put
    back if the final rename fails, so a crash leaves either the old or the new folder, never a mix.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp.chmod(0o777 & ~_umask())
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    try:
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            old.rmdir()  # reserve a free name: rename() needs a non-existing target
            path.replace(old)
        tmp.replace(path)
    except BaseException:
        if old is not None and old.exists() and not path.exists():
            old.replace(path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
