"""How the conditioning of cached decoder states decides whether a short gradient-trained probe learns.

Reads the pool's cache entry that ``bench/decoder_table.py`` built (same task, subset and backbone), pools the
states (last token, mean), and trains a plain ``nn.Linear`` with AdamW for 3 epochs at batch 64 on raw,
centred and standardised features (training-split statistics), printing test accuracy. Seed 0.

Usage: UCSE_DATA_DIR=../shared/data python bench/state_conditioning.py TASK TRAIN_ROWS EVAL_ROWS CACHE_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from ucse.backbone.pooling import pool
from ucse.backbone.states import CachedStates
from ucse.config import build_config
from ucse.data import load_classification
from ucse.training.run import task_pool


def main(task: str, rows: int, eval_rows: int, cache_dir: str) -> None:
    """Print one accuracy per (pooling, conditioning, lr)."""
    cfg = build_config(
        [
            "backbone=smollm2-135m",
            f"task={task}",
            f"data.max_train_samples={rows}",
            f"data.max_eval_samples={eval_rows}",
        ]
    )
    data = load_classification(cfg.task, cfg.data, 0)
    row = {t: i for i, t in enumerate(task_pool(data))}

    def parts(e: Path) -> dict:
        return json.loads((e / "meta.json").read_text())["parts"]

    entries = [e for e in Path(cache_dir).iterdir() if not e.name.startswith(".")]
    entry = next(
        CachedStates(e)
        for e in entries
        if parts(e)["task"] == task and parts(e)["n"] == len(row) and "skip_prompt_prefix" not in parts(e)
    )

    def feats(split: str, how: str) -> tuple[torch.Tensor, torch.Tensor]:
        hidden, mask = entry.batch([row[t] for t in data.texts(split)])
        return pool(hidden, mask, how), torch.as_tensor(np.asarray(data.labels(split)))

    for how in ("last", "mean"):
        xtr, ytr = feats("train", how)
        xte, yte = feats("test", how)
        mu, sd = xtr.mean(0), xtr.std(0) + 1e-6
        conditionings = {
            "raw": lambda x: x,
            "centred": lambda x: x - mu,
            "standardised": lambda x: (x - mu) / sd,
        }
        for name, f in conditionings.items():
            for lr in (8e-4, 3e-3):
                torch.manual_seed(0)
                lin = torch.nn.Linear(xtr.shape[1], data.num_classes)
                opt = torch.optim.AdamW(lin.parameters(), lr=lr, weight_decay=0.01)
                steps = 0
                for _ in range(3):
                    perm = torch.randperm(len(ytr))
                    for i in range(0, len(ytr), 64):
                        b = perm[i : i + 64]
                        loss = torch.nn.functional.cross_entropy(lin(f(xtr[b])), ytr[b])
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        steps += 1
                acc = (lin(f(xte)).argmax(1) == yte).float().mean().item()
                print(f"{task} {how:4s} {name:12s} lr {lr:g}: {steps} steps, test accuracy {acc:.4f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
