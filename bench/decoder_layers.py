"""Where a decoder's features are best: the tuned probe on every few layers of SmolLM2-135M, one pass.

One pass over the task's train (optionally N examples per class, drawn as ``bench/peers.py`` draws them)
and test texts with the SmolLM2 config's prompt and prefix skipping, keeping every requested layer's
hidden states pooled two ways (mean over the text's tokens, and the last token: the appended EOS), fp32.
Each (layer, pooling) gets ucse's tuned probe (``ucse.training.logreg.fit_probe``: unit vectors,
``LogisticRegressionCV`` by accuracy) and is scored on the official test split. The best layer is what
``backbone.layer=`` should read for ``ucse train backbone=smollm2-135m``.

    UCSE_DATA_DIR=../shared/data python bench/decoder_layers.py --task AmazonCounterfactualClassification
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from peers import read, sample

from ucse.backbone.encoder import FrozenBackbone
from ucse.backbone.pooling import unit_pool
from ucse.config import build_config
from ucse.training.logreg import fit_probe


def pooled_layers(
    bb: FrozenBackbone, texts: list[str], layers: list[int]
) -> dict[tuple[int, str], np.ndarray]:
    """{(layer, pooling): (N, H) unit vectors} from one pass: the hidden states captured per batch."""
    captured: dict = {}
    forward = bb.model.forward

    def with_all_layers(*args, **kwargs):  # every layer from the one forward the backbone already runs
        out = forward(*args, **{**kwargs, "output_hidden_states": True})
        captured["states"] = out.hidden_states  # (L + 1) x (B, T, H)
        return out

    bb.model.forward = with_all_layers
    try:
        shape = (len(texts), bb.hidden_size)
        out = {(k, p): np.zeros(shape, np.float32) for k in layers for p in ("mean", "last")}
        for idx, _, mask in bb.iter_states(texts):  # mask: the prompt prefix already hidden
            for k in layers:  # pool reads only the mask's tokens (pads and the hidden prefix ignored)
                for p in ("mean", "last"):
                    out[(k, p)][idx.numpy()] = unit_pool(captured["states"][k], mask, p).numpy()
    finally:
        bb.model.forward = forward
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="AmazonCounterfactualClassification")
    ap.add_argument("--shots", default="full", help="examples per class from train, or 'full'")
    ap.add_argument("--layers", nargs="+", type=int, default=[6, 10, 14, 18, 22, 26, 30])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench/out/decoder_layers.json"))
    args = ap.parse_args()
    cfg = build_config(["backbone=smollm2-135m", f"task={args.task}"])
    bb = FrozenBackbone(cfg.backbone, "cpu", instruction=cfg.task.instruction)
    tr_texts, y_tr = sample(*read(args.task, "train"), args.shots, args.seed)
    te_texts, y_te = read(args.task, "test")
    t0 = time.perf_counter()
    feats = pooled_layers(bb, tr_texts + te_texts, args.layers)
    pass_s = time.perf_counter() - t0
    n = len(tr_texts)
    rows = []
    for (layer, pooling), x in feats.items():
        clf, info = fit_probe(x[:n].astype(np.float64), y_tr, int(y_tr.max()) + 1, 5, args.seed, 3000)
        acc = float((clf.predict(x[n:].astype(np.float64)) == y_te).mean())
        rows.append({"layer": layer, "pooling": pooling, "accuracy": acc, "C": info["C"]})
        print(json.dumps(rows[-1]), flush=True)
    report = {
        "task": args.task,
        "shots": args.shots,
        "n_train": n,
        "n_test": len(te_texts),
        "precision": bb.precision.value,
        "pass_s": round(pass_s, 1),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"pass: {len(tr_texts) + len(te_texts)} texts in {pass_s:.0f} s ({bb.precision.value})")
    for p in ("mean", "last"):
        cells = [f"{r['layer']}: {100 * r['accuracy']:.2f}" for r in rows if r["pooling"] == p]
        print(f"{p:5s}", " | ".join(cells))


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
