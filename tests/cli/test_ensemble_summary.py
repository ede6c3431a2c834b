"""``ucse eval ensemble=...``'s terminal summary (``ucse.cli.evaluate.ensemble_summary``)."""

from __future__ import annotations

from ucse.cli.evaluate import ensemble_summary


def _report(uec: float) -> dict:
    results = {
        "uec": {"accuracy": uec, "f1": 0.5},
        "uniform": {"accuracy": 0.9168, "f1": 0.5},
        "member:a": {"accuracy": 0.9322, "f1": 0.5},
        "member:b": {"accuracy": 0.8618, "f1": 0.5},
    }
    return {"out": "out", "results": results, "skipped": {"borda": "rank fusion is for retrieval"}}


def test_uec_below_a_member_or_the_uniform_average_is_said_and_skipped_rows_are_listed():
    # a researcher's trial: uec 91.40 under uniform 91.68 and the best member 93.22, and nothing said so
    lines = ensemble_summary(_report(0.9140)).splitlines()
    assert "note: uec (0.9140) is below member:a (0.9322) on this task" in lines[4]
    assert lines[5] == "not run here: borda (rank fusion is for retrieval)"
    assert lines[6] == "full report: out/ensemble.json (+ ensemble.md, weights.png)"
    assert not any(line.startswith("note:") for line in ensemble_summary(_report(0.94)).splitlines())
