"""One row per file and setting: the official test split's figures (ucse eval input=) and the run's own."""
import json, re, sys
for t in ("scenario", "banking"):
    for v in ("true", "false"):
        e = json.load(open(f"eval-{t}-{v}.json")); m = json.load(open(f"runs/{t}-{v}/metrics.json"))
        wall = re.search(r"wall ([\d.]+) s, peak RSS (\d+)", open(f"log-{t}-{v}.txt").read())
        print(json.dumps({
            "file": t, "refit_test": v == "true", "official_test_rows": e["n"],
            "accuracy": round(e["metrics"]["accuracy"], 4), "f1_macro": round(e["metrics"]["f1_macro"], 4),
            "errors": e["errors_total"], "ece_after": round(e["calibration"]["ece_after"], 4),
            "ece_floor_after": round(e["calibration"]["ece_floor_after"], 4),
            "printed_test_accuracy": round(m["test"]["accuracy"], 4), "sizes": m["data"]["sizes"],
            "head": m["head"], "weight": m["selection"].get("weight"), "train_wall_s": float(wall.group(1)),
            "peak_rss_mb": round(int(wall.group(2)) / 1024),
        }))
