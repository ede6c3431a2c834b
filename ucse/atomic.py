"""Atomic artifact writes: write beside the target, then rename, so no reader sees a half-written file.

Every artifact of the package (run metrics, heads, Gaussian embeddings, plots, caches of fitted members)
goes through these helpers.
"""

from __future__ import annotations

import json
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
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_file(path) as fh:
        fh.write(text)


def write_json(path: str | Path, obj: Any, **dumps_kwargs: Any) -> None:
    """Write ``obj`` as indented JSON atomically."""
    write_text(path, json.dumps(obj, indent=2, **dumps_kwargs) + "\n")


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``path``, on error it is removed.

    An existing ``path`` is moved aside first, deleted only after the new folder is in place, and put
    back if the final rename fails, so a crash leaves either the old or the new folder, never a mix.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
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
