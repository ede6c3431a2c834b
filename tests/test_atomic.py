"""Atomic writes: strict JSON, permissions from the umask, and the clean-up of a killed writer's leftovers."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

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
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o777 & ~mask


def test_clean_leftovers_removes_temporaries_and_restores_a_folder_moved_aside(tmp_path):
    (tmp_path / ".head.k3j.tmp").mkdir()
    (tmp_path / ".metrics.json.a1.tmp").write_text("{")
    (tmp_path / ".run.old-x9").mkdir()  # killed between the two renames of an overwrite: `run` is missing
    (tmp_path / ".run.old-x9" / "config.yaml").write_text("kept")
    (tmp_path / ".keep.old-z1").mkdir()  # `keep` exists: the aside copy is the stale one
    (tmp_path / "keep").mkdir()
    (tmp_path / ".bashrc").write_text("user file")
    atomic.clean_leftovers(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".bashrc", "keep", "run"]
    assert (tmp_path / "run" / "config.yaml").read_text() == "kept"


def test_clean_leftovers_of_one_name_leaves_others(tmp_path):
    (tmp_path / ".a.1.tmp").mkdir()
    (tmp_path / ".b.1.tmp").mkdir()
    atomic.clean_leftovers(tmp_path, "a")
    assert [p.name for p in tmp_path.iterdir()] == [".b.1.tmp"]
