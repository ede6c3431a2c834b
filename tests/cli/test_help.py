"""``ucse --help`` / ``ucse <command> --help``: generated from the config dataclasses, every field listed."""

from __future__ import annotations

import subprocess
import sys
import typing
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path

import pytest
import yaml

from ucse.cli.main import COMMANDS, main
from ucse.config import TrainConfig
from ucse.evaluation.config import EvalConfig
from ucse.inference.config import PredictConfig

REPO = Path(__file__).resolve().parents[2]


def leaf_fields(cls: type, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted key, default) of every leaf field, walked with ``dataclasses`` alone."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            out += leaf_fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            default = f.default if f.default is not MISSING else f.default_factory()
            out.append((f"{prefix}{f.name}", default))
    return out


def _help(argv: list[str], capsys) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_overview_lists_every_command(capsys):
    out = _help(["--help"], capsys)
    for command in COMMANDS:
        assert f"  {command} " in out


@pytest.mark.parametrize(
    "command, schema", [("train", TrainConfig), ("predict", PredictConfig), ("eval", EvalConfig)]
)
def test_every_config_field_is_in_the_command_help(command, schema, capsys):
    out = _help([command, "--help"], capsys)
    keys = leaf_fields(schema)
    assert len(keys) > 5
    for key, _ in keys:
        assert f"\n  {key}: " in out, key
    # Type, default and docstring come with each field.
    assert "  optim.lr: float = 0.0008\n      Peak learning rate." in out or command != "train"
    assert "  head.type: HeadType {textcnn,linear,mean,mlp,attention,logreg,blend,auto} = textcnn" in out or (
        command != "train"
    )
    assert "  top_k: int | None = null\n      Keep only the" in out or command != "predict"


def test_every_field_docstring_is_shown(capsys):
    """Each field's docstring (read from the source independently, with ``ast`` over the file) is shown."""
    import ast

    out = " ".join(_help(["train", "--help"], capsys).split())
    tree = ast.parse((REPO / "ucse" / "config" / "schema.py").read_text())
    docs = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Config")):
        for node, nxt in zip(cls.body, cls.body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr):
                docs.append(" ".join(nxt.value.value.split()))
    assert len(docs) > 50
    missing = [d for d in docs if d[:60] not in out]
    assert not missing


@pytest.mark.parametrize("command", ["export", "ensemble", "sweep"])
def test_other_commands_have_help(command, capsys):
    out = _help([command, "--help"], capsys)
    assert "optim.lr" in out if command == "sweep" else "  run: str | None = null" in out


def test_the_sweep_help_lists_what_it_passes_on_and_answers_as_a_module(capsys):
    from ucse.cli import sweep

    out = _help(["sweep", "--help"], capsys)
    # it listed seed and output_dir, which the sweep sets itself ("Unknown sweep option 'seed'")
    assert "\n  seed:" not in out and "\n  output_dir:" not in out and "backbone.model:" in out
    assert "eval=true" in out
    assert sweep.main(["--help"]) == 0  # python -m ucse.cli.sweep --help: "'--help' is not key=value"
    assert capsys.readouterr().out.startswith("ucse sweep:")


def test_train_cfg_prints_the_resolved_config_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "optim.lr=0.01", "head=linear", "--cfg"]) == 0
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["optim"]["lr"] == 0.01 and cfg["head"]["type"] == "linear"
    assert cfg["task"]["name"] == "Banking77Classification"
    assert list(tmp_path.iterdir()) == []


def test_a_group_file_outside_configs_is_accepted_by_path(tmp_path, capsys):
    mine = tmp_path / "my_task.yaml"
    mine.write_text(
        "task:\n  name: MyTickets\n  instruction: Classify the ticket\ndata:\n  val_fraction: 0.2\n"
    )
    assert main(["train", f"task={mine}", "--cfg"]) == 0
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["task"]["name"] == "MyTickets" and cfg["task"]["instruction"] == "Classify the ticket"
    assert cfg["data"]["val_fraction"] == 0.2
    assert main(["train", f"task={tmp_path / 'nope.yaml'}", "--cfg"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: task=") and "no such file" in err and err.count("\n") == 1


def test_no_or_unknown_command_exits_2(capsys):
    assert main([]) == 2
    assert main(["trian"]) == 2
    assert "Did you mean 'train'?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "cmd",
    [["-m", "ucse", "--help"], [str(REPO / "train.py"), "--help"], [str(REPO / "eval.py"), "--help"]],
    ids=["python -m ucse --help", "train.py --help", "eval.py --help"],
)
def test_scripts_print_help_and_exit_0(cmd):
    proc = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Fields (key=value):" in proc.stdout or "commands:" in proc.stdout
