"""``ucse predict`` end to end on a tiny trained run, and the one-line errors of every bad input."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from toy_tasks import OWN_CUES, own_rows

from ucse.cli.main import main
from ucse.inference.classifier import UcseClassifier

NAMES = sorted(OWN_CUES)
FIELDS = {"text", "label", "confidence", "uncertainty", "abstain", "ood", "ood_score", "probs", "set"}


@pytest.fixture(scope="module")
def reference(tiny_clf_run: Path):
    return UcseClassifier.from_pretrained(tiny_clf_run, device="cpu")


def _texts(n: int = 25) -> list[str]:
    return [r["text"] for r in own_rows(n, seed=11)]


def test_txt_in_jsonl_out_in_input_order(tiny_clf_run, reference, tmp_path, capsys):
    texts = _texts()
    (tmp_path / "new.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "p.jsonl"
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'new.txt'}", f"out={out}"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in rows] == texts
    assert all(set(r) == FIELDS and r["label"] in NAMES for r in rows)
    assert [r["label"] for r in rows] == list(reference.predict(texts))
    said = capsys.readouterr().err
    assert f"25 predictions -> {out}" in said
    abstained, flagged = sum(r["abstain"] for r in rows), sum(bool(r["ood"]) for r in rows)
    # counts and their shares of the rows, which a batch job's log compares with the ~5 % expected
    shares = f"abstain on {abstained} ({4 * abstained:.1f} %); out of scope: {flagged} ({4 * flagged:.1f} %)"
    assert shares in said  # of 25 rows: 4 % each


def test_a_head_saved_beside_a_config_of_the_users_own_is_not_a_run(tiny_clf_run, reference, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "config.yaml").write_text("model: {lr: 0.1}\n")  # the user's own project config
    texts = _texts()
    (tmp_path / "new.txt").write_text("\n".join(texts) + "\n")
    # "head" too: the folder name a run's own head has (was still taken for proj's run)
    for name in ("exported", "head"):
        UcseClassifier.from_pretrained(tiny_clf_run, device="cpu").save_pretrained(proj / name)
        clf = UcseClassifier.from_pretrained(proj / name, device="cpu")
        assert clf.run_dir_ is None and clf.metrics_ == {}  # was proj, and its config read as the run's
        out = tmp_path / f"p-{name}.jsonl"  # failed: "Unknown config key 'model' (from proj/config.yaml)"
        assert main(["predict", f"run={proj / name}", f"input={tmp_path / 'new.txt'}", f"out={out}"]) == 0
        assert [json.loads(line)["label"] for line in out.read_text().splitlines()] == list(
            reference.predict(texts)
        )


def test_table_in_csv_out_with_text_column_and_top_k(tiny_clf_run, reference, tmp_path):
    texts = _texts(10)
    pd.DataFrame({"id": range(10), "body": texts}).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "p.csv"
    args = [f"run={tiny_clf_run}/head", f"input={tmp_path / 'in.parquet'}", "text_column=body", "top_k=1"]
    assert main(["predict", *args, f"out={out}"]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["text"] for r in rows] == texts
    assert [r["label"] for r in rows] == list(reference.predict(texts))
    assert all(list(json.loads(r["probs"])) == [r["label"]] for r in rows)
    assert {r["abstain"] for r in rows} <= {"True", "False"}


def test_an_id_column_is_copied_first_into_every_row_across_blocks(
    tiny_clf_run, tmp_path, monkeypatch, capsys
):
    import ucse.inference.blocks as blocks_mod
    from ucse.inference.config import ROW_FIELDS

    assert set(ROW_FIELDS) == FIELDS  # the names an id column may not shadow are the rows' own
    monkeypatch.setattr(
        blocks_mod, "BLOCK", 4
    )  # 11 rows in blocks of 4: each block's ids start where it does
    texts = _texts(11)
    ids = [7, "A-2", None, 3.5, True, *range(100, 106)]  # JSON values of every kind, a missing one
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"ref": i, "body": t}) + "\n" for i, t in zip(ids, texts))
    )
    base = [f"run={tiny_clf_run}", f"input={tmp_path / 'in.jsonl'}", "text_column=body", "id_column=ref"]
    assert main(["predict", *base, f"out={tmp_path / 'p.jsonl'}"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["ref"] for r in rows] == ids and [r["text"] for r in rows] == texts
    assert all(list(r)[0] == "ref" and set(r) == FIELDS | {"ref"} for r in rows)
    assert main(["predict", *base, f"out={tmp_path / 'p.csv'}"]) == 0
    table = pd.read_csv(tmp_path / "p.csv", keep_default_na=False)
    assert list(table.columns)[:2] == ["ref", "text"] and table["text"].tolist() == texts
    assert table["ref"].astype(str).tolist() == ["7", "A-2", "", "3.5", "True", *map(str, range(100, 106))]
    capsys.readouterr()
    for bad, says in [("label", "a field of the prediction rows"), ("nope", "has no column 'nope'")]:
        assert main(["predict", *base[:3], f"id_column={bad}", f"out={tmp_path / 'q.jsonl'}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0] and not (tmp_path / "q.jsonl").exists()
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    assert main(["predict", base[0], f"input={tmp_path / 'in.txt'}", "id_column=ref"]) == 2
    assert "one text per line, with no columns" in capsys.readouterr().err


def test_stdin_to_stdout(tiny_clf_run, reference, monkeypatch, capsys):
    texts = _texts(4)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(texts)))
    assert main(["predict", f"run={tiny_clf_run}", "input=-"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in rows] == list(reference.predict(texts))


def test_the_trained_text_column_is_the_default(tiny_clf_run, tmp_path):
    texts = _texts(3)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t, "x": 1}) + "\n" for t in texts))
    out = tmp_path / "p.jsonl"
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.jsonl'}", f"out={out}"]) == 0
    assert len(out.read_text().splitlines()) == 3
    # a one-column table under another name is read from that column, unless text_column= asks for another
    (tmp_path / "one.csv").write_text("body\n" + "".join(f"{t}\n" for t in texts))
    one = [f"run={tiny_clf_run}", f"input={tmp_path / 'one.csv'}", f"out={out}", "overwrite=true"]
    assert main(["predict", *one]) == 0
    assert [json.loads(r)["text"] for r in out.read_text().splitlines()] == texts
    assert main(["predict", *one, "text_column=text"]) == 2
    # a .txt file has no columns: text_column= was ignored without a word
    (tmp_path / "in.txt").write_text("".join(f"{t}\n" for t in texts))
    txt = [
        f"run={tiny_clf_run}",
        f"input={tmp_path / 'in.txt'}",
        f"out={tmp_path / 'q.jsonl'}",
        "text_column=body",
    ]
    assert main(["predict", *txt]) == 2 and not (tmp_path / "q.jsonl").exists()


def _bad_cases(run: Path, tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "ok.txt").write_text("hello bank\n")
    (tmp / "blank.txt").write_text("hello bank\n\nmy dog\n")
    (tmp / "t.csv").write_text("body,label\nhello,x\n")
    (tmp / "o.csv").write_text("text,customer\nhello,ann\n")
    (tmp / "empty.csv").write_text("text,id\nhello,1\n,2\n")
    (tmp / "t.docx").write_text("x")
    ok = f"input={tmp / 'ok.txt'}"
    return {
        "missing run": ([f"run={tmp / 'nope'}", ok], "no such folder"),
        "not a run": ([f"run={tmp}", ok], "neither a finished ucse run nor a head folder"),
        "no run": ([ok], "predict needs run="),
        "missing input": ([f"run={run}", f"input={tmp / 'nope.txt'}"], "no such file"),
        "input a folder": ([f"run={run}", f"input={tmp}"], "a folder, not a file: name a file in it"),
        "blank line": ([f"run={run}", f"input={tmp / 'blank.txt'}"], "line 2 is blank"),
        "blank line, the way out": ([f"run={run}", f"input={tmp / 'blank.txt'}"], "drop_bad_rows=true"),
        "unknown column": ([f"run={run}", f"input={tmp / 't.csv'}"], "has no column 'text'"),
        "empty text": ([f"run={run}", f"input={tmp / 'empty.csv'}"], "line 3"),
        "bad suffix": ([f"run={run}", f"input={tmp / 't.docx'}"], "unsupported file type '.docx'"),
        "bad out": ([f"run={run}", ok, f"out={tmp / 'p.xlsx'}"], "unsupported output type"),
        # overwrite=true replaced the input itself (its other columns gone), or a file of the run
        "out is the input": (
            [f"run={run}", f"input={tmp / 'o.csv'}", f"out={tmp / 'o.csv'}", "overwrite=true"],
            "is the input file",
        ),
        "out in the run": (
            [f"run={run}", ok, f"out={run / 'label_review.csv'}", "overwrite=true"],
            "is inside the run folder",
        ),
        "out folder missing": ([f"run={run}", ok, f"out={tmp / 'no' / 'p.jsonl'}"], "does not exist"),
        "bad key": ([f"run={run}", ok, "topk=2"], "Did you mean 'top_k'"),
        "bad top_k": ([f"run={run}", ok, "top_k=0"], "top_k=0 must be >= 1"),
        "batch size 0": ([f"run={run}", ok, "batch_size=0"], "batch_size=0 must be >= 1"),  # was the default
        "bad precision": ([f"run={run}", ok, "precision=fp16"], "fp16"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing run",
        "not a run",
        "no run",
        "missing input",
        "input a folder",
        "blank line",
        "blank line, the way out",
        "unknown column",
        "empty text",
        "bad suffix",
        "bad out",
        "out is the input",
        "out in the run",
        "out folder missing",
        "bad key",
        "bad top_k",
        "batch size 0",
        "bad precision",
    ],
)
def test_bad_inputs_exit_2_with_one_line(case, tiny_clf_run, tmp_path, capsys):
    before = sorted(p.name for p in tiny_clf_run.rglob("*"))
    args, message = _bad_cases(tiny_clf_run, tmp_path)[case]
    assert main(["predict", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tiny_clf_run.rglob("*")) == before
    assert (tmp_path / "o.csv").read_text() == "text,customer\nhello,ann\n"


def test_eval_mteb_on_own_data_fails_with_one_line(tiny_clf_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_clf_run, run)
    before = sorted(p.name for p in run.rglob("*"))
    assert main(["eval", f"run={run}", "mteb=true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: mteb=true: mteb has no task 'data'") and err.count("\n") == 1
    assert "Evaluate without mteb=true" in err
    assert sorted(p.name for p in run.rglob("*")) == before


def test_ensemble_on_a_task_mteb_does_not_know_fails_with_one_line(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text("task:\n  name: MyTickets\n")
    assert main(["ensemble", "ensemble=minilm-pair", f"task={mine}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ensemble=: mteb has no task 'MyTickets'") and err.count("\n") == 1


def test_train_prints_a_short_summary_then_predict_uses_it(tiny_bert_dir, tmp_path, capsys):
    from toy_tasks import write_rows

    data = write_rows(tmp_path / "tickets.csv", own_rows(120, seed=6))
    run = tmp_path / "run"
    fast = [
        f"backbone.model={tiny_bert_dir}",
        "backbone.name=tiny-bert",
        "backbone.precision=fp32",
        "optim.lr=1e-2",
        "optim.epochs=2",
        "recipe=paper",
        "optim.batch_size=16",
    ]
    assert main(["train", f"data.path={data}", f"output_dir={run}", *fast]) == 0
    out = capsys.readouterr().out
    summary = out.split(f"run: {run}", 1)[1].splitlines()
    assert len(summary) <= 10 and "{" not in out
    assert "recall by label on test: " in out  # a 0.33-accuracy run: its labels recalled least are named
    metrics = json.loads((run / "metrics.json").read_text())
    assert f"test accuracy {metrics['test']['accuracy']:.4f}" in out
    saved = json.loads((run / "head" / "calibration.json").read_text())
    assert f"default score {saved['score']}" in out and f"ucse predict run={run}" in out
    flag = f"out-of-scope flag: {saved['ood']['score']}, "
    # 10 validation texts: too few for the 95 % keep rule (19): the threshold is +inf, and the summary says so
    assert saved["ood"]["threshold"] == "inf" and flag + "flags no text" in out


def test_an_existing_out_file_is_kept_unless_overwrite(tiny_clf_run, tmp_path, capsys):
    (tmp_path / "new.txt").write_text("\n".join(_texts(3)) + "\n")
    out = tmp_path / "p.jsonl"
    out.write_text("the user's own file\n")
    args = ["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'new.txt'}", f"out={out}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "overwrite=true" in err and err.count("\n") == 1
    assert out.read_text() == "the user's own file\n"
    assert main([*args, "overwrite=true"]) == 0
    assert len(out.read_text().splitlines()) == 3


def test_encoder_from_dir_accepts_the_run_folder(tiny_clf_run):
    from ucse.core.encoder import UcseEncoder

    via_run = UcseEncoder.from_dir(tiny_clf_run).run_texts(_texts(4))
    via_head = UcseEncoder.from_dir(tiny_clf_run / "head").run_texts(_texts(4))
    assert np.array_equal(via_run.logits, via_head.logits)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_long_input_is_predicted_and_written_in_blocks(tiny_clf_run, tmp_path, monkeypatch, suffix):
    # Memory stays flat on a long input: predict_with_uncertainty sees at most BLOCK texts at a time and the
    # file gets every row once, in input order (a CSV header once), as a whole-input run writes them.
    import ucse.inference.blocks as blocks_mod
    from ucse.cli.main import main
    from ucse.inference.classifier import UcseClassifier

    texts = [r["text"] for r in own_rows(11, seed=7)]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    whole = tmp_path / f"whole{suffix}"
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.txt'}", f"out={whole}"]) == 0
    seen = []
    original = UcseClassifier.predict_with_uncertainty

    def spy(self, part, *args, **kwargs):
        seen.append(len(part))
        return original(self, part, *args, **kwargs)

    monkeypatch.setattr(UcseClassifier, "predict_with_uncertainty", spy)
    monkeypatch.setattr(blocks_mod, "BLOCK", 4)
    split = tmp_path / f"split{suffix}"
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.txt'}", f"out={split}"]) == 0
    assert seen == [4, 4, 3]
    if suffix == ".csv":
        got, want = pd.read_csv(split), pd.read_csv(whole)
        assert list(got.columns) == list(want.columns) and got["text"].tolist() == texts
        assert got["label"].tolist() == want["label"].tolist()
        np.testing.assert_allclose(got["confidence"], want["confidence"], atol=1e-5)
        return
    got = [json.loads(line) for line in split.read_text().splitlines()]
    want = [json.loads(line) for line in whole.read_text().splitlines()]
    assert [r["text"] for r in got] == texts and [r["label"] for r in got] == [r["label"] for r in want]
    # fp32 tiny model: another batch composition moves the outputs by float rounding only
    np.testing.assert_allclose([r["confidence"] for r in got], [r["confidence"] for r in want], atol=1e-5)
    assert [r["abstain"] for r in got] == [r["abstain"] for r in want]


def test_an_uncertifiable_abstention_rule_is_said_once_in_the_summary(tiny_clf_run, tmp_path, capsys, caplog):
    run = tiny_clf_run  # 12 validation texts: no threshold certifies the default 5 % error at delta 0.05
    assert not UcseClassifier.from_pretrained(run, device="cpu").profile_.abstain.achievable
    (tmp_path / "new.txt").write_text("\n".join(_texts(5)) + "\n")
    capsys.readouterr()
    caplog.clear()
    out = tmp_path / "p.jsonl"
    assert main(["predict", f"run={run}", f"input={tmp_path / 'new.txt'}", f"out={out}"]) == 0
    err = capsys.readouterr().err
    said = "no abstention threshold was certifiable on the held-out texts (target error 0.05), so no text"
    # trained on a DataFrame in memory, which `ucse calibrate` reads back from the run's rows.parquet
    assert err.count(said) == 1 and f"`ucse calibrate run={run} uncertainty.abstain." in err
    assert not [r for r in caplog.records if r.levelname == "WARNING" and "abstention" in r.getMessage()]
    assert not any(json.loads(line)["abstain"] for line in out.read_text().splitlines())
    # The Python API warns once per load, as before.
    caplog.clear()
    UcseClassifier.from_pretrained(run, device="cpu")
    assert (
        len([r for r in caplog.records if "no abstention threshold was certifiable" in r.getMessage()]) == 1
    )


def test_precision_is_predicts_choice_for_these_texts(tiny_clf_run, tmp_path):
    # the run was trained in fp32; precision=bf16 runs the backbone and head in bf16 for this call only
    texts = [r["text"] for r in own_rows(12, seed=8)]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    confidences = {}
    for precision in ("", "bf16", "fp32"):
        out = tmp_path / f"p{precision}.jsonl"
        extra = [f"precision={precision}"] if precision else []
        assert (
            main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.txt'}", f"out={out}", *extra])
            == 0
        )
        confidences[precision] = [json.loads(line)["confidence"] for line in out.read_text().splitlines()]
    assert confidences[""] == confidences["fp32"] != confidences["bf16"]
    np.testing.assert_allclose(confidences["bf16"], confidences["fp32"], atol=0.05)
    from ucse.config import from_yaml

    assert from_yaml(tiny_clf_run / "config.yaml").backbone.precision.value == "fp32"  # the run is unchanged


def test_a_piped_predict_keeps_its_counts_on_stderr(tiny_clf_run, tmp_path, capsys):
    # out=- printed no summary, so a piped nightly job's log lost the counts
    (tmp_path / "in.txt").write_text("\n".join(r["text"] for r in own_rows(5, seed=9)) + "\n")
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.txt'}", "out=-"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 5 and "predictions" not in captured.out
    assert "5 predictions -> stdout (uncertainty score: " in captured.err


@pytest.mark.parametrize("form", ["txt", "csv", "parquet"])
def test_drop_bad_rows_leaves_out_rows_without_a_text_and_names_them(
    tiny_clf_run, tmp_path, capsys, caplog, form
):
    # One empty message failed a whole nightly batch, and predict had no way to leave it out.
    texts = [r["text"] for r in own_rows(6, seed=4)]
    given = [texts[0], "", texts[1], "\u200b", texts[2], "  ", texts[3]]  # lines / rows 1-7
    path = tmp_path / f"in.{form}"
    if form == "txt":
        path.write_text("\n".join(given) + "\n")
    else:
        frame = pd.DataFrame({"id": [f"m{i}" for i in range(len(given))], "text": given})
        frame.to_csv(path, index=False) if form == "csv" else frame.to_parquet(path)
    ids = [] if form == "txt" else ["id_column=id"]
    base = [f"run={tiny_clf_run}", f"input={path}", "out=-", *ids]
    assert main(["predict", *base]) == 2
    assert "drop_bad_rows=true" in capsys.readouterr().err
    assert main(["predict", *base, "drop_bad_rows=true"]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["text"] for r in rows] == texts[:4]  # the others, in order
    if form != "txt":
        assert [r["id"] for r in rows] == ["m0", "m2", "m4", "m6"]  # each row's id beside it
    named = {"txt": "(lines 2, 4, 6)", "csv": "(lines 3, 5, 7)", "parquet": "(rows 1, 3, 5, 0-based)"}[form]
    assert f"3 of 7 rows have no text to read {named} and are left out" in caplog.text  # a warning
    assert "4 predictions -> stdout" in captured.err


def test_the_texts_read_only_up_to_the_token_limit_are_counted_over_every_block(
    tiny_clf_run, tmp_path, monkeypatch, capsys
):
    # The warning names the first block of texts that held any (8,192 texts); a 20k batch's log had no total.
    from transformers import AutoTokenizer

    import ucse.inference.blocks as blocks_mod

    monkeypatch.setattr(blocks_mod, "BLOCK", 2)
    short = [r["text"] for r in own_rows(4, seed=10)]
    long = [" ".join([r["text"] for r in own_rows(120, seed=11)])] * 2  # far past the tiny model's limit
    texts = [short[0], short[1], long[0], short[2], long[1], short[3]]  # the long ones in blocks 2 and 3
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.txt'}", "out=-"]) == 0
    err = capsys.readouterr().err
    # the reference: the run's tokenizer says which texts exceed its limit
    cfg = json.loads((tiny_clf_run / "head" / "config.json").read_text())["meta"]["backbone"]
    tokenizer = AutoTokenizer.from_pretrained(cfg["model"])
    over = sum(
        len(tokenizer(t)["input_ids"]) >= min(cfg["max_length"], tokenizer.model_max_length) for t in texts
    )
    assert over == 2
    assert "2 of 6 texts reached the backbone's token limit and were read up to it" in err
    assert "mostly tokens the backbone does not know" not in err  # none here (the encoder's tests: emoji)


def test_parquet_out_holds_the_jsonl_rows_with_their_types_block_by_block(
    tiny_clf_run, tmp_path, monkeypatch
):
    # a warehouse job loads Parquet: the rows as the JSONL holds them, typed, written a block at a time
    import ucse.inference.blocks as blocks_mod

    monkeypatch.setattr(blocks_mod, "BLOCK", 4)
    texts = [r["text"] for r in own_rows(11, seed=12)]
    pd.DataFrame({"msg": list(range(100, 111)), "text": texts}).to_parquet(tmp_path / "in.parquet")
    args = [f"run={tiny_clf_run}", f"input={tmp_path / 'in.parquet'}", "id_column=msg"]
    assert main(["predict", *args, f"out={tmp_path / 'p.jsonl'}"]) == 0
    assert main(["predict", *args, f"out={tmp_path / 'p.parquet'}"]) == 0
    want = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    got = pd.read_parquet(tmp_path / "p.parquet")
    assert list(got.columns) == list(want[0]) and len(got) == 11
    assert str(got["msg"].dtype) == "int64" and str(got["confidence"].dtype) == "float64"
    assert str(got["abstain"].dtype) == "bool"
    for row, ref in zip(got.to_dict("records"), want, strict=True):
        assert {**row, "probs": json.loads(row["probs"]), "set": json.loads(row["set"])} == ref
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "p.parquet").num_row_groups == 3  # blocks of 4, 4 and 3


def test_texts_of_unknown_tokens_are_counted_over_every_block(tiny_clf_run, tmp_path, monkeypatch, capsys):
    import ucse.inference.blocks as blocks_mod

    monkeypatch.setattr(blocks_mod, "BLOCK", 2)
    short = [r["text"] for r in own_rows(3, seed=13)]
    texts = [
        short[0],
        short[1],
        "🙂",
        short[2],
        "🚚❓",
    ]  # the emoji in blocks 2 and 3: [UNK] to the tiny BERT
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    assert main(["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.txt'}", "out=-"]) == 0
    assert "2 of 5 texts are mostly tokens the backbone does not know" in capsys.readouterr().err


def test_a_run_of_many_labels_says_top_k_keeps_the_rows_short(tiny_clf_run, tmp_path, capsys, monkeypatch):
    # a 250-label catalog's rows were 17 KB each: every label's probability, and no word of top_k=
    import ucse.cli.predict as predict

    (tmp_path / "in.txt").write_text("\n".join(r["text"] for r in own_rows(3, seed=9)) + "\n")
    base = ["predict", f"run={tiny_clf_run}", f"input={tmp_path / 'in.txt'}", "out=-"]
    hint = f"each row's probs lists all {len(NAMES)} labels; top_k=5 keeps the five likeliest"
    assert main(base) == 0
    assert hint not in capsys.readouterr().err  # a few labels: no word of it
    monkeypatch.setattr(predict, "MANY_LABELS", len(NAMES) - 1)
    assert main(base) == 0
    captured = capsys.readouterr()
    assert hint in captured.err and all(
        len(json.loads(r)["probs"]) == len(NAMES) for r in captured.out.splitlines()
    )
    assert main([*base, "top_k=2"]) == 0
    captured = capsys.readouterr()
    assert hint not in captured.err and all(
        len(json.loads(r)["probs"]) == 2 for r in captured.out.splitlines()
    )
