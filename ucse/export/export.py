"""``eval.py run=... export=... out=...``: a trained head's Gaussian embeddings of a text file or a split."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ucse import json_read
from ucse.backbone.device import resolve_device
from ucse.blank_text import blank_problem, is_blank
from ucse.config import from_yaml
from ucse.config.run_layout import RunFolder
from ucse.core.encoder import UcseEncoder
from ucse.core.gaussian import GaussianEmbeddings
from ucse.core.run_folder import check_same_splits, finished_run, run_data
from ucse.evaluation.config import EvalConfig

SPLITS = ("train", "validation", "test")


def read_texts(path: Path) -> list[str]:
    """Texts of a ``.jsonl`` file with a ``text`` field per line; errors name the line."""
    texts = []
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json_read.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{i} is not valid JSON ({err.msg}); one object per line.") from None
            text = row.get("text") if isinstance(row, dict) else None
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f'{path}:{i} needs a non-empty string field "text", got {row!r:.80}.')
            if is_blank(text):
                raise ValueError(f'{path}:{i}: field "text" holds {blank_problem(text)}, no word to read.')
            texts.append(text)
    if not texts:
        raise ValueError(f"{path} holds no texts.")
    return texts


def check_out(out: Path, run: Path, overwrite: bool) -> None:
    """Refuse an export folder that would destroy something: the run itself, or a non-empty folder.

    ``out`` may not be the run folder, one of its parents, inside its ``head/`` or ``checkpoints/``, or the
    working folder or one of its parents (whatever the flags say); a non-empty ``out`` is replaced only with
    ``overwrite=true``.

    Raises:
        ValueError: naming ``out``, what is in it and the flag or folder that allows the export.
    """
    o, r = out.resolve(), RunFolder(run.resolve())
    if o == r.path or r.path.is_relative_to(o) or o.is_relative_to(r.head) or o.is_relative_to(r.checkpoints):
        raise ValueError(
            f"out={out} would replace the run {run} or part of it (head, checkpoints, metrics); nothing was "
            "changed. Export into a new folder, e.g. out=<run>/export or out=embeddings/<name>."
        )
    if Path.cwd().resolve().is_relative_to(o):  # out=. or a parent: replacing it whole would take the cwd
        raise ValueError(
            f"out={out} is the folder you are working in (or holds it), which an export replaces whole; "
            "nothing was changed. Export into a new folder, e.g. out=embeddings/<name>."
        )
    if out.exists() and not out.is_dir():
        raise ValueError(f"out={out} is a file; nothing was changed. Export into a new folder.")
    if out.is_dir() and not overwrite:
        present = sorted(p.name for p in out.iterdir())
        if present:
            raise ValueError(
                f"out={out} is not empty ({', '.join(present[:5])}); nothing was changed. Pass "
                "overwrite=true to replace that folder whole, or export into a new folder."
            )


def export_run(cfg: EvalConfig) -> dict:
    """Encode ``cfg.export`` (a ``.jsonl`` file or a split of the run's task) into ``cfg.out``.

    Writes ``embeddings.safetensors`` (mean = mu, var = sigma^2) + ``meta.json`` atomically. A head
    without a variance branch has no variance to export: the error says to train with UCL or to use the
    post-hoc Laplace member of ``ucse.uec``. ``out`` is checked first (see :func:`check_out`), then the
    input texts, before any model is loaded.
    """
    if not cfg.out:
        raise ValueError("export needs out=<folder> for embeddings.safetensors + meta.json.")
    run = finished_run(cfg.run or "")
    check_out(Path(cfg.out), run, cfg.overwrite)
    folder = RunFolder(run)
    train_cfg = from_yaml(folder.config)
    source = Path(cfg.export)
    if source.suffix == ".jsonl":
        texts, origin = read_texts(source), {"input_file": str(source)}
    elif cfg.export not in SPLITS:
        raise ValueError(f"export={cfg.export!r} is neither a .jsonl file nor a split ({', '.join(SPLITS)}).")
    device = resolve_device(cfg.accelerator)
    encoder = UcseEncoder.from_dir(folder.head, device=device, trust_remote_code=cfg.trust_remote_code)
    if encoder.encode_gaussian(["a text"]).var is None:  # one text, not the whole pass, to find out
        saved = encoder.head.spec.config.type.value
        chose = f"head=auto chose {saved}, which" if train_cfg.head.type.value == "auto" else "it"
        # the probe has no variance branch to switch on; the other heads have one (head.gaussian)
        fix = "head=textcnn (the Gaussian TextCNN)" if saved == "logreg" else "head.gaussian=true"
        raise ValueError(
            f"The head in {run / 'head'} is deterministic ({chose} has no variance branch): it has no "
            f"variance to export. Train with {fix}, or give this backbone a post-hoc Laplace variance "
            "(ucse.uec.laplace)."
        )
    if cfg.export in SPLITS and source.suffix != ".jsonl":
        # the run's own rows (rows.parquet), else its data read again and checked: other rows exported
        # under the run's split name would pass for it (a review)
        fix = "export a .jsonl of the texts instead (export=<texts.jsonl>)"
        data = run_data(run, train_cfg, cfg.data_root, cfg.data_path, "export", fix)
        check_same_splits(run, data, (cfg.export,), refuse=True)
        texts, origin = (
            data.texts(cfg.export),
            {"task": train_cfg.task.name, "split": cfg.export},
        )
        cap = train_cfg.data.max_train_samples if cfg.export == "train" else train_cfg.data.max_eval_samples
        if cap is not None and len(texts) >= cap:  # the run's seeded slice, not the whole split
            key = "max_train_samples" if cfg.export == "train" else "max_eval_samples"
            origin["slice"] = f"the run's data.{key}={cap} rows (seed {train_cfg.seed})"
    out = encoder.encode_gaussian(texts)
    assert out.var is not None  # as the one text's above
    meta = {
        "member": f"ucse:{train_cfg.task.name}/{train_cfg.backbone.name}/{run.name}",
        "backbone": train_cfg.backbone.model,
        "revision": encoder.backbone.fingerprint,
        # the head that was saved: head=auto's choice (textcnn, logreg, blend), not "auto"
        "pooling": f"head:{encoder.head.spec.config.type.value}",
        "dim": int(out.mean.shape[1]),
        "normalisation": "none",
        "count": len(texts),
        **origin,
    }
    emb = GaussianEmbeddings(torch.from_numpy(out.mean), torch.from_numpy(out.var), meta)
    path = emb.save(cfg.out, replace=cfg.overwrite)  # an out= filled meanwhile is not replaced
    return {"out": str(path), **meta}
