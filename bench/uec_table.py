"""One table of UEC ensemble reports across tasks: every variant's ranked score, the weights and their signal.

Reads the ``ensemble.json`` files ``python eval.py ensemble=<name> task=<task> out=<dir>`` writes and prints a
markdown table (rows: variants, columns: tasks; the metric each task ranks by: STS ``spearman``, retrieval
``ndcg_at_10``, classification ``accuracy``), the goal check (UEC >= the best member and >= every other fusion
row) and, per task, the chosen space / member scales, mean UEC weights and the per-input weight signal.

Usage::

    python bench/uec_table.py runs/ensembles/minilm-mpnet/*/ensemble.json [--label uec-scored=<report> ...]

``--label NAME=PATH`` adds the UEC row of another report (e.g. the same ensemble in the other space) under
NAME (start it with ``uec``), in the column of that report's task.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

MEMBER_PREFIXES = ("member:", "member_probit:")


def _metric(report: dict) -> str:
    """The metric a report ranks by: the first of its ``metrics`` (``ranked_by`` names it first)."""
    return report["metrics"][0]


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--label", action="append", default=[], help="NAME=PATH: another report's UEC row")
    args = parser.parse_args(argv)
    reports = [json.loads(p.read_text()) for p in args.reports]
    tasks = [r["task"] for r in reports]
    table: dict[str, dict[str, float]] = {}
    for r in reports:
        metric = _metric(r)
        for name, row in r["results"].items():
            table.setdefault(name, {})[r["task"]] = 100 * row["scores"].get(metric, float("nan"))
    for item in args.label:
        name, _, path = item.partition("=")
        other = json.loads(Path(path).read_text())
        table.setdefault(name, {})[other["task"]] = 100 * other["results"]["uec"]["scores"][_metric(other)]
    lines = ["| variant | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    for name, row in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[t]:.2f}" if t in row else "-" for t in tasks) + " |")
    lines += ["", "| goal check | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    best_member, best_other, met = [], [], []
    for t in tasks:
        members = {n: row[t] for n, row in table.items() if n.startswith(MEMBER_PREFIXES) and t in row}
        others = {  # the fusion rows; UEC's own ablations and relabelled UEC rows are not rivals
            n: row[t]
            for n, row in table.items()
            if not n.startswith(MEMBER_PREFIXES) and not n.startswith("uec") and t in row
        }
        uec = table["uec"].get(t, float("nan"))
        bm = max(members.items(), key=lambda kv: kv[1]) if members else ("-", float("nan"))
        bo = max(others.items(), key=lambda kv: kv[1]) if others else ("-", float("nan"))
        best_member.append(f"{bm[0]} {bm[1]:.2f}")
        best_other.append(f"{bo[0]} {bo[1]:.2f}")
        met.append("yes" if uec >= bm[1] - 1e-9 and uec >= bo[1] - 1e-9 else "no")
    lines += [
        "| best member | " + " | ".join(best_member) + " |",
        "| best other fusion row | " + " | ".join(best_other) + " |",
        "| UEC >= both | " + " | ".join(met) + " |",
        "",
    ]
    for r in reports:
        weights = ", ".join(f"{m['id']} {m['mean_weight']:.3f}" for m in r["members"])
        choice = r.get("choice") or {}
        signal = r.get("weight_signal") or {}
        lines.append(f"- {r['task']}: mean UEC weights {weights}")
        if "space_validation" in choice or "scales" in choice:
            keep = {
                k: choice[k]
                for k in (
                    "space",
                    "space_validation",
                    "scales",
                    "validation_before",
                    "validation_after",
                    "beta_after",
                    "equal_weights",
                    "temperature",
                )
                if k in choice
            }
            lines.append(f"  - chosen on validation: {json.dumps(keep)}")
        if signal and signal.get("per_input_correlation") is None:  # equal weights: nothing varies
            lines.append("  - per-input weight signal (test): none, the weights are equal")
        elif signal:
            lines.append(
                f"  - per-input weight signal (test): correlation {signal['per_input_correlation']:.3f}; "
                f"weight on the better member {signal['weight_on_better']:.3f} over {signal['inputs']} "
                f"inputs (its mean weight {signal['its_mean_weight']:.3f})"
            )
    out = "\n".join(lines)
    print(out)
    return out


if __name__ == "__main__":
    main()
