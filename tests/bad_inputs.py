"""Bad-input cases run through the real entry points (``train.py``, ``eval.py``, ``ucse sweep``).

Each case prepares what it needs in a workspace (a tiny BERT, the tiny cue task and one finished run),
calls the command's ``main(argv)`` and records the exit code and the ``error:`` line. Used by
``tests/test_bad_inputs.py`` (every case exits as expected, one line, no traceback) and by
``bench/bad_inputs.py`` (prints the table in docs/RESULTS.md section 10).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def entry_point(name: str) -> Callable[[list[str]], int]:
    """``main`` of ``train.py`` / ``eval.py`` at the repository root, or of ``ucse.cli.sweep``."""
    if name == "sweep":
        from ucse.cli.sweep import main

        return main
    spec = importlib.util.spec_from_file_location(f"_ucse_{name}_entry", ROOT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@dataclass
class Workspace:
    """Paths every case may use (built once by :func:`make_workspace`)."""

    root: Path
    bert: Path
    task: Path
    run: Path

    def train_args(self, out: Path | None = None, *extra: str) -> list[str]:
        return [
            f"data.root={self.task}",
            f"backbone.model={self.bert}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "optim.epochs=1",
            "recipe=paper",
            "optim.batch_size=16",
            "progress_bar=false",
            "uncertainty.enabled=false",
            f"output_dir={out or self.root / 'fresh'}",
            *extra,
        ]

    def copy_run(self, name: str) -> Path:
        dest = self.root / name
        if not dest.exists():
            shutil.copytree(self.run, dest)
        return dest


def make_workspace(root: Path) -> Workspace:
    """Tiny BERT, tiny task and one finished run (one epoch) under ``root``."""
    from tiny_models import build_tiny_bert
    from toy_tasks import write_cue_task

    from ucse.config import build_config
    from ucse.training import train

    bert = build_tiny_bert(root / "bert")
    task = write_cue_task(root / "task")
    ws = Workspace(root, bert, task, root / "run")
    train(build_config(ws.train_args(ws.run)))
    return ws


@dataclass
class Case:
    """One bad input: the command, how to build its arguments, the expected exit code and message part."""

    name: str
    command: str  # train | eval | sweep
    args: Callable[[Workspace], list[str]]
    code: int
    expect: str
    env: dict[str, str] | None = None


def _data_file(name: str, content: bytes) -> Callable[[Workspace], list[str]]:
    def make(ws: Workspace) -> list[str]:
        path = ws.root / "files" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(content)
        return [f"data.path={path}", "optim.epochs=1", "recipe=paper", f"output_dir={ws.root / 'never'}"]

    return make


def _truncated_ckpt(ws: Workspace) -> list[str]:
    run = ws.copy_run("run-truncated")
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:2000])
    return ws.train_args(run, "optim.epochs=2", "recipe=paper", "ckpt_path=last")


def _foreign_folder(ws: Workspace) -> list[str]:
    mine = ws.root / "my-files"
    mine.mkdir(exist_ok=True)
    (mine / "notes.txt").write_text("keep")
    return ws.train_args(mine)


def _texts(ws: Workspace) -> Path:
    path = ws.root / "texts.jsonl"
    path.write_text('{"text": "my bank card"}\n')
    return path


def _nonempty_out(ws: Workspace) -> list[str]:
    mine = ws.root / "my-out"
    mine.mkdir(exist_ok=True)
    (mine / "thesis.tex").write_text("keep")
    return [f"run={ws.run}", f"export={_texts(ws)}", f"out={mine}"]


def _remote_code(ws: Workspace) -> list[str]:
    model = ws.root / "evil-model"
    if not model.exists():
        shutil.copytree(ws.bert, model)
        (model / "evil.py").write_text(f"open({str(ws.root / 'code-ran')!r}, 'w').write('ran')\n")
        config = json.loads((model / "config.json").read_text())
        config.update(model_type="evil", auto_map={"AutoConfig": "evil.C", "AutoModel": "evil.M"})
        (model / "config.json").write_text(json.dumps(config))
    run = ws.copy_run("run-remote-code")
    head_cfg = json.loads((run / "head" / "config.json").read_text())
    head_cfg["meta"]["backbone"].update(model=str(model), trust_remote_code=True)
    (run / "head" / "config.json").write_text(json.dumps(head_cfg))
    from head_utils import resign

    resign(run / "head")  # a head saved this way (not edited after saving): the remote-code guard must act
    return [f"run={run}", "plots=false", "efficiency=false"]


def _reordered(ws: Workspace) -> list[str]:
    copy = ws.root / "task-reordered"
    if not copy.exists():
        shutil.copytree(ws.task, copy)
        for split in copy.glob("*/*.jsonl"):
            rows = [json.loads(line) for line in split.read_text().splitlines()]
            for r in rows:
                r["label"] = {0: 1, 1: 0}.get(r["label"], r["label"])
            split.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [f"run={ws.run}", f"data_root={copy}", "plots=false", "efficiency=false"]


def _other_width(ws: Workspace) -> list[str]:
    from ucse.config import HeadConfig
    from ucse.heads import build_head, load_head, save_head

    run = ws.copy_run("run-other-width")
    _, meta = load_head(run / "head")
    shutil.rmtree(run / "head")
    save_head(build_head(HeadConfig(), 48, 3, "mean"), run / "head", meta)  # a head for 48-d states
    return [f"run={run}", "plots=false", "efficiency=false"]


def _cache_file(ws: Workspace) -> dict[str, str]:
    path = ws.root / "cache-is-a-file"
    path.write_text("")
    return {"UCSE_CACHE_DIR": str(path)}


CASES: list[Case] = [
    *(
        Case(f"`{o}`", "train", (lambda ws, o=o: o.split(" ")), 2, e)
        for o, e in (
            ("optim.epochs=0", "optim.epochs=0: allowed an integer >= 1"),
            ("optim.epochs=-1", "optim.epochs=-1: allowed an integer >= 1"),
            ("optim.lr=-0.001", "optim.lr=-0.001: allowed a finite number > 0"),
            ("optim.warmup_ratio=5", "optim.warmup_ratio=5.0: allowed 0 <= warmup_ratio <= 1"),
            ("optim.batch_size=0", "optim.batch_size=0: allowed an integer >= 1"),
            ("backbone.max_length=0", "backbone.max_length=0: allowed an integer >= 1"),
            ("loss.temperature=0", "loss.temperature=0.0: allowed > 0"),
            ("loss.lcl_weight=1.5", "loss.lcl_weight=1.5: allowed 0 <= lcl_weight <= 1"),
            ("seed=???", "'seed=???' leaves 'seed' unset"),
            ("overwrite=true ckpt_path=last", "contradict each other"),
        )
    ),
    Case("`accelerator=cuda`, no GPU", "train", lambda ws: ["accelerator=cuda"], 2, "no CUDA GPU is visible"),
    Case(
        "`backbone.prompt=query: {text}` (accepted verbatim)",
        "train",
        lambda ws: ["--cfg", "backbone.prompt=query: {text}"],
        0,
        "",
    ),
    Case(
        "JSONL syntax error on line 2",
        "train",
        _data_file("d.jsonl", b'{"text": "a", "label": "x"}\n{"text": "b", label: "y"}\n'),
        2,
        "line 2: JSON syntax error",
    ),
    Case(
        "JSONL line that is not an object",
        "train",
        _data_file("e.jsonl", b'{"text": "a", "label": "x"}\n[1, 2]\n'),
        2,
        "line 2: expected one JSON object",
    ),
    Case("0-byte CSV", "train", _data_file("f.csv", b""), 2, "is empty (0 bytes)"),
    Case("header-only CSV", "train", _data_file("g.csv", b"text,label\n"), 2, "header row but no data rows"),
    Case("blank-only JSONL", "train", _data_file("h.jsonl", b"\n \n"), 2, "holds only blank lines"),
    Case(
        "non-UTF-8 byte in a CSV",
        "train",
        _data_file("i.csv", b"text,label\na,x\nb\xff,y\n"),
        2,
        "line 3: byte 0xff",
    ),
    Case(
        "`UCSE_CACHE_DIR` is a file",
        "train",
        lambda ws: ws.train_args(ws.root / "r-cache"),
        2,
        "is a file, not a folder",
        env={},
    ),
    Case(
        "rerun into a finished run (other task)",
        "train",
        lambda ws: ws.train_args(ws.run, "task.name=Other"),
        2,
        "Pass overwrite=true to replace it whole, ckpt_path=last to resume it",
    ),
    Case(
        "train into a folder of other files",
        "train",
        _foreign_folder,
        2,
        "no ucse run (no config.yaml: notes.txt)",
    ),
    Case(
        "resume with another head (`head=linear ckpt_path=last`)",
        "train",
        lambda ws: ws.train_args(ws.run, "head=linear", "ckpt_path=last"),
        2,
        "another 'head' (head.type: 'textcnn' in the run, 'linear' now)",
    ),
    Case("resume from a truncated `last.ckpt`", "train", _truncated_ckpt, 2, "last.ckpt is unreadable"),
    Case(
        "non-finite loss (`optim.lr=1e30`)",
        "train",
        lambda ws: ws.train_args(ws.root / "nan-run", "optim.lr=1e30"),
        2,
        "non-finite loss at step",
    ),
    Case(
        "export into a non-empty folder",
        "eval",
        _nonempty_out,
        2,
        "is not empty (thesis.tex); nothing was changed",
    ),
    Case(
        "export with `out=<the run>`",
        "eval",
        lambda ws: [f"run={ws.run}", f"export={_texts(ws)}", f"out={ws.run}", "overwrite=true"],
        2,
        "would replace the run",
    ),
    Case(
        "run folder whose head asks for remote code",
        "eval",
        _remote_code,
        2,
        "ships its own model code (auto_map), which is not run",
    ),
    Case("evaluate on data with reordered label ids", "eval", _reordered, 2, "same labels in another order"),
    Case(
        "head trained on 48-d states, 32-d backbone",
        "eval",
        _other_width,
        2,
        "trained on 48-d token states but backbone",
    ),
    Case(
        "sweep `seeds=0`",
        "sweep",
        lambda ws: ["seeds=0", "variants=textcnn-both", f"out={ws.root / 'sw'}"],
        2,
        "seeds=0: a sweep needs seeds >= 1",
    ),
    Case(
        "sweep with `optim.epochs=0`",
        "sweep",
        lambda ws: ["seeds=1", "variants=textcnn-both", "optim.epochs=0", f"out={ws.root / 'sw'}"],
        2,
        "optim.epochs=0: allowed",
        "recipe=paper",
    ),
]


def run_case(case: Case, ws: Workspace) -> tuple[int, str, str]:
    """Run one case; returns (exit code, the ``error:`` line or last stderr line, whole stderr)."""
    argv = case.args(ws)
    env = _cache_file(ws) if case.env is not None else {}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = entry_point(case.command)(argv)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.startswith("error: ")]
    return code, (lines[0] if lines else ""), text
