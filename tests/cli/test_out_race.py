"""An output that appears while a command works (another process wrote it) is never replaced silently.

``check_output`` / ``check_out`` refuse an existing ``out=`` before any work; the race is a file created
between that check and the write. Two ``ucse predict`` to one new ``out=`` used to both exit 0, the file
holding one run's rows. The other process is simulated by writing ``out=`` during inference.
"""

from __future__ import annotations

import json
from pathlib import Path

from toy_tasks import own_rows

from ucse.cli.main import main
from ucse.core.encoder import UcseEncoder
from ucse.inference.classifier import UcseClassifier

THEIRS = '{"text": "the other run", "label": "pets"}\n'


def _error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def _meanwhile(monkeypatch, cls: type, method: str, write) -> None:
    """``cls.method`` does its work, then another process writes the output (``write()``)."""
    real = getattr(cls, method)

    def work_then_race(self, *a, **k):
        result = real(self, *a, **k)
        write()
        return result

    monkeypatch.setattr(cls, method, work_then_race)


def test_predict_does_not_replace_an_out_file_that_appeared_meanwhile(
    tiny_clf_run, tmp_path, monkeypatch, capsys
):
    rows = [r["text"] for r in own_rows(3, seed=11)]
    texts = tmp_path / "new.txt"
    texts.write_text("".join(t + "\n" for t in rows))
    out = tmp_path / "p.jsonl"
    _meanwhile(monkeypatch, UcseClassifier, "predict_with_uncertainty", lambda: out.write_text(THEIRS))
    args = ["predict", f"run={tiny_clf_run}", f"input={texts}", f"out={out}"]
    assert main(args) == 2
    line = _error_line(capsys.readouterr().err)
    assert str(out) in line and "appeared while" in line and "overwrite=true" in line, line
    assert out.read_text() == THEIRS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.txt", "p.jsonl"]  # no temporary left
    assert main([*args, "overwrite=true"]) == 0  # asked for: the same race replaces it
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == rows


def test_export_does_not_replace_an_out_folder_filled_meanwhile(tiny_clf_run, tmp_path, monkeypatch, capsys):
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"text": "my bank card"}\n{"text": "a dog"}\n')
    out = tmp_path / "emb"

    def fill() -> None:
        out.mkdir(exist_ok=True)
        (out / "theirs.txt").write_text("keep")

    _meanwhile(monkeypatch, UcseEncoder, "encode_gaussian", fill)
    assert main(["export", f"run={tiny_clf_run}", f"export={texts}", f"out={out}"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert str(out) in line and "appeared while" in line, line
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb", "texts.jsonl"]


def test_an_empty_out_folder_is_still_filled(tiny_clf_run, tmp_path):
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"text": "my bank card"}\n')
    out = tmp_path / "emb"
    out.mkdir()
    assert main(["export", f"run={tiny_clf_run}", f"export={texts}", f"out={out}"]) == 0
    assert sorted(p.name for p in Path(out).iterdir()) == ["embeddings.safetensors", "meta.json"]
