"""``data.refit_test``: a test slice carved from a small file is scored, then trains the shipped head."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest
from toy_tasks import own_rows

import ucse
from ucse.cli.main import main
from ucse.summary import train_summary


def _train(tmp_path, train_overrides, name, *extra):
    overrides = train_overrides(tmp_path / name) | {"recipe": "auto", "head": "logreg"} | dict(extra)
    return ucse.train(str(tmp_path / "tickets.csv"), **overrides)


def test_the_test_slice_is_scored_then_trains_the_shipped_head(tmp_path, train_overrides, capsys):
    # 13 labels x 15 rows: the 20 % slice left out of the shipped head cost a point against a logistic
    # regression trained on every row (a practitioner's trial)
    pd.DataFrame(own_rows(120, seed=4)).to_csv(tmp_path / "tickets.csv", index=False)
    on = _train(tmp_path, train_overrides, "on")
    off = _train(tmp_path, train_overrides, "off", ("data.refit_test", False))
    m_on = json.loads((on.run_dir_ / "metrics.json").read_text())
    m_off = json.loads((off.run_dir_ / "metrics.json").read_text())
    n_test = m_on["data"]["sizes"]["test"]
    assert n_test > 0 and m_on["selection"]["refit_test"] == n_test and "refit_test" not in m_off["selection"]
    assert m_on["test"] == m_off["test"]  # scored by the same head, fitted without the test rows
    # the shipped head learnt from the test rows too: its held-out outputs and review cover every row
    rows = sum(m_on["data"]["sizes"].values())
    with (on.run_dir_ / "label_review.csv").open() as f:
        assert len(list(csv.DictReader(f))) == rows
    with (off.run_dir_ / "label_review.csv").open() as f:
        assert len(list(csv.DictReader(f))) == rows - n_test
    assert on.profile_.info["n_validation"] == rows
    texts = [r["text"] for r in own_rows(30, seed=9)]
    assert (on.predict_proba(texts) != off.predict_proba(texts)).any()  # another head
    # calibrate lines the held-out outputs up with the rows the same way
    assert main(["calibrate", f"run={on.run_dir_}", "uncertainty.abstain.coverage=0.8"]) == 0
    assert "test included: data.refit_test" not in capsys.readouterr().err


@pytest.mark.parametrize("head", ["logreg", "auto"])
def test_with_a_validation_split_to_select_on_the_chosen_recipe_takes_the_test_rows_in(
    tmp_path, train_overrides, capsys, head
):
    # a file large enough to select on a validation split (here 224 of 400 rows: under max(200, 5 x labels)
    # the run cross-validates instead) left its 20 % test slice out of the shipped head (issue 18)
    pd.DataFrame(own_rows(400, seed=6)).to_csv(tmp_path / "tickets.csv", index=False)
    extra = ("head", head), ("data.val_fraction", 0.7)
    on = _train(tmp_path, train_overrides, "on", *extra)
    # the selection's own models, fitted on train alone, shipped as they are
    plain = _train(tmp_path, train_overrides, "plain", *extra, ("data.refit", False))
    m_on = json.loads((on.run_dir_ / "metrics.json").read_text())
    m_plain = json.loads((plain.run_dir_ / "metrics.json").read_text())
    sizes = m_on["data"]["sizes"]
    assert sizes["validation"] >= 200 and sizes["test"] > 0
    assert m_on["selection"]["refit_test"] == sizes["test"] and "refit_test" not in m_plain["selection"]
    # the test rows are scored by those models, which saw neither them nor validation; so is the validation
    # estimate the choice was made on
    assert m_on["test"] == m_plain["test"]
    assert m_on["val"]["accuracy"] == m_plain["val"]["accuracy"]
    # still calibrated on the validation rows alone
    assert on.profile_.info["n_validation"] == plain.profile_.info["n_validation"] == sizes["validation"]
    texts = [r["text"] for r in own_rows(60, seed=9)]
    assert (on.predict_proba(texts) != plain.predict_proba(texts)).any()  # the shipped head is refitted
    # the summary names the estimate it prints: the validation split's, not a cross-validation's
    line = train_summary(on.run_dir_, m_on, on.profile_).splitlines()[1]
    assert "data.refit_test" in line and "validation accuracy" in line and "cross-validated" not in line
    # the run's commands see the test rows as the shipped head's own
    assert main(["eval", f"run={on.run_dir_}", "plots=false"]) == 0
    assert "in-sample" in capsys.readouterr().out
    assert main(["calibrate", f"run={on.run_dir_}", "uncertainty.abstain.coverage=0.8"]) == 0
