from pathlib import Path

import datasets
import pytest

from ucse.config import CONFIG_DIR, DataConfig, build_config
from ucse.data import DataError, TaskData, resolve_data_root, task_folder, task_names


def test_resolve_data_root_precedence(monkeypatch, tmp_path):
    assert resolve_data_root(DataConfig()) is None
    monkeypatch.setenv("UCSE_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_root(DataConfig()) == tmp_path / "env"
    assert resolve_data_root(DataConfig(root=str(tmp_path / "cfg"))) == tmp_path / "cfg"


def test_task_names_lists_task_configs_and_each_builds():
    names = task_names()
    assert names == sorted(p.name[: -len(".yaml")] for p in Path(CONFIG_DIR, "task").iterdir())
    assert {"Banking77Classification", "STSBenchmark", "SciFact"} <= set(names)
    for name in names:
        assert build_config([f"task={name}"]).task.name == name


def test_task_folder_missing_lists_present_folders(tmp_path):
    (tmp_path / "Banking77Classification").mkdir()
    (tmp_path / "SciFact").mkdir()
    with pytest.raises(DataError) as err:
        task_folder(tmp_path, "Banking77Clasification")
    msg = str(err.value)
    assert "Banking77Classification, SciFact" in msg
    assert "Did you mean 'Banking77Classification'" in msg
    with pytest.raises(DataError, match="is not a folder"):
        task_folder(tmp_path / "nope", "SciFact")


def test_task_data_num_classes():
    splits = datasets.DatasetDict(train=datasets.Dataset.from_dict({"text": ["a"], "label": [0]}))
    assert TaskData("t", splits, ["x", "y", "z"], "src").num_classes == 3
