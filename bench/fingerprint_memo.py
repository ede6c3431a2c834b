"""What a fresh process pays to fingerprint its backbone: hashing every file vs the remembered hash.

Each figure is a new Python process that imports ucse and calls ``model_fingerprint`` once (what ``ucse
train`` / ``predict`` / ``eval`` do before the first text), timed inside the process; the files are read
once beforehand so the page cache holds them (a cold disk adds its read time to the hashing column only).
Models: all-MiniLM-L6-v2 and all-mpnet-base-v2 (registry packages), and a folder whose ``model.safetensors``
holds random bytes of Qwen3-Embedding-0.6B's bf16 size (1.19 GB): the hash reads bytes, not tensors, so
only the size matters.

Usage::

    python bench/fingerprint_memo.py [repeats=3] [big_gb=1.19]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys, time
from ucse.backbone.loading import model_fingerprint
from ucse.config import BackboneConfig
t = time.perf_counter()
fp = model_fingerprint(BackboneConfig(model=sys.argv[1]))
print(json.dumps({"s": time.perf_counter() - t, "fp": fp}))
"""


def child(model: str, cache: Path, memo: bool) -> dict:
    env = {**os.environ, "UCSE_CACHE_DIR": str(cache), "UCSE_FINGERPRINT_MEMO": "1" if memo else "0"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, model], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def big_folder(root: Path, gb: float) -> str:
    folder = root / "qwen3-0.6b-sized"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    with (folder / "model.safetensors").open("wb") as fh:
        left = int(gb * 1e9)
        while left:
            n = min(left, 1 << 26)
            fh.write(os.urandom(n))
            left -= n
    return str(folder)


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    repeats, gb = int(args.get("repeats", 3)), float(args.get("big_gb", 1.19))
    with tempfile.TemporaryDirectory(prefix="ucse-fp-bench-") as tmp:
        root = Path(tmp)
        cache = Path(os.environ.get("UCSE_CACHE_DIR") or Path.home() / ".cache" / "ucse")  # split packages
        models = {"minilm-l6": None, "mpnet-base": None, f"random {gb:g} GB": big_folder(root, gb)}
        from ucse.backbone.loading import resolve_model_path  # the registry folders of the two real models
        from ucse.config import build_config

        for name in ("minilm-l6", "mpnet-base"):
            models[name] = str(resolve_model_path(build_config([f"backbone={name}"]).backbone.model))
        memo_cache = root / "memo-cache"
        print(f"{'model':<18} {'hash every time (s)':>20} {'remembered (s)':>15} {'ratio':>8}")
        for name, folder in models.items():
            for p in Path(folder).rglob("*"):  # into the page cache
                if p.is_file():
                    p.read_bytes()
            child(folder, memo_cache, memo=True)  # writes the memo
            hashing = min(child(folder, cache, memo=False)["s"] for _ in range(repeats))
            remembered = [child(folder, memo_cache, memo=True) for _ in range(repeats)]
            assert len({r["fp"] for r in remembered} | {child(folder, cache, memo=False)["fp"]}) == 1
            best = min(r["s"] for r in remembered)
            print(f"{name:<18} {hashing:>20.3f} {best:>15.4f} {hashing / best:>8.0f}x", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
