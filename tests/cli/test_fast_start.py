"""The CLI answers ``--help`` and a mistyped argument before importing the heavy stack; the library loads a
head and predicts without the training stack.

Each case runs in a fresh interpreter and reports ``sys.modules``: a property of what was imported, not a
timing (which depends on the machine and its load; bench/cli_startup.py measures that).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "lightning", "transformers", "datasets", "mteb", "sklearn")
"""What ``ucse <command> --help`` and an argument error must not import (seconds each)."""
TRAINING_STACK = ("lightning", "datasets", "mteb")
"""What ``import ucse``, ``UcseClassifier.from_pretrained`` and ``predict`` must not import (issue 17)."""

# Runs `body` (which may print), then reports on the real stdout, as JSON, the exit code, what `body`
# wrote to stderr and which of `names` (or their submodules) were imported.
HARNESS = """
import contextlib, io, json, sys
names = {names!r}
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = None
{body}
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(names))
print(json.dumps({{"code": code, "out": out.getvalue(), "err": err.getvalue(), "loaded": loaded}}))
"""


def run_child(body: str, names: tuple[str, ...], cwd: Path) -> dict:
    """Run ``body`` (indented one level) in a fresh interpreter; its report (see ``HARNESS``)."""
    code = HARNESS.format(names=names, body=body)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


CLI_CASES = {
    "train --help": (["train", "--help"], 0, "optim.lr: float = 0.0008"),
    "predict --help": (["predict", "--help"], 0, "top_k: int | None = null"),
    "eval --help": (["eval", "--help"], 0, "mteb: bool = false"),
    "export --help": (["export", "--help"], 0, "export: str | None = null"),
    "ensemble --help": (["ensemble", "--help"], 0, "ensemble: str | None = null"),
    "sweep --help": (["sweep", "--help"], 0, "optim.lr: float = 0.0008"),
    "train --cfg": (["train", "optim.lr=0.01", "--cfg"], 0, "lr: 0.01"),
    "train optim.lrr=1": (["train", "optim.lrr=1"], 2, "error: Unknown config key 'optim.lrr'"),
    "train optim.lr=-1": (["train", "optim.lr=-1"], 2, "error: Invalid value optim.lr=-1.0"),
    "predict run=x imput=y": (["predict", "run=x", "imput=y"], 2, "Did you mean 'input'?"),
    "predict without input": (["predict", "run=x"], 2, "error: predict needs input="),
    "suggest --help": (["suggest", "--help"], 0, "strategy: Strategy {diverse_margin,margin,random}"),
    "suggest n=0": (["suggest", "run=x", "input=y", "n=0"], 2, "error: n=0 must be >= 1"),
    "eval run=x splt=1": (["eval", "run=x", "splt=1"], 2, "Did you mean 'split'?"),
    "sweep seedz=3": (["sweep", "seedz=3"], 2, "Did you mean 'seeds'?"),
    "train data.path=<missing>": (
        ["train", "data.path=no-such.csv"],
        2,
        "no-such.csv does not exist. Point it",
    ),
}


@pytest.mark.parametrize("case", CLI_CASES)
def test_help_and_argument_errors_answer_before_the_heavy_imports(case, tmp_path):
    argv, exit_code, says = CLI_CASES[case]
    body = f"    from ucse.cli.main import main\n    code = main({argv!r})"
    report = run_child(body, HEAVY, tmp_path)
    assert report["code"] == exit_code
    text = report["out"] if exit_code == 0 else report["err"]
    assert says in text
    if exit_code == 2:
        assert report["err"].startswith("error: ") and report["err"].count("\n") == 1  # one line
    assert report["loaded"] == []
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_import_ucse_and_the_classifier_class_leave_out_the_training_stack(tmp_path):
    report = run_child("    import ucse", ("torch", *TRAINING_STACK), tmp_path)
    assert report["loaded"] == []  # `import ucse` alone imports no torch
    report = run_child(
        "    import ucse\n    ucse.UcseClassifier\n    code = 'torch._dynamo' in sys.modules",
        ("torch", "transformers", *TRAINING_STACK),
        tmp_path,
    )
    # The classifier needs torch (which also shows that the report sees imports), not Lightning, datasets
    # or mteb, and not transformers until a model is loaded; nor torch's compiler (~1 s of imports), which
    # only compile_head needs (transformers' model code imports it once a model loads).
    assert report["loaded"] == ["torch"] and report["code"] is False


def test_loading_a_run_and_predicting_leave_out_the_training_stack(tiny_clf_run, tmp_path):
    texts = ["my card was charged twice", "the cat sleeps all day", "a new album came out"]
    body = (
        "    import ucse\n"
        f"    clf = ucse.UcseClassifier.from_pretrained({str(tiny_clf_run)!r}, device='cpu')\n"
        f"    rows = clf.predict_with_uncertainty({texts!r})\n"
        "    code = [len(rows), len(clf.predict(['x', 'y'])), clf.predict_proba(['z']).shape[1]]"
    )
    report = run_child(body, TRAINING_STACK, tmp_path)
    assert report["code"] == [3, 2, 3]  # one row per text; three labels (money, music, pets)
    assert report["loaded"] == []


def _data_case(case: str, tmp: Path) -> tuple[list[str], str]:
    """Arguments of ``ucse train`` for a data or run-folder mistake, and what its one line says."""
    if case == "missing file":
        return [f"data.path={tmp / 'reviews.csv'}"], "does not exist"
    if case == "one label":
        (tmp / "one.csv").write_text("text,label\nfine,ok\ngood,ok\nnice,ok\n")
        return [f"data.path={tmp / 'one.csv'}"], "every train row has the label 'ok'"
    run = tmp / "runs" / "done"  # a finished run in the way
    run.mkdir(parents=True)
    (tmp / "reviews.csv").write_text("text,label\nfine,ok\nbad,no\n")
    (run / "config.yaml").write_text("{}\n")
    (run / "metrics.json").write_text("{}\n")
    return [f"output_dir={run}", f"data.path={tmp / 'reviews.csv'}"], "already holds a run"


@pytest.mark.parametrize("case", ["missing file", "one label", "finished run in the way"])
def test_data_and_run_folder_mistakes_answer_before_the_training_stack(case, tmp_path):
    # What `ucse train` finds wrong in the data or the run folder is found before Lightning (and
    # transformers' models, sklearn, mteb) are imported: seconds sooner (bench/cli_startup.py).
    argv, says = _data_case(case, tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    body = f"    from ucse.cli.main import main\n    code = main({['train', *argv]!r})"
    report = run_child(body, ("lightning", "sklearn", "mteb", "transformers.modeling_utils"), tmp_path)
    assert report["code"] == 2, report
    assert report["err"].startswith("error: ") and says in report["err"]
    assert report["loaded"] == []
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


@pytest.mark.parametrize("case", ["no such run", "no such input"])
def test_predict_mistakes_answer_before_torch(case, tiny_clf_run, tmp_path):
    # The run folder, the output and the input are checked before torch and transformers load the model.
    run = tmp_path / "nope" if case == "no such run" else tiny_clf_run
    argv = ["predict", f"run={run}", f"input={tmp_path / 'texts.txt'}", f"out={tmp_path / 'out.jsonl'}"]
    body = f"    from ucse.cli.main import main\n    code = main({argv!r})"
    report = run_child(body, ("torch", "transformers", "lightning", "mteb"), tmp_path)  # datasets reads input
    assert report["code"] == 2 and report["err"].startswith("error: ") and report["err"].count("\n") == 1
    assert ("no such folder" if case == "no such run" else "texts.txt") in report["err"]
    assert report["loaded"] == [] and list(tmp_path.iterdir()) == []
