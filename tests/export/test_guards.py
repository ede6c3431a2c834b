"""What eval.py must never do: replace a folder or the run, run code from a run folder, mix up labels."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from head_utils import resign

from ucse.config import build_config, from_yaml
from ucse.core.encoder import UcseEncoder
from ucse.heads import build_head, save_head
from ucse.training import train

ROOT = Path(__file__).resolve().parents[2]


def _eval_main():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_ucse_eval_entry", ROOT / "eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def _one_error_line(stderr: str) -> bool:
    return sum(line.startswith("error: ") for line in stderr.splitlines()) == 1 and "Traceback" not in stderr


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def run(tiny_task_root, tiny_bert_dir, tmp_path_factory) -> Path:
    """A finished one-epoch run (variance head) on the tiny task."""
    out = tmp_path_factory.mktemp("guards") / "run"
    cfg = build_config(
        [
            f"data.root={tiny_task_root}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "optim.epochs=1",
            "recipe=paper",
            "optim.batch_size=16",
            "progress_bar=false",
            f"output_dir={out}",
        ]
    )
    return train(cfg).run_dir


@pytest.fixture
def texts(tmp_path) -> Path:
    path = tmp_path / "texts.jsonl"
    path.write_text('{"text": "my bank card"}\n{"text": "a dog"}\n')
    return path


def test_export_into_a_non_empty_folder_refuses_and_leaves_it_intact(run, texts, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    before = _snapshot(mine)
    code = _eval_main()([f"run={run}", f"export={texts}", f"out={mine}"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err)
    assert "is not empty (thesis.tex)" in err and "overwrite=true" in err
    assert _snapshot(mine) == before
    # With the flag the folder is replaced whole by the export.
    assert _eval_main()([f"run={run}", f"export={texts}", f"out={mine}", "overwrite=true"]) == 0
    assert sorted(p.name for p in mine.iterdir()) == ["embeddings.safetensors", "meta.json"]


@pytest.mark.parametrize("where", ["run", "parent", "head"])
def test_export_never_replaces_the_run(run, texts, capsys, where):
    out = {"run": run, "parent": run.parent, "head": run / "head"}[where]
    before = _snapshot(run)
    code = _eval_main()([f"run={run}", f"export={texts}", f"out={out}", "overwrite=true"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err) and "would replace the run" in err
    assert _snapshot(run) == before


@pytest.mark.parametrize("out", [".", ".."])
def test_export_never_replaces_the_working_folder(run, texts, tmp_path, monkeypatch, capsys, out):
    # out=. overwrite=true failed with a raw "Device or resource busy ('.')" after trying to swap the cwd
    work = tmp_path / "work" / "here"
    work.mkdir(parents=True)
    (work / "precious.txt").write_text("mine")
    monkeypatch.chdir(work)
    code = _eval_main()([f"run={run}", f"export={texts}", f"out={out}", "overwrite=true"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err) and "is the folder you are working in" in err
    assert sorted(p.name for p in work.iterdir()) == ["precious.txt"]


def test_export_into_a_new_folder_works_and_leaves_no_temporary(run, texts, tmp_path):
    out = tmp_path / "new" / "emb"
    assert _eval_main()([f"run={run}", f"export={texts}", f"out={out}"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["count"] == 2 and not list(out.parent.glob(".*"))


def _evil_model(tmp_path: Path, tiny_bert_dir: Path) -> tuple[Path, Path]:
    """A model folder whose config asks for remote code: importing its module writes a marker file."""
    folder = tmp_path / "evil-model"
    shutil.copytree(tiny_bert_dir, folder)
    marker = tmp_path / "code-ran.txt"
    (folder / "evil.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from transformers import BertConfig, BertModel\n"
        "class EvilConfig(BertConfig):\n    model_type = 'evil'\n"
        "class EvilModel(BertModel):\n    config_class = EvilConfig\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config.update(
        model_type="evil", auto_map={"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}
    )
    (folder / "config.json").write_text(json.dumps(config))
    return folder, marker


def _run_asking_for_remote_code(run: Path, model: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "their-run"
    shutil.copytree(run, copy)
    head_cfg = json.loads((copy / "head" / "config.json").read_text())
    head_cfg["meta"]["backbone"].update(model=str(model), trust_remote_code=True)
    (copy / "head" / "config.json").write_text(json.dumps(head_cfg))
    resign(copy / "head")  # a head saved asking for it (not edited afterwards): the guard itself must refuse
    text = (copy / "config.yaml").read_text().replace("trust_remote_code: false", "trust_remote_code: true")
    (copy / "config.yaml").write_text(text)
    return copy


def test_a_run_folder_asking_for_remote_code_does_not_run_it(run, texts, tiny_bert_dir, tmp_path, capsys):
    model, marker = _evil_model(tmp_path, tiny_bert_dir)
    theirs = _run_asking_for_remote_code(run, model, tmp_path)
    for argv in (
        [f"run={theirs}", "plots=false", "efficiency=false"],
        [f"run={theirs}", f"export={texts}", f"out={tmp_path / 'o'}"],
    ):
        code = _eval_main()(argv)
        err = capsys.readouterr().err
        assert code == 2 and _one_error_line(err), err
        assert not marker.exists()
    # The same folder with the user's own trust_remote_code=true does import the module: the check above
    # can fail. (A subprocess, so transformers' module cache goes to a temporary folder.)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_MODULES_CACHE=str(tmp_path / "modules"))
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "eval.py"),
            f"run={theirs}",
            f"export={texts}",
            f"out={tmp_path / 'o2'}",
            "trust_remote_code=true",
        ],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert marker.read_text() == "ran"


def test_a_head_on_a_backbone_of_another_width_is_refused(tiny_bert_dir, tiny_bert_cfg, tmp_path):
    from omegaconf import OmegaConf

    from ucse.config import HeadConfig

    head = build_head(HeadConfig(), hidden_size=48, num_classes=3, pooling="mean")
    meta = {
        "label_names": ["a", "b", "c"],
        "backbone": OmegaConf.to_container(OmegaConf.structured(tiny_bert_cfg)),
    }
    save_head(head, tmp_path / "head", meta)
    with pytest.raises(ValueError, match="trained on 48-d token states but backbone .* gives 32-d"):
        UcseEncoder.from_dir(tmp_path / "head")


def test_evaluating_on_reordered_labels_is_refused(run, tiny_task_root, tmp_path, capsys):
    # The same texts and label names, but class_0 and class_1 swap their ids.
    copy = tmp_path / "data"
    shutil.copytree(tiny_task_root, copy)
    for split in copy.glob("*/*.jsonl"):
        rows = [json.loads(line) for line in split.read_text().splitlines()]
        for r in rows:
            r["label"] = {0: 1, 1: 0}.get(r["label"], r["label"])
        split.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = _snapshot(run)
    code = _eval_main()([f"run={run}", f"data_root={copy}", "plots=false", "efficiency=false"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err)
    assert "same labels in another order (id 0: 'class_0' in the head, 'class_1' in the data)" in err
    assert _snapshot(run) == before


def test_the_export_names_the_head_that_was_saved_not_auto(run, texts, tmp_path):
    # head=auto saves the model it chose; the export's meta said "head:auto" (from config.yaml)
    copy = tmp_path / "auto-run"
    shutil.copytree(run, copy)
    text = (copy / "config.yaml").read_text()
    saved = json.loads((copy / "head" / "config.json").read_text())["head"]["type"]
    assert f"type: {saved}" in text
    (copy / "config.yaml").write_text(text.replace(f"type: {saved}", "type: auto", 1))
    assert _eval_main()([f"run={copy}", f"export={texts}", f"out={tmp_path / 'o'}"]) == 0
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert meta["pooling"] == f"head:{saved}" != "head:auto"


def test_a_head_without_variance_is_refused_before_the_texts_are_encoded(
    tiny_task_root, tiny_bert_dir, tmp_path, monkeypatch, capsys
):
    # The default head=auto may ship the probe: the export encoded every text first, then said to train
    # with head.gaussian=true (which head=auto ignores)
    cfg = build_config(
        [
            f"data.root={tiny_task_root}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "head=logreg",
            "progress_bar=false",
            f"output_dir={tmp_path / 'run'}",
        ]
    )
    run = train(cfg).run_dir
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text.replace("type: logreg", "type: auto", 1))  # as head=auto's choice
    encoded = []
    real = UcseEncoder.encode_gaussian
    monkeypatch.setattr(
        UcseEncoder, "encode_gaussian", lambda self, t, **k: encoded.append(len(t)) or real(self, t, **k)
    )
    assert _eval_main()([f"run={run}", "export=test", f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err
    assert _one_error_line(err) and "head=auto chose logreg, which has no variance branch" in err
    assert "head=textcnn" in err and encoded == [1] and not (tmp_path / "o").exists()
    # a head with a variance branch switched off: the fix is to switch it on
    cfg = build_config(
        [
            f"data.root={tiny_task_root}",
            f"backbone.model={tiny_bert_dir}",
            "backbone.name=tiny-bert",
            "backbone.precision=fp32",
            "recipe=paper",
            "head=textcnn",
            "head.gaussian=false",
            "optim.epochs=1",
            "progress_bar=false",
            f"output_dir={tmp_path / 'plain'}",
        ]
    )
    plain = train(cfg).run_dir
    assert _eval_main()([f"run={plain}", "export=test", f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err
    assert (
        _one_error_line(err)
        and "(it has no variance branch)" in err
        and "Train with head.gaussian=true" in err
    )


def test_an_export_of_a_capped_runs_split_says_it_is_the_runs_slice(run, tmp_path, capsys):
    # a trial: export=test of a run trained with data.max_eval_samples=200 exported 200 of 670 texts as "test"
    cfg = from_yaml(run / "config.yaml")
    cfg.data.max_eval_samples, cfg.output_dir = 5, str(tmp_path / "capped")
    copy = train(cfg).run_dir  # the same run, its evaluation splits capped at 5 rows
    assert _eval_main()([f"run={copy}", "export=test", f"out={tmp_path / 'o'}"]) == 0
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert meta["count"] == 5 and meta["slice"] == "the run's data.max_eval_samples=5 rows (seed 0)"
    assert "exported 5 texts (the run's data.max_eval_samples=5 rows (seed 0))" in capsys.readouterr().out
    assert _eval_main()([f"run={run}", "export=test", f"out={tmp_path / 'whole'}"]) == 0
    assert "slice" not in json.loads((tmp_path / "whole" / "meta.json").read_text())
