"""The model fingerprint remembered across processes: reused only for files in exactly the state it was
computed for, recomputed for new content (even with size and mtime restored), and a damaged or unwritable memo
never changes the answer.

Reference: sha256 over each file's name, size and bytes in name order, written out here by hand; a "new
process" is simulated by clearing the in-process memo.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from tiny_models import make_tiny_bert_cfg

from ucse.backbone import fingerprint_memo, loading
from ucse.backbone.loading import model_fingerprint


def _by_hand(folder: Path) -> str:
    digest = hashlib.sha256()
    names = sorted(p.name for p in folder.iterdir())  # the tiny BERT: config, weights, two tokenizer files
    for name in names:
        data = (folder / name).read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    digest.update(b"gguf=None")
    return f"sha256:{digest.hexdigest()}"


@pytest.fixture
def model(tiny_bert_dir: Path, tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "bert"
    shutil.copytree(tiny_bert_dir, folder)
    monkeypatch.setenv("UCSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(fingerprint_memo.MEMO_ENV, raising=False)
    monkeypatch.setattr(fingerprint_memo, "RACY_SECONDS", 0.0)  # these files were written just now
    return folder


@pytest.fixture
def hashed(monkeypatch) -> list[Path]:
    """Every time the files are actually read and hashed, as a new process would."""
    calls: list[Path] = []
    real = loading._hash_files

    def counting(folder, stats, gguf_file):
        calls.append(folder)
        return real(folder, stats, gguf_file)

    monkeypatch.setattr(loading, "_hash_files", counting)
    return calls


def _fresh_process(model: Path) -> str:
    loading._fingerprint_memo.clear()
    return model_fingerprint(make_tiny_bert_cfg(model))


def test_a_second_process_reuses_the_hash_of_unchanged_files(model, hashed):
    first = _fresh_process(model)
    assert first == _by_hand(model) and len(hashed) == 1
    assert _fresh_process(model) == first and len(hashed) == 1  # read from the memo, no file read
    assert len(list((model.parent / "cache" / "fingerprints").glob("*.json"))) == 1


def test_new_content_with_size_and_mtime_restored_is_hashed_again(model, hashed):
    first = _fresh_process(model)
    weights = model / "model.safetensors"
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the last weight: same size
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back, as rsync -t or cp -p would
    assert weights.stat().st_size == st.st_size and weights.stat().st_mtime_ns == st.st_mtime_ns
    second = _fresh_process(model)
    assert len(hashed) == 2 and second != first and second == _by_hand(model)


def test_a_replaced_file_is_hashed_again(model, hashed):
    first = _fresh_process(model)
    config = model / "config.json"
    other = model / "config.json.new"
    other.write_text(json.dumps({**json.loads(config.read_text()), "note": "x"}))
    other.replace(config)  # a new inode under the old name
    assert _fresh_process(model) != first and len(hashed) == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: "{not json",
        lambda r: json.dumps([r]),
        lambda r: json.dumps({**r, "fingerprint": "sha256:" + "0" * 63}),  # malformed hash
        lambda r: json.dumps({**r, "fingerprint": 7}),
        lambda r: json.dumps({**r, "folder": "/elsewhere"}),
        lambda r: json.dumps({**r, "stats": r["stats"][:-1]}),  # another set of files
        lambda r: "[" * 100_000,  # deeper than Python's JSON reader follows (a RecursionError before)
    ],
)
def test_a_damaged_memo_is_ignored_and_the_files_hashed(model, hashed, damage):
    first = _fresh_process(model)
    (memo,) = (model.parent / "cache" / "fingerprints").glob("*.json")
    memo.write_text(damage(json.loads(memo.read_text())))
    assert _fresh_process(model) == first == _by_hand(model) and len(hashed) == 2


def test_an_unwritable_cache_or_the_switch_off_only_means_hashing_each_time(model, hashed, monkeypatch):
    (model.parent / "cache").write_text("a file where the cache folder would be")
    assert _fresh_process(model) == _by_hand(model)
    assert _fresh_process(model) == _by_hand(model) and len(hashed) == 2
    monkeypatch.setenv("UCSE_CACHE_DIR", str(model.parent / "cache2"))
    monkeypatch.setenv(fingerprint_memo.MEMO_ENV, "0")
    _fresh_process(model), _fresh_process(model)
    assert len(hashed) == 4 and not (model.parent / "cache2").exists()


def test_files_changed_a_moment_ago_are_not_remembered(model, hashed, monkeypatch):
    # git's racy rule: a second write within a coarse filesystem's timestamp tick would keep the stat data
    monkeypatch.setattr(fingerprint_memo, "RACY_SECONDS", 3600.0)  # the copy was made within the hour
    assert _fresh_process(model) == _fresh_process(model) == _by_hand(model) and len(hashed) == 2
    assert not (model.parent / "cache" / "fingerprints").exists()


def test_a_folder_whose_name_is_not_utf8_is_fingerprinted_and_remembered(model, hashed):
    # Linux paths are bytes: a Latin-1 name decodes to surrogates, which str.encode() refused
    latin1 = Path(os.fsdecode(bytes(model.parent) + b"/mod\xe8le"))
    model.rename(latin1)
    first = _fresh_process(latin1)
    assert first == _by_hand(latin1) and len(hashed) == 1
    assert _fresh_process(latin1) == first and len(hashed) == 1  # from the memo
