"""A SHA-256 manifest over every file of a saved head folder, written last, checked before a file is used.

``manifest.json`` lists each artifact of the folder (``config.json``, ``model.safetensors`` and, once fitted,
``calibration.json`` + ``calibration.safetensors``) with its size and SHA-256. It is rewritten after every
change to the folder, as the last step, so a file edited, truncated or swapped afterwards, or a write torn by
a crash, fails to load with one line naming the file. Heads saved before the manifest existed have none and
load as before (their calibration still carries the digests of the weights and arrays it was fitted for).

SHA-256 from the standard library: head files are a few MB, hashed in milliseconds, and no new dependency
is needed for it.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from ucse import atomic

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
_HEX64 = re.compile(r"[0-9a-f]{64}")
log = logging.getLogger(__name__)
_told_unchecked: set[Path] = set()  # folders already reported as loaded without a manifest


def write_manifest(root: Path, names: frozenset[str] | set[str]) -> None:
    """Write ``root/manifest.json`` (atomically) over those of ``names`` present in ``root``."""
    files = {
        name: {"bytes": (root / name).stat().st_size, "sha256": atomic.sha256(root / name)}
        for name in sorted(names)
        if (root / name).is_file()
    }
    record = {"format_version": MANIFEST_VERSION, "files": files}
    atomic.write_text(root / MANIFEST_FILE, atomic.dumps(record, indent=2) + "\n")


def _read(path: Path) -> dict[str, dict]:
    """The ``files`` table of a manifest, checked to be what :func:`write_manifest` writes."""
    try:
        record = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); re-save the head (ucse train).") from None
    ok = (
        isinstance(record, dict)
        and type(record.get("format_version")) is int
        and record["format_version"] == MANIFEST_VERSION
        and isinstance(record.get("files"), dict)
        and all(
            isinstance(v, dict)
            and type(v.get("bytes")) is int
            and isinstance(v.get("sha256"), str)
            and _HEX64.fullmatch(v["sha256"])
            for v in record["files"].values()
        )
    )
    if not ok:
        raise ValueError(
            f"{path} is not a ucse head manifest (format_version {MANIFEST_VERSION} and a 'files' table of "
            "{bytes, sha256}); re-save the head (ucse train)."
        )
    return record["files"]


def verify_files(root: Path, names: tuple[str, ...], fix: str) -> None:
    """Check that each of ``names`` present in ``root`` is listed in its manifest with its size and digest.

    A folder without a manifest (a head saved before it existed) is not checked; that is said once per folder.

    Args:
        root: the head folder.
        names: the files about to be read.
        fix: what the user should do about a mismatch (ends the message).

    Raises:
        ValueError: naming the first file that is unlisted, of another size or of another digest.
    """
    path = root / MANIFEST_FILE
    if not path.is_file():
        key = root.resolve()
        if key not in _told_unchecked:  # once per folder and process: a load reads several files
            _told_unchecked.add(key)
            log.warning(
                "%s has no %s (a head saved before ucse checked its files, or the file was removed): its "
                "files are read without checking them for changes. Save it again (save_pretrained, ucse "
                "export) to add one.",
                root,
                MANIFEST_FILE,
            )
        return
    files = _read(path)
    for name in names:
        target = root / name
        if not target.is_file():
            if name in files:  # saved with the head, gone since: a partial copy would drop what it held
                raise ValueError(
                    f"{target} is missing, though {path} lists it: the folder was copied or edited in "
                    f"part; {fix}."
                )
            continue
        entry = files.get(name)
        if entry is None:
            raise ValueError(
                f"{target} is not listed in {path}: it was added after the head was saved, or its write "
                f"was interrupted; {fix}."
            )
        if entry["bytes"] != target.stat().st_size or entry["sha256"] != atomic.sha256(target):
            raise ValueError(
                f"{target} does not match its SHA-256 in {path}: the file changed after it was saved "
                f"(edited, truncated or replaced) or its write was interrupted; {fix}."
            )
