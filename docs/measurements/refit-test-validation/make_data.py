"""Own-file copies of two local tasks: Banking77's whole train split, and 3,000 rows of MassiveScenario's (seed 0)."""
import json, random, csv
from pathlib import Path
D = Path(__file__).resolve().parents[4] / "shared" / "data"  # shared/data beside the repository
def rows(task, split):
    return [json.loads(l) for l in (D / task / f"{split}.jsonl").read_text().splitlines()]
def write(path, rs):
    with open(path, "w", newline="") as f:
        w = csv.writer(f); w.writerow(["text", "label"]); w.writerows([(r["text"], r["label_text"]) for r in rs])
write("banking_train.csv", rows("Banking77Classification", "train"))
write("banking_test.csv", rows("Banking77Classification", "test"))
ms = rows("MassiveScenarioClassification", "train"); random.Random(0).shuffle(ms)
write("scenario_train.csv", ms[:3000])
write("scenario_test.csv", rows("MassiveScenarioClassification", "test"))
