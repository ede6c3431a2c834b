"""A loaded head's files, held in memory: what pickling or ``save_pretrained`` of the estimator writes.

The files are read when the head is loaded, so the estimator's weights, profile and labels are its own
from then on: a folder written over later (another fit into the same ``output_dir`` with ``overwrite``) or
removed must not change what it pickles or saves (a review: a joblib dump of one cross-validation fold's
estimator held the next fold's head, and a pickle of an estimator whose folder was gone held no head).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

from ucse.heads.io import HEAD_FILES


def read_head_files(head_dir: Path) -> dict[str, bytes]:
    """Name -> bytes of a head's own files (:data:`ucse.heads.io.HEAD_FILES`, those present).

    Only those: a pickle is shared, and any other file of the folder, or a link in it
    (``head/notes.txt -> ~/.ssh/...``), would travel with it.
    """
    return {
        name: (head_dir / name).read_bytes() for name in sorted(HEAD_FILES) if (head_dir / name).is_file()
    }


def write_head_files(files: dict[str, bytes], folder: Path) -> Path:
    """Write ``files`` (from :func:`read_head_files`, or an untrusted pickle) into ``folder``; return it.

    Raises:
        ValueError: a name that is not one of a head's file names (it could point outside ``folder``).
    """
    for name, data in files.items():
        if name not in HEAD_FILES:
            raise ValueError(f"pickled head file name {name!r} is not one of a head's files")
        (folder / name).write_bytes(data)
    return folder


def private_folder(owner: object, prefix: str) -> tuple[Path, weakref.finalize]:
    """A fresh temporary folder removed when ``owner`` is collected (or the finalizer is called)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    return tmp, weakref.finalize(owner, shutil.rmtree, tmp, True)
