"""The train summary says what its validation figure is: plain, cross-validated, or from before a refit."""

from __future__ import annotations

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
