"""``eval.py run=... export=... out=...``: a trained head's Gaussian embeddings of a text file or a split."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ucse.config import from_yaml
from ucse.data import load_classification
from ucse.evaluation.config import EvalConfig
from ucse.export.encoder import UcseEncoder
from ucse.export.gaussian import GaussianEmbeddings
from ucse.training import resolve_device

SPLITS = ("train", "validation", "test")


def read_texts(path: Path) -> list[str]:
    """Texts of a ``.jsonl`` file with a ``text`` field per line; errors name the line."""
    texts = []
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{i} is not valid JSON ({err.msg}); one object per line.") from None
            text = row.get("text") if isinstance(row, dict) else None
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f'{path}:{i} needs a non-empty string field "text", got {row!r:.80}.')
            texts.append(text)
    if not texts:
        raise ValueError(f"{path} holds no texts.")
    return texts


def export_run(cfg: EvalConfig) -> dict:
    """Encode ``cfg.export`` (a ``.jsonl`` file or a split of the run's task) into ``cfg.out``.

    Writes ``embeddings.safetensors`` (mean = mu, var = sigma^2) + ``meta.json`` atomically. A head
    without a variance branch has no variance to export: the error says to train with UCL or to use the
    post-hoc Laplace member of ``ucse.uec``.
    """
    if not cfg.out:
        raise ValueError("export needs out=<folder> for embeddings.safetensors + meta.json.")
    run = Path(cfg.run or "")
    train_cfg = from_yaml(run / "config.yaml")
    encoder = UcseEncoder.from_dir(run / "head", device=resolve_device(cfg.device))
    source = Path(cfg.export)
    if source.suffix == ".jsonl":
        texts, origin = read_texts(source), {"input_file": str(source)}
    elif cfg.export in SPLITS:
        data = load_classification(train_cfg.task, train_cfg.data, train_cfg.seed)
        texts, origin = (
            data.texts(cfg.export),
            {"task": train_cfg.task.name, "split": cfg.export},
        )
    else:
        raise ValueError(f"export={cfg.export!r} is neither a .jsonl file nor a split ({', '.join(SPLITS)}).")
    out = encoder.encode_gaussian(texts)
    if out.var is None:
        raise ValueError(
            f"The head in {run / 'head'} is deterministic (head.uncertainty=false): it has no variance to "
            "export. Train with head.uncertainty=true, or give this backbone a post-hoc Laplace variance "
            "(ucse.uec.laplace)."
        )
    meta = {
        "member": f"ucse:{train_cfg.task.name}/{train_cfg.backbone.name}/{run.name}",
        "backbone": train_cfg.backbone.model,
        "revision": encoder.backbone.fingerprint,
        "pooling": f"head:{train_cfg.head.type.value}",
        "dim": int(out.mean.shape[1]),
        "normalisation": "none",
        "count": len(texts),
        **origin,
    }
    emb = GaussianEmbeddings(torch.from_numpy(out.mean), torch.from_numpy(out.var), meta)
    path = emb.save(cfg.out)
    return {"out": str(path), **meta}
