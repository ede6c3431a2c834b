"""``reads_back_data``: the runs that commands rereading their data (calibrate, review, eval) can serve."""

from __future__ import annotations

from ucse.config import build_config
from ucse.core.run_folder import reads_back_data
from ucse.data.tasks import DATA_ENV


def _cfg(*tokens: str):
    # a run's config as the in-memory path writes it: task "data", no hub id, no file, no root
    return build_config(["task.name=data", "task.hf_path=null", *tokens])


def test_a_file_a_hub_task_or_a_root_reads_back(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert not reads_back_data(_cfg())  # rows passed in memory
    assert reads_back_data(_cfg(f"data.path={tmp_path / 'rows.csv'}"))
    assert reads_back_data(_cfg("task.hf_path=mteb/banking77"))
    assert reads_back_data(_cfg(f"data.root={tmp_path}"))
    assert reads_back_data(_cfg(), data_root=str(tmp_path))  # a root given to the command


def test_a_task_folder_found_through_the_environment_reads_back(tmp_path, monkeypatch):
    # trained with UCSE_DATA_DIR=<root> task.name=MyTask: the config keeps no root, the variable leads there
    (tmp_path / "MyTask").mkdir()
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert reads_back_data(_cfg("task.name=MyTask"))
    # the variable set, but no folder of the run's own: rows passed in memory stay unreadable
    assert not reads_back_data(_cfg())
    monkeypatch.delenv(DATA_ENV)
    assert not reads_back_data(_cfg("task.name=MyTask"))
