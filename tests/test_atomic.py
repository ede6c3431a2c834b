"""Atomic writes: strict JSON, permissions from the umask, and the clean-up of a killed writer's leftovers."""

from __future__ import annotations

import errno
import json
import math
import os

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from ucse import atomic


def test_json_is_strict_nan_and_inf_become_null(tmp_path):
    obj = {
        "a": math.nan,
        "b": [1.0, -math.inf, np.float32("nan")],
        "c": np.float64(2.5),
        "d": {"e": math.inf},
    }
    atomic.write_json(tmp_path / "m.json", obj)
    text = (tmp_path / "m.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    # A strict parser (no NaN/Infinity constants) reads it back.
    back = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert back == {"a": None, "b": [1.0, None, None], "c": 2.5, "d": {"e": None}}


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_files_and_folders_get_the_umask_permissions(tmp_path, mask):
    old = os.umask(mask)
    try:
        atomic.write_text(tmp_path / "f.txt", "x")
        with atomic.atomic_dir(tmp_path / "d") as tmp:
            (tmp / "inner").write_text("y")
            # safetensors creates its file 0600 whatever the umask: the artifact must still follow it.
            save_file({"w": torch.zeros(2)}, str(tmp / "model.safetensors"))
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o777 & ~mask
    for name in ("inner", "model.safetensors"):
        assert (tmp_path / "d" / name).stat().st_mode & 0o777 == 0o666 & ~mask, name


def _own(name: str, old: bool = False) -> str:
    return atomic.temp_name(name, old=old)


def test_clean_leftovers_removes_temporaries_and_restores_a_folder_moved_aside(tmp_path):
    (tmp_path / _own("head")).mkdir()
    (tmp_path / _own("metrics.json")).write_text("{")
    aside = tmp_path / _own("run", old=True)  # killed between the two renames of an overwrite: no `run`
    aside.mkdir()
    (aside / "config.yaml").write_text("kept")
    (tmp_path / _own("keep", old=True)).mkdir()  # `keep` exists: the aside copy is the stale one
    (tmp_path / "keep").mkdir()
    (tmp_path / ".bashrc").write_text("user file")
    atomic.clean_leftovers(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".bashrc", "keep", "run"]
    assert (tmp_path / "run" / "config.yaml").read_text() == "kept"


def test_clean_leftovers_of_one_name_leaves_others(tmp_path):
    (tmp_path / _own("a")).mkdir()
    other = tmp_path / _own("b")
    other.mkdir()
    atomic.clean_leftovers(tmp_path, "a")
    assert list(tmp_path.iterdir()) == [other]


def test_clean_leftovers_never_touches_names_it_did_not_make(tmp_path):
    # The user's hidden files that merely look temporary (issue 16: both were deleted).
    (tmp_path / ".draft.tmp").write_text("my draft")
    (tmp_path / ".precious.tmp").mkdir()
    (tmp_path / ".precious.tmp" / "notes.txt").write_text("keep")
    (tmp_path / ".run.old-x9").mkdir()  # not this module's name: not restored onto `run` either
    (tmp_path / ".a.ucse-NOTHEX00.tmp").write_text("no random hex suffix: not ours")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert atomic.clean_leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_an_output_that_appeared_meanwhile_is_not_replaced(tmp_path):
    out = tmp_path / "predictions.jsonl"
    with pytest.raises(FileExistsError) as err, atomic.atomic_file(out, replace=False) as fh:
        fh.write("mine\n")
        out.write_text("theirs\n")  # another process published the same new output first
    assert err.value.filename == str(out)
    assert out.read_text() == "theirs\n"
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.jsonl"]  # no temporary left
    atomic.write_text(tmp_path / "new.jsonl", "ok\n", replace=False)  # a free name is written as usual
    assert (tmp_path / "new.jsonl").read_text() == "ok\n"


def test_a_folder_filled_meanwhile_is_not_replaced(tmp_path):
    out = tmp_path / "export"
    out.mkdir()  # empty: allowed
    with pytest.raises(FileExistsError), atomic.atomic_dir(out, replace=False) as tmp:
        (tmp / "meta.json").write_text("{}")
        (out / "theirs.txt").write_text("keep")
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    with atomic.atomic_dir(tmp_path / "fresh", replace=False) as tmp:
        (tmp / "meta.json").write_text("{}")
    assert [p.name for p in (tmp_path / "fresh").iterdir()] == ["meta.json"]


def test_a_failed_write_names_the_file_and_leaves_the_old_one(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("old")
    with pytest.raises(OSError) as err, atomic.atomic_file(path) as fh:
        fh.write("new")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what a write() on a full disk raises
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]
