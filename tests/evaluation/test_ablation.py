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
