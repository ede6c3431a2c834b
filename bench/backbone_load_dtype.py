"""Reading a bf16 checkpoint for a GPU that runs bf16: as fp32 then cast (before), or as bf16 (now).

``ucse.backbone.loading.weights_dtype`` holds a GPU's frozen backbone in bf16. The load used to read every
checkpoint as fp32 and cast the whole model afterwards, an fp32 copy of the model on the host; it now asks
transformers for bf16. This times the host part of the two (what differs; the copy to the GPU is the same
bf16 bytes either way) in fresh processes, on a random Qwen3-Embedding-0.6B-shaped model saved in bf16 as the
hub's checkpoint is, and checks the two give the same bits.

Usage::

    python bench/backbone_load_dtype.py [repeats=3] [folder=<a saved model; default: build the random 0.6B>]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import hashlib, json, sys, time, torch
from transformers import AutoModel
folder, mode = sys.argv[1], sys.argv[2]
t = time.perf_counter()
model = AutoModel.from_pretrained(folder, dtype=torch.float32 if mode == "fp32-then-cast" else torch.bfloat16)
model.requires_grad_(False)
model.to(torch.bfloat16)  # what load_backbone does after either read
seconds = time.perf_counter() - t
h = hashlib.sha256()
for k, v in sorted(model.state_dict().items()):
    h.update(k.encode() + v.view(torch.int16).numpy().tobytes())
print(json.dumps({"s": seconds, "bits": h.hexdigest()}))
"""


def build(folder: Path) -> None:
    import torch
    from scale_gpu import QWEN3_EMBEDDING_06B
    from transformers import Qwen3Config, Qwen3Model

    torch.manual_seed(0)
    Qwen3Model(Qwen3Config(**QWEN3_EMBEDDING_06B)).to(torch.bfloat16).save_pretrained(folder)


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    repeats = int(args.get("repeats", 3))
    with tempfile.TemporaryDirectory(prefix="ucse-load-bench-") as tmp:
        folder = Path(args["folder"]) if "folder" in args else Path(tmp) / "qwen3-0.6b-random-bf16"
        if "folder" not in args:
            build(folder)
        size = sum(p.stat().st_size for p in folder.glob("*.safetensors")) / 1e9
        for p in folder.glob("*.safetensors"):
            p.read_bytes()  # into the page cache: the read from disk is the same for both
        runs: dict[str, list[dict]] = {"fp32-then-cast": [], "bf16": []}
        for _ in range(repeats):  # alternating
            for mode, out in runs.items():
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, str(folder), mode],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                out.append(json.loads(done.stdout.strip().splitlines()[-1]))
        bits = {r["bits"] for rows in runs.values() for r in rows}
        print(f"checkpoint {size:.2f} GB (bf16 safetensors); same bits in every load: {len(bits) == 1}")
        for mode, rows in runs.items():
            secs = [round(r["s"], 2) for r in rows]
            print(f"{mode:<15} best {min(secs):.2f} s  (all: {secs})")
        best = {m: min(r["s"] for r in rows) for m, rows in runs.items()}
        print(f"ratio fp32-then-cast / bf16: {best['fp32-then-cast'] / best['bf16']:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(sys.argv[1:])
