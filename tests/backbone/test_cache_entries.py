"""``ucse cache``: listing the hidden-state cache and pruning it.

Reference: the entries built here (their texts, their files' sizes by ``os.walk``), ages set by hand with
``os.utime``, and the brute-force rule (every subset of entries: the pruned ones are the least recently used
that must go).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_models import sample_texts

from ucse.backbone import HiddenStateCache
from ucse.backbone.cache_entries import CacheEntry, list_entries, prune, to_remove
from ucse.backbone.cache_folder import remove_unless_held
from ucse.cli.main import main

DAY = 86400


def _bytes(folder: Path) -> int:
    return sum((Path(top) / f).stat().st_size for top, _, files in os.walk(folder) for f in files)


def _age(folder: Path, days: float) -> None:
    stamp = time.time() - days * DAY
    os.utime(folder, (stamp, stamp))


@pytest.fixture
def cache_with_three(tiny_bert_backbone, tmp_path):
    """Three entries (4, 8 and 16 texts) and things that are not entries: a user's file and folders."""
    root = tmp_path / "cache"
    cache = HiddenStateCache(root)
    paths = {}
    for n, task in ((4, "Small"), (8, "Mid"), (16, "Big")):
        paths[task] = cache.get_or_build(tiny_bert_backbone, sample_texts(n, seed=n), task, "train").path
    (root / "notes.txt").write_text("mine")
    (root / ("a" * 64)).mkdir()  # an entry's name, no meta.json
    (root / ("b" * 64)).mkdir()
    (root / ("b" * 64) / "meta.json").write_text(json.dumps({"key": "c" * 64}))  # names another key
    (root / ("d" * 64)).mkdir()
    (root / ("d" * 64) / "meta.json").write_text("[1, 2]")  # not an object
    (root / "gguf").mkdir()
    (root / "gguf" / "model.bin").write_bytes(b"x" * 1000)
    return root, cache, paths


def test_the_listing_names_what_each_entry_holds_and_what_is_not_an_entry(cache_with_three):
    root, _, paths = cache_with_three
    _age(paths["Big"], 3)
    _age(paths["Small"], 2)
    entries, other = list_entries(root)
    assert [e.task for e in entries] == ["Big", "Small", "Mid"]  # least recently used first
    assert [e.texts for e in entries] == [16, 4, 8] and {e.split for e in entries} == {"train"}
    assert [e.bytes for e in entries] == [_bytes(paths[t]) for t in ("Big", "Small", "Mid")]
    assert all(e.model.startswith("sha256:") for e in entries)
    not_entries = [root / "notes.txt", root / "gguf", *(root / (c * 64) for c in "abd")]
    want = {}
    for p in not_entries:  # by name, a folder as "name/"
        want[f"{p.name}/" if p.is_dir() else p.name] = _bytes(p) if p.is_dir() else p.stat().st_size
    assert other == want


def test_reading_an_entry_marks_it_used(cache_with_three, tiny_bert_backbone):
    root, _, paths = cache_with_three
    _age(paths["Mid"], 10)
    before = time.time()
    HiddenStateCache(root).get_or_build(tiny_bert_backbone, sample_texts(8, seed=8), "Mid", "train")
    assert paths["Mid"].stat().st_mtime >= before - 1


def _entries(ages_and_sizes: list[tuple[float, int]], now: float) -> list[CacheEntry]:
    made = [
        CacheEntry(Path(f"/x/{i}"), f"t{i}", "train", "sha256:0", 1, size, now - age * DAY)
        for i, (age, size) in enumerate(ages_and_sizes)
    ]
    return sorted(made, key=lambda e: e.used)


@pytest.mark.parametrize("unused_days", [None, 0.5, 4.0, 100.0])
@pytest.mark.parametrize("max_bytes", [None, 0, 50, 120, 10_000])
def test_what_a_prune_removes_against_brute_force(unused_days, max_bytes):
    now = 1e9
    entries = _entries([(5, 40), (0.1, 30), (3, 60), (1, 20), (7, 10)], now)
    got = {e.path for e in to_remove(entries, unused_days, max_bytes, now)}
    # The rule by brute force: old ones go; of the sets of the others that leave <= max_bytes, the fewest
    # recent ones go: keep the most recently used suffix that fits.
    old = {e.path for e in entries if unused_days is not None and now - e.used > unused_days * DAY}
    young = [e for e in entries if e.path not in old]  # least recently used first
    want = set(old)
    if max_bytes is not None:
        fits = [
            k for k in range(len(young) + 1) if sum(e.bytes for e in young[k:]) <= max_bytes
        ]  # drop the k least recently used
        want |= {e.path for e in young[: min(fits)]}
    assert got == want
    assert all(a.used <= b.used for a, b in itertools.pairwise(to_remove(entries, None, max_bytes, now)))


def test_prune_removes_only_entries_and_a_later_run_builds_them_again(cache_with_three, tiny_bert_backbone):
    root, _, paths = cache_with_three
    _age(paths["Big"], 40)
    _age(paths["Small"], 31)
    for c in "abd":
        _age(root / (c * 64), 400)  # old, but not entries
    gone = prune(root, unused_days=30).removed
    assert sorted(e.task for e in gone) == ["Big", "Small"]
    assert not paths["Big"].exists() and not paths["Small"].exists() and paths["Mid"].is_dir()
    assert (root / "notes.txt").read_text() == "mine" and (root / "gguf" / "model.bin").is_file()
    assert all((root / (c * 64)).is_dir() for c in "abd")
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".tmp-")) == []
    cache = HiddenStateCache(root)
    again = cache.get_or_build(tiny_bert_backbone, sample_texts(16, seed=16), "Big", "train")
    assert cache.builds == 1 and again.path == paths["Big"] and len(again) == 16
    # the least recently used first until the rest fit
    mid = _bytes(paths["Mid"])
    _age(paths["Mid"], 1)
    assert [e.task for e in prune(root, max_bytes=mid + _bytes(paths["Big"]) - 1).removed] == ["Mid"]
    with pytest.raises(ValueError, match="give unused_days or max_bytes"):
        prune(root)


def test_the_command_lists_dry_runs_prunes_and_refuses_bad_options(cache_with_three, capsys):
    root, _, paths = cache_with_three
    _age(paths["Big"], 40)
    assert main(["cache", f"dir={root}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("last used (UTC)") and "Big" in out[1] and "3 entries" in out[-1]
    # what the other files are, largest first (a trial found 88.6 MiB "never pruned" and no word what)
    (root / "uec" / "laplace").mkdir(parents=True)
    (root / "uec" / "laplace" / "fit.safetensors").write_bytes(b"x" * 3_000_000)
    assert main(["cache", f"dir={root}"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert "(never pruned: uec/ 2.9 MiB (ensembles' member caches: rebuilt when missing" in last
    assert main(["cache", f"dir={root / 'none'}"]) == 0
    assert "no cache folder" in capsys.readouterr().out and not (root / "none").exists()
    assert main(["cache", "prune", "unused_days=30", "dry_run=true", f"dir={root}"]) == 0
    out = capsys.readouterr().out
    assert "would remove 1 of 3 entries" in out and "Big" in out and paths["Big"].is_dir()
    assert main(["cache", "prune", "unused_days=30", f"dir={root}"]) == 0
    assert "removed 1 of 3 entries" in capsys.readouterr().out and not paths["Big"].exists()
    for bad, said in (
        (["prune", f"dir={root}"], "needs unused_days=<days> or max_gb=<GiB>"),
        (["prune", "max_gb=-1", f"dir={root}"], "max_gb=-1: give a number >= 0"),
        (["prune", "unused_days=soon", f"dir={root}"], "unused_days=soon: give a number >= 0"),
        (["prune", "max_gb=1", "dry_run=maybe", f"dir={root}"], "dry_run=maybe: give true or false"),
        (["unused_days=3", f"dir={root}"], "goes with prune: ucse cache prune unused_days=3"),
        (["prune", "max_db=1"], "Did you mean 'max_gb'"),
        (["list"], "got 'list'"),
        ([f"dir={root / 'notes.txt'}"], "(from dir) is a file, not a folder; point dir or UCSE_CACHE_DIR"),
    ):
        assert main(["cache", *bad]) == 2, bad
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and said in err and len(err.splitlines()) == 1, err
    assert paths["Small"].is_dir() and paths["Mid"].is_dir()  # refused commands removed nothing


def test_an_entry_a_run_holds_open_or_read_since_the_listing_is_kept(cache_with_three, tiny_bert_backbone):
    # a run longer than unused_days reads its entry on (DataLoader workers reopen it by its path): a prune
    # took it from under the run
    root, _, paths = cache_with_three
    held = HiddenStateCache(root).get_or_build(tiny_bert_backbone, sample_texts(4, seed=4), "Small", "train")
    for folder in paths.values():
        _age(folder, 40)
    done = prune(root, unused_days=30)
    assert sorted(e.task for e in done.removed) == ["Big", "Mid"] and [e.task for e in done.kept] == ["Small"]
    assert paths["Small"].is_dir() and len(held.batch([0, 1])[0]) == 2
    del held  # the run ends: its lock goes with it
    assert [e.task for e in prune(root, unused_days=30).removed] == ["Small"]
    # read between the listing and the removal: kept
    again = HiddenStateCache(root).get_or_build(tiny_bert_backbone, sample_texts(16, seed=16), "Big", "train")
    listed = again.path.stat().st_mtime
    del again
    os.utime(paths["Big"], (listed + 5, listed + 5))
    assert not remove_unless_held(root, paths["Big"], listed) and paths["Big"].is_dir()
    read = paths["Big"].stat().st_mtime  # as a listing reads it (a float set by utime may round to the ns)
    assert remove_unless_held(root, paths["Big"], read) and not paths["Big"].exists()


def test_only_build_folders_of_dead_processes_are_removed_whatever_their_age(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        key = "e" * 64
        live_tmp, dead_tmp = (
            root / f".tmp-{key}-{alive.pid}-0123abcd",
            root / f".tmp-{key}-{dead.pid}-89abcdef",
        )
        for folder in (live_tmp, dead_tmp):
            folder.mkdir()
            (folder / "states.npy").write_bytes(b"x")
            _age(folder, 2)  # a day-long build writing through its memory map leaves the folder's time
        assert prune(root, unused_days=1, dry_run=True).temps == [dead_tmp] and dead_tmp.is_dir()
        assert prune(root, unused_days=1).temps == [dead_tmp]
        assert live_tmp.is_dir() and not dead_tmp.exists()
    finally:
        alive.kill()
        alive.wait()
