"""eval.json's per-label rows: answered share, answered error and set coverage against brute-force counts."""

from __future__ import annotations

import numpy as np
import pytest

from ucse.evaluation.per_label import label_breakdown, lowest_coverage_line, most_flagged_line

NAMES = ["a", "b", "c", "d"]


def _case(seed: int):
    rng = np.random.default_rng(seed)
    y = rng.choice(3, size=80, p=[0.6, 0.3, 0.1])  # label "d" never occurs
    pred = np.where(rng.random(80) < 0.7, y, rng.integers(0, 4, size=80))
    abstain = rng.random(80) < 0.2
    sets = rng.random((80, 4)) < 0.5
    return y, pred, abstain, sets


@pytest.mark.parametrize("seed", range(4))
def test_rows_are_the_brute_force_counts(seed):
    y, pred, abstain, sets = _case(seed)
    out = label_breakdown(y, pred, NAMES, abstain, sets)
    for i, row in enumerate(out["per_label"]):
        mine = [k for k in range(len(y)) if y[k] == i]
        if not mine:
            assert row["answered"] is None and row["answered_error"] is None and row["set_coverage"] is None
            continue
        kept = [k for k in mine if not abstain[k]]
        assert row["answered"] == pytest.approx(len(kept) / len(mine))
        wrong = sum(pred[k] != i for k in kept)
        assert row["answered_error"] == (pytest.approx(wrong / len(kept)) if kept else None)
        assert row["set_coverage"] == pytest.approx(sum(sets[k, i] for k in mine) / len(mine))
    # the per-label figures add up to the marginal ones (weighted by each label's texts)
    rows = [r for r in out["per_label"] if r["support"]]
    n = sum(r["support"] for r in rows)
    cover = sum(r["support"] * r["set_coverage"] for r in rows) / n
    assert cover == pytest.approx(sets[np.arange(len(y)), y].mean())
    answered = sum(r["support"] * r["answered"] for r in rows) / n
    assert answered == pytest.approx((~abstain).mean())
    errors = sum(r["support"] * r["answered"] * (r["answered_error"] or 0.0) for r in rows)
    assert errors == pytest.approx(((pred != y) & ~abstain).sum())
    assert out["confusion"]["labels"] == NAMES
    assert np.array(out["confusion"]["counts"]).sum() == len(y)


def test_flagged_shares_are_the_brute_force_counts_with_the_training_rows():
    y, pred, _, _ = _case(1)
    ood = np.random.default_rng(9).random(80) < 0.3
    out = label_breakdown(y, pred, NAMES, ood=ood, training_rows=[40, 15, 5, 0])["per_label"]
    for i, row in enumerate(out):
        mine = [k for k in range(len(y)) if y[k] == i]
        want = sum(ood[k] for k in mine) / len(mine) if mine else None
        assert row["flagged"] == (pytest.approx(want) if mine else None)
        assert row["training_rows"] == [40, 15, 5, 0][i]
    rows = [r for r in out if r["support"]]
    assert sum(r["support"] * r["flagged"] for r in rows) == pytest.approx(ood.sum())


def test_most_flagged_names_only_labels_above_the_promise_beyond_chance():
    from scipy.stats import binom

    rows = [
        {"label": "a", "support": 60, "flagged": 2 / 60, "training_rows": 40},
        {"label": "b", "support": 10, "flagged": 0.2, "training_rows": 15},  # P(>= 2 of 10 | 0.05) = 0.09
        {"label": "c", "support": 30, "flagged": 8 / 30, "training_rows": 5},  # P(>= 8 of 30) ~ 8e-5
        {"label": "d", "support": 0, "flagged": None},
        {"label": "e", "support": 30, "flagged": 0.2},  # P(>= 6 of 30 | 0.05) ~ 3e-3, no rows known
    ]
    for r in rows[:3] + rows[4:]:  # brute force: the binomial upper tail, against 0.05 / 4 labels
        p = binom.sf(round(r["flagged"] * r["support"]) - 1, r["support"], 0.05)
        assert (p < 0.05 / 4) == (r["label"] in "ce")
    line = most_flagged_line(rows, 0.95)
    assert line.startswith(
        "  out-of-scope flag above 0.05 beyond chance for 2 labels (binomial test at 0.05, "
    )
    assert "labels): 'c' 0.27 of 30 texts (5 training rows), 'e' 0.20 of 30 texts. It keeps 0.95 " in line
    assert "uncertainty.calibration.prior=balanced" in line
    # a flag weighted to a mix already (a prior) is not offered the balanced prior again
    assert "prior=balanced" not in most_flagged_line(rows, 0.95, weighted=True)
    assert most_flagged_line(rows[:2], 0.95) is None  # above 0.05, but within chance
    assert most_flagged_line({"not": "rows"}, 0.95) is None
    assert most_flagged_line([{"label": "x", "support": 3, "flagged": "1"}], 0.95) is None
    for bad in (1.5, float("inf"), -0.1, float("nan")):  # read back from disk: a share outside [0, 1]
        assert most_flagged_line([{"label": "x", "support": 30, "flagged": bad}], 0.95) is None


def test_without_a_rule_or_sets():
    y, pred, _, _ = _case(0)
    rows = label_breakdown(y, pred, NAMES)["per_label"]
    assert all("set_coverage" not in r for r in rows)
    assert all(r["answered"] == 1.0 for r in rows if r["support"])


def test_lowest_coverage_names_only_labels_below_the_target_beyond_chance():
    from scipy.stats import binom

    rows = [
        {"label": "a", "support": 50, "set_coverage": 0.96},
        {"label": "b", "support": 7, "set_coverage": 5 / 7},  # P(<= 5 of 7 | 0.9) = 0.15: chance
        {"label": "c", "support": 20, "set_coverage": 0.6},  # P(<= 12 of 20 | 0.9) ~ 4e-4: not chance
        {"label": "d", "support": 0, "set_coverage": None},
        {"label": "e", "support": 12, "set_coverage": 0.5},  # P(<= 6 of 12 | 0.9) ~ 5e-5
    ]
    # brute force: the binomial tail, against 0.05 / 4 labels with texts
    for r in rows[:3] + rows[4:]:
        p = binom.cdf(round(r["set_coverage"] * r["support"]), r["support"], 0.9)
        assert (p < 0.05 / 4) == (r["label"] in "ce")
    line = lowest_coverage_line(rows, 0.1)
    assert line == (
        "  set coverage below 0.90 beyond chance for 2 labels (binomial test at 0.05, Bonferroni over 4 "
        "labels; the sets promise coverage over all texts, not per label): 'e' 0.50 of 12 texts, 'c' 0.60 of "
        "20 texts"
    )
    assert lowest_coverage_line(rows[:2], 0.1) is None  # below 0.90, but within chance
    assert lowest_coverage_line({"not": "rows"}, 0.1) is None
    assert lowest_coverage_line([{"label": "x", "support": "3", "set_coverage": 0.0}], 0.1) is None


def test_many_labels_write_the_confusion_matrix_by_its_nonzero_cells():
    from ucse.evaluation.per_label import DENSE_LABELS

    c = DENSE_LABELS + 1
    rng = np.random.default_rng(0)
    y = rng.integers(0, c, size=500)
    pred = np.where(rng.random(500) < 0.6, y, rng.integers(0, c, size=500))
    out = label_breakdown(y, pred, list(range(c)))
    conf = out["confusion"]
    assert conf["counts"] is None and conf["labels"] == list(range(c))
    dense = np.zeros((c, c), dtype=np.int64)
    np.add.at(dense, (y, pred), 1)  # brute force: true label row, answer column
    cells = {(t, p): n for t, p, n in conf["nonzero"]}
    assert cells == {(t, p): int(dense[t, p]) for t, p in zip(*np.nonzero(dense))}
    small = label_breakdown(y % 4, pred % 4, NAMES)["confusion"]  # up to DENSE_LABELS: the whole matrix
    assert "nonzero" not in small and np.array(small["counts"]).shape == (4, 4)
