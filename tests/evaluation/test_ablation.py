"""Ablation table aggregation against hand computation."""

import json

import numpy as np

from ucse.evaluation.ablation import collect, summarise, to_markdown, write_ablation


def _write(root, task, variant, seed, acc):
    d = root / task / variant / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"test": {"accuracy": acc, "f1_macro": acc}}))


def test_summary_means_spreads_and_average(tmp_path):
    for seed, acc in enumerate([0.90, 0.92, 0.94]):
        _write(tmp_path, "A", "textcnn-both", seed, acc)
    for seed, acc in enumerate([0.80, 0.82]):
        _write(tmp_path, "A", "linear-base", seed, acc)
    _write(tmp_path, "B", "textcnn-both", 0, 0.50)
    table = collect(tmp_path)
    assert table["A"]["textcnn-both"] == [0.90, 0.92, 0.94]
    s = summarise(table, ["linear-base", "textcnn-both"])
    cell = s["tasks"]["A"]["textcnn-both"]
    assert np.isclose(cell["mean"], 92.0) and np.isclose(cell["std"], np.std([90, 92, 94], ddof=1))
    assert s["tasks"]["B"]["textcnn-both"]["std"] == 0.0
    assert np.isclose(s["average"]["textcnn-both"]["mean"], (92.0 + 50.0) / 2)
    assert s["average"]["textcnn-both"]["complete"] and not s["average"]["linear-base"]["complete"]
    md = to_markdown(s)
    assert "**92.00 ± 2.00**" in md and "81.00 ± 1.41" in md and "| B | — |" in md and "(1 tasks)" in md
    assert "| B | — | **50.00** |" in md  # one seed: no spread printed (it was "± 0.00")


def test_cells_equal_as_printed_are_both_bold(tmp_path):
    # a trial's sweep: 81.50 and **81.50**, the head's float32 accuracy 0.81999999 against the probe's 0.82
    for seed, (a, b) in enumerate([(0.8199999928474426, 0.82), (0.81, 0.81)]):
        _write(tmp_path, "A", "textcnn-base", seed, a)
        _write(tmp_path, "A", "logreg", seed, b)
    _write(tmp_path, "A", "linear-base", 0, 0.7)
    _write(tmp_path, "A", "linear-base", 1, 0.7)
    row = next(
        line
        for line in to_markdown(
            summarise(collect(tmp_path), ["textcnn-base", "logreg", "linear-base"])
        ).splitlines()
        if line.startswith("| A |")
    )
    assert row == "| A | **81.50 ± 0.71** | **81.50 ± 0.71** | 70.00 ± 0.00 |"


def test_write_ablation_files(tmp_path):
    _write(tmp_path, "A", "mean", 0, 0.7)
    write_ablation(tmp_path, ["mean"])
    assert json.loads((tmp_path / "ablation.json").read_text())["tasks"]["A"]["mean"]["mean"] == 70.0
    assert (tmp_path / "ablation.md").read_text().startswith("| task | mean |")


def test_a_damaged_seed_is_left_out_with_a_warning(tmp_path, caplog):
    _write(tmp_path, "A", "mean", 0, 0.7)
    _write(tmp_path, "A", "mean", 1, 0.9)
    broken = {
        2: "{bad",
        3: json.dumps([0.5]),
        4: json.dumps({"test": {"accuracy": "0.8"}}),
        5: '{"test": {}}',
        6: "[" * 100_000,  # deeper than Python's JSON reader follows: RecursionError before
        7: '{"test": {"accuracy": 1' + "0" * 400 + "}}",  # beyond a float: OverflowError before
    }
    for seed, text in broken.items():
        d = tmp_path / "A" / "mean" / f"seed{seed}"
        d.mkdir()
        (d / "metrics.json").write_text(text)
    assert collect(tmp_path) == {"A": {"mean": [0.7, 0.9]}}
    for seed in broken:  # each one named, once
        assert sum(f"seed{seed}" in r.getMessage() for r in caplog.records) == 1, seed


def test_collect_eval_reads_each_quantity_and_leaves_damaged_reports_out(tmp_path, caplog):
    from ucse.evaluation.ablation import calibration_markdown, collect_eval

    good = {
        "metrics": {"ece": 0.1, "nll": 0.5},
        "calibration": {"ece_after": 0.02},
        "selective": {"default_score": "entropy", "aurc": {"msp": 0.3, "entropy": 0.2}, "test_error": 0.04},
    }
    reports = {
        0: json.dumps(good),
        1: json.dumps({**good, "metrics": {"ece": 0.3, "nll": True}}),  # true is no number: absent
        # each of these escaped as a traceback and stopped the sweep before
        2: "[]",
        3: json.dumps({"selective": []}),
        4: json.dumps({"metrics": {"ece": [1]}}),
        5: json.dumps({"selective": {"default_score": [1], "aurc": {}}}),
        6: '{"metrics": {"ece": NaN, "nll": 1e400}}',
        7: "{bad",
    }
    for seed, text in reports.items():
        d = tmp_path / "A" / "mean" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "eval.json").write_text(text)
    table = collect_eval(tmp_path)["A"]["mean"]
    assert table["ECE"] == [0.1, 0.3] and table["NLL"] == [0.5]
    assert table["ECE calibrated"] == [0.02, 0.02] and table["AURC (default score)"] == [0.2, 0.2]
    assert table["AURC (msp)"] == [0.3, 0.3] and table["selective error"] == [0.04, 0.04]
    assert set(table) == {
        "ECE",
        "NLL",
        "ECE calibrated",
        "AURC (default score)",
        "AURC (msp)",
        "selective error",
    }
    assert sum("seed7" in r.getMessage() for r in caplog.records) == 1
    assert "| A | mean | 0.2000 ± 0.1414 |" in calibration_markdown({"A": {"mean": table}})


def test_the_average_row_bolds_only_a_variant_measured_on_every_task(tmp_path):
    # 'partial' beats 'full' on both tasks they share but was not run on the third; its 2-task mean (82.50)
    # and full's 3-task mean (76.33) are not comparable, yet the higher one was bolded.
    for task, full, partial in (("A", 0.70, 0.75), ("B", 0.60, 0.90), ("C", 0.99, None)):
        _write(tmp_path, task, "full", 0, full)
        if partial is not None:
            _write(tmp_path, task, "partial", 0, partial)
    s = summarise(collect(tmp_path), ["full", "partial"])
    assert s["average"]["partial"]["mean"] > s["average"]["full"]["mean"]
    average_row = next(line for line in to_markdown(s).splitlines() if line.startswith("| **Average**"))
    assert average_row == "| **Average** | **76.33** | 82.50 (2 tasks) |"
    # a tie with the best complete mean does not make the partial one bold either
    s["average"]["partial"]["mean"] = s["average"]["full"]["mean"]
    average_row = next(line for line in to_markdown(s).splitlines() if line.startswith("| **Average**"))
    assert average_row == "| **Average** | **76.33** | 76.33 (2 tasks) |"
