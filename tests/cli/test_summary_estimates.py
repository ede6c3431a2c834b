"""The train summary says what its validation figure is: plain, cross-validated, or from before a refit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ucse.summary import train_summary


@pytest.mark.parametrize(
    ("estimate", "label"),
    [
        (None, "(validation accuracy 0.8000)"),
        ("cross-validated", "(cross-validated accuracy 0.8000)"),
        ("held-out, before refit", "(validation accuracy before the refit on train + validation 0.8000)"),
    ],
)
def test_the_validation_figure_says_what_it_is(estimate, label):
    val = {"accuracy": 0.8, "f1_macro": 0.8} | ({"estimate": estimate} if estimate else {})
    text = train_summary(Path("runs/x"), {"test": {"accuracy": 0.9, "f1_macro": 0.9}, "val": val}, None)
    assert text.splitlines()[1] == f"test accuracy 0.9000  macro-F1 0.9000   {label}"


def test_no_test_split_is_said_plainly():
    text = train_summary(Path("runs/x"), {"val": {"accuracy": 0.5, "f1_macro": 0.5}}, None)
    assert text.splitlines()[1].startswith("no test split")


@pytest.mark.parametrize(
    ("estimate", "where"), [("cross-validated", "the cross-validated texts"), (None, "the validation texts")]
)
def test_without_a_test_split_the_labels_recalled_least_are_the_held_out_rows(estimate, where):
    # 2 rows per label: no test slice, every row held out once by the cross-validation
    from ucse.training.label_report import per_label

    val = {"accuracy": 0.5, "f1_macro": 0.5} | ({"estimate": estimate} if estimate else {})
    rows = per_label([[2, 0], [2, 0]], ["a", "b"])
    text = train_summary(Path("runs/x"), {"val": val, "heldout_per_label": rows}, None)
    line = f"  lowest recall by label on {where}: 'b' 0 of 2 right (0.00; 2 read as 'a') (all labels: "
    said = f"heldout_per_label in metrics.json); answers least often right on {where}: 'a' 2 of 4 (0.50)"
    assert text.splitlines()[2] == line + said
    # with a test split, the test rows are named, not the held-out ones
    test = {"accuracy": 0.5, "f1_macro": 0.5}
    assert "held" not in train_summary(
        Path("runs/x"), {"val": val, "test": test, "heldout_per_label": rows}, None
    )


def test_the_test_accuracy_carries_its_wilson_interval():
    # Reference: Wilson's score interval by hand, p +- z sqrt(p(1-p)/n + z^2/4n^2), centred at
    # (p + z^2/2n) / (1 + z^2/n), divided by (1 + z^2/n); z = 1.959964 for 95 %.
    metrics = {"test": {"accuracy": 0.9, "f1_macro": 0.9}, "data": {"sizes": {"test": 10}}}
    line = train_summary(Path("runs/x"), metrics, None).splitlines()[1]
    z, n, p = 1.959964, 10, 0.9
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    want = f"test accuracy 0.9000 (95 % interval {centre - half:.3f}-{centre + half:.3f}, 10 texts)"
    assert line.startswith(want)
    assert "0.596-0.982" in line  # 9 of 10 right: anywhere from 60 % to 98 %


@pytest.mark.parametrize(("offer", "says"), [(0.21, "target_error=0.21"), (None, "abstain.coverage=0.9")])
def test_an_uncertifiable_rule_names_the_command_that_fixes_it(offer, says):
    from ucse.uncertainty.calibration import Calibrator
    from ucse.uncertainty.profile import UncertaintyProfile
    from ucse.uncertainty.selective import AbstainThreshold

    rule = AbstainThreshold(math.inf, "target_error", 0.05, 0.05, None, 1.0, 0.0625, False)
    info = {} if offer is None else {"offered_target_error": offer}
    profile = UncertaintyProfile(Calibrator.identity(3), abstain=rule, info=info)
    text = train_summary(Path("runs/x"), {"val": {"accuracy": 0.5, "f1_macro": 0.5}}, profile)
    (line,) = [s for s in text.splitlines() if s.lstrip().startswith("abstain")]
    assert "not certifiable on the held-out texts: no text abstains" in line
    assert f"ucse calibrate run={Path('runs/x')} uncertainty." in line and says in line
    # a run calibrate cannot reread (rows passed in memory) is offered the setting for the next training
    profile.info["recalibrate"] = False
    text = train_summary(Path("runs/x"), {"val": {"accuracy": 0.5, "f1_macro": 0.5}}, profile)
    (line,) = [s for s in text.splitlines() if s.lstrip().startswith("abstain")]
    assert "retraining with `uncertainty." in line and says in line and "ucse calibrate" not in line
