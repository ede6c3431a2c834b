"""``reads_back_data``: the runs that commands rereading their data (calibrate, review, eval) can serve;
``read_run_metrics``: the one reader of a run's metrics.json, which treats the file as untrusted."""

from __future__ import annotations

import json
import logging

import pytest

from ucse.config import build_config
from ucse.config.run_layout import read_run_metrics
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


def test_a_run_without_metrics_reads_as_empty_and_says_nothing(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert read_run_metrics(tmp_path, "going on") == {}
    assert not caplog.text


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"{bad", "is unreadable"),
        (b"\xff\xfe not utf-8", "is unreadable"),
        (json.dumps([1, 2]).encode(), "holds a JSON list"),
        (b"null", "holds a JSON NoneType"),
        (b"[" * 100_000, "nested deeper than the JSON reader can follow"),  # a RecursionError before
    ],
)
def test_a_damaged_metrics_file_reads_as_empty_with_one_warning(tmp_path, caplog, content, said):
    (tmp_path / "metrics.json").write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="ucse.config.run_layout"):
        assert read_run_metrics(tmp_path, "the caller goes on without it") == {}
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert str(tmp_path / "metrics.json") in message and said in message
    assert message.endswith("the caller goes on without it.")


def test_a_metrics_object_reads_back_as_written(tmp_path):
    record = {"test": {"accuracy": 0.5}, "data": {"fingerprints": {"train": "ab"}}}
    (tmp_path / "metrics.json").write_text(json.dumps(record))
    assert read_run_metrics(tmp_path, "unused") == record


def test_a_recorded_data_root_that_is_no_folder_from_here_names_data_root(tmp_path, monkeypatch):
    # a run trained with a relative data.root (before roots were made absolute), evaluated from another
    # folder: the loader's error blamed "data.root or env UCSE_DATA_DIR", setting the variable did not help
    from ucse.config import ConfigError
    from ucse.core.run_folder import refuse_unreadable_data

    monkeypatch.chdir(tmp_path)
    cfg = _cfg("task=Banking77Classification")
    cfg.data.root = "../shared/data-moved"  # as an older config.yaml holds it
    with pytest.raises(ConfigError) as err:
        refuse_unreadable_data(tmp_path / "run", cfg, None, "eval", "fix")
    msg = str(err.value)
    assert "the run's config.yaml records data.root=../shared/data-moved" in msg and "pass data_root=" in msg
    with pytest.raises(ConfigError, match=r"data_root=/nowhere, which is not a folder"):
        refuse_unreadable_data(tmp_path / "run", cfg, "/nowhere", "eval", "fix")
    refuse_unreadable_data(tmp_path / "run", cfg, str(tmp_path), "eval", "fix")  # a folder given: no error
