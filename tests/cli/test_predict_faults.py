"""``ucse predict`` on damaged runs and faults: a row per line, else one line and exit 2 (130 for Ctrl-C)."""

from __future__ import annotations

import errno
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from head_utils import resign
from toy_tasks import own_rows

from ucse.cli.main import main


def _texts(n: int) -> list[str]:
    return [r["text"] for r in own_rows(n, seed=11)]


def _main(argv: list[str]) -> int:
    """``ucse`` main; a KeyboardInterrupt escaping it fails the test (not the whole pytest session)."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped the command as a KeyboardInterrupt traceback")


def _one_error_line(capsys, code: int, expected: int = 2) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert code == expected and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def run(tiny_clf_run: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny trained run, free to damage."""
    return Path(shutil.copytree(tiny_clf_run, tmp_path / "run"))


@pytest.fixture
def txt(tmp_path: Path) -> Path:
    path = tmp_path / "in.txt"
    path.write_text("\n".join(_texts(3)) + "\n")
    return path


def test_txt_lines_holding_other_line_breaks_give_one_row_each(run, tmp_path):
    texts = [
        f"{a}{sep}{b}" for (a, b), sep in zip(zip(_texts(4), _texts(8)[4:]), ["\f", "\u2028", "\x85", "\r"])
    ]
    (tmp_path / "in.txt").write_bytes(("\n".join(texts) + "\n").encode())
    out = tmp_path / "p.jsonl"
    assert main(["predict", f"run={run}", f"input={tmp_path / 'in.txt'}", f"out={out}"]) == 0
    rows = [json.loads(line) for line in out.read_bytes().decode().split("\n") if line]
    assert [r["text"] for r in rows] == texts


def test_a_head_with_nan_weights_exits_2_instead_of_answering(run, txt, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    # written as a tamperer would (save_head itself refuses NaN weights now)
    path = run / "head" / "model.safetensors"
    save_file({k: torch.full_like(v, float("nan")) for k, v in load_file(str(path)).items()}, str(path))
    resign(run / "head")
    out = tmp_path / "p.jsonl"
    line = _one_error_line(capsys, main(["predict", f"run={run}", f"input={txt}", f"out={out}"]))
    assert "model.safetensors: tensor" in line and "NaN/inf" in line and not out.exists()


def test_an_unwritable_out_folder_fails_before_the_model_loads(run, txt, tmp_path, monkeypatch, capsys):
    def read_only(*args, **kwargs):  # the kernel's answer on a read-only mount (root ignores chmod)
        raise OSError(errno.EROFS, "Read-only file system")

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before out= was checked")

    monkeypatch.setattr("ucse.inference.files.tempfile.TemporaryFile", read_only)
    monkeypatch.setattr("ucse.inference.classifier.UcseClassifier.from_pretrained", never)
    line = _one_error_line(
        capsys, main(["predict", f"run={run}", f"input={txt}", f"out={tmp_path / 'p.csv'}"])
    )
    assert f"folder {tmp_path} is not writable (Read-only file system)" in line


def test_a_full_disk_at_the_end_is_one_line_and_no_file(run, txt, tmp_path, monkeypatch, capsys):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("ucse.atomic.os.fsync", full)
    out = tmp_path / "p.jsonl"
    line = _one_error_line(capsys, main(["predict", f"run={run}", f"input={txt}", f"out={out}"]))
    assert "No space left on device" in line and sorted(p.name for p in tmp_path.iterdir()) == [
        "in.txt",
        "run",
    ]


@pytest.mark.parametrize("stdin", ["closed", "none", "latin-1"])
def test_a_bad_stdin_is_one_line(run, monkeypatch, capsys, stdin):
    stream = io.TextIOWrapper(io.BytesIO("café au lait\n".encode("latin-1")))
    if stdin == "closed":
        stream.close()
    monkeypatch.setattr(sys, "stdin", None if stdin == "none" else stream)
    line = _one_error_line(capsys, main(["predict", f"run={run}", "input=-"]))
    assert (
        "stdin line 1: byte 0xe9 at column 4 is not UTF-8" if stdin == "latin-1" else "stdin is closed"
    ) in line


def test_ctrl_c_during_predict_exits_130_in_one_line(run, txt, tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("ucse.inference.classifier.UcseClassifier.predict_with_uncertainty", interrupted)
    out = tmp_path / "p.jsonl"
    line = _one_error_line(capsys, _main(["predict", f"run={run}", f"input={txt}", f"out={out}"]), 130)
    assert line.startswith("error: interrupted (Ctrl-C).") and not out.exists()


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_a_stop_says_what_stdout_got(run, tmp_path, monkeypatch, capsys, stop):
    # With out=- a batch job's stdout had the first block when the stop came, and the message said "No
    # output file was left half-written"; SIGTERM said nothing of what was left.
    import ucse.inference.blocks as blocks_mod
    from ucse.inference.classifier import UcseClassifier
    from ucse.interrupt import TerminatedError

    real, calls = UcseClassifier.predict_with_uncertainty, []

    def second_block_stops(self, texts, *args, **kwargs):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt if stop == "ctrl-c" else TerminatedError("stopped by SIGTERM")
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(blocks_mod, "BLOCK", 4)
    monkeypatch.setattr(UcseClassifier, "predict_with_uncertainty", second_block_stops)
    texts = tmp_path / "in.txt"
    texts.write_text("".join(f"text number {i}\n" for i in range(11)))
    code = _main(["predict", f"run={run}", f"input={texts}", "out=-"])
    captured = capsys.readouterr()
    assert code == (130 if stop == "ctrl-c" else 143)
    assert len(captured.out.splitlines()) == 4  # the first block, whole
    line = captured.err.strip().splitlines()[-1]
    assert "stdout holds what was written before the stop: the first 4 of 11 rows" in line, line
    assert "No output file" not in line
    out = tmp_path / "p.jsonl"  # to a file: nothing left, and SIGTERM says so too
    calls.clear()
    assert _main(["predict", f"run={run}", f"input={texts}", f"out={out}"]) == code
    assert "No output file was left half-written." in capsys.readouterr().err and not out.exists()


# The first call each command's body makes, where the command looks it up (by name in its module, or at the
# source when imported inside the body).
FIRST_CALL = {
    "train": ["ucse.config.build_config", "ucse.cli.train.build_config"],
    "eval": ["ucse.evaluation.config.build_eval_config", "ucse.cli.evaluate.build_eval_config"],
    "predict": ["ucse.inference.config.build_predict_config", "ucse.cli.predict.build_predict_config"],
    "sweep": ["ucse.cli.sweep.parse"],
}


@pytest.mark.parametrize("command", list(FIRST_CALL))
def test_ctrl_c_is_one_line_and_exit_130_for_every_command(command, monkeypatch, capsys):
    import importlib

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    targets = [t.rsplit(".", 1) for t in FIRST_CALL[command]]
    modules = [importlib.import_module(m) for m, _ in targets]  # all imported before any is patched
    for module, (_, name) in zip(modules, targets, strict=True):
        monkeypatch.setattr(module, name, interrupted, raising=False)
    line = _one_error_line(capsys, _main([command, "seed=1"]), 130)
    assert line.startswith("error: interrupted (Ctrl-C).")


def _edit_head(run: Path, fn) -> None:
    path = run / "head" / "config.json"
    cfg = json.loads(path.read_text())
    fn(cfg)
    path.write_text(json.dumps(cfg))
    resign(run / "head")


def _edit_calibration(run: Path, fn, sign: bool = True) -> None:
    path = run / "head" / "calibration.json"
    cfg = json.loads(path.read_text())
    fn(cfg)
    path.write_text(json.dumps(cfg))
    if sign:
        resign(run / "head")


CASES = {
    "run config.yaml not YAML": (
        lambda r: (r / "config.yaml").write_text("task: {name: [x\n"),
        "config.yaml line 2: not a valid run config (did not find expected",
    ),
    "run config.yaml a list": (
        lambda r: (r / "config.yaml").write_text("- 1\n"),
        "config.yaml must hold a mapping of config keys",
    ),
    "meta.backbone missing": (
        lambda r: _edit_head(r, lambda c: c["meta"].pop("backbone")),
        "has no meta.backbone: the head does not say which backbone it was trained on",
    ),
    "meta.backbone unknown key": (
        lambda r: _edit_head(r, lambda c: c["meta"]["backbone"].update(wings=2)),
        "meta.backbone has unknown key(s) ['wings']",
    ),
    "meta.instruction not a string": (
        lambda r: _edit_head(r, lambda c: c["meta"].update(instruction=5)),
        "meta.instruction is 5, expected a string",
    ),
    "hidden_size 10**9": (
        lambda r: _edit_head(r, lambda c: c.update(hidden_size=10**9)),
        "field 'hidden_size' is 1000000000, allowed: an integer in [1, 1048576]",
    ),
    "kernel_sizes [10**6]": (
        lambda r: _edit_head(r, lambda c: c["head"].update(kernel_sizes=[10**6])),
        "field 'head.kernel_sizes' is [1000000], allowed:",
    ),
    "duplicated label_names": (
        lambda r: _edit_head(r, lambda c: c["meta"].update(label_names=["money", "money", "pets"])),
        "meta.label_names repeats ['money']",
    ),
    "format_version '1'": (
        lambda r: _edit_head(r, lambda c: c.update(format_version="1")),
        "'format_version' is '1' (a string), not a JSON integer",
    ),
    "qhat -5 (re-signed)": (
        lambda r: _edit_calibration(r, lambda c: c["conformal"].update(qhat=-5)),
        "field 'conformal.qhat' is -5, allowed: a number in [0, 1]",
    ),
    "qhat -5 (edited only)": (
        lambda r: _edit_calibration(r, lambda c: c["conformal"].update(qhat=-5), sign=False),
        "calibration.json does not match its SHA-256",
    ),
    "abstain threshold nan": (
        lambda r: _edit_calibration(r, lambda c: c["abstain"].update(threshold="nan")),
        "field 'abstain.threshold' is 'nan', allowed: a finite number",
    ),
    "score missing": (
        lambda r: _edit_calibration(r, lambda c: c.pop("score")),
        "calibration.json: the top level lacks key(s) ['score']",
    ),
    "extra key under abstain": (
        lambda r: _edit_calibration(r, lambda c: c["abstain"].update(note="x")),
        "'abstain' has unknown key(s) ['note']",
    ),
    "score bogus": (
        lambda r: _edit_calibration(r, lambda c: c.update(score="bogus")),
        "calibration.json: field 'score' is 'bogus', allowed: one of msp,",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_run_is_one_line_naming_the_file(case, run, txt, tmp_path, capsys):
    damage, expect = CASES[case]
    damage(run)
    out = tmp_path / "p.jsonl"
    source = txt
    if "config.yaml" in case:  # the run's config is read for a table's text column only
        source = tmp_path / "new.csv"
        source.write_text("text\n" + txt.read_text())
    line = _one_error_line(capsys, main(["predict", f"run={run}", f"input={source}", f"out={out}"]))
    assert expect in line and str(run) in line, line
    assert not out.exists()
    if "config.yaml" in case:  # a .txt file has no columns: the damaged config does not stop it
        assert main(["predict", f"run={run}", f"input={txt}", f"out={out}"]) == 0 and out.is_file()


def test_eval_of_a_missing_run_folder_says_it_does_not_exist(tmp_path, capsys):
    line = _one_error_line(capsys, main(["eval", f"run={tmp_path / 'nope'}"]))
    assert f"run={tmp_path / 'nope'} does not exist" in line
