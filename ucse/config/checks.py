"""Checks of a merged run config: value ranges and the device, unset keys, and literal string overrides.

Kept beside the schema (``schema.py``); ``build_config`` runs them before anything is loaded or written.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ucse.config.schema import ConfigError, Device, HeadType, LongTexts, Recipe, TrainConfig
from ucse.config.uncertainty import OodThreshold


def leaf_keys(node: DictConfig, prefix: str = "") -> list[str]:
    """Dotted keys of every leaf of a DictConfig (for the ``???`` check)."""
    out = []
    for key in node:
        full = f"{prefix}{key}"
        child = node._get_node(key)  # noqa: SLF001 - reading a node without resolving it
        out += leaf_keys(child, f"{full}.") if isinstance(child, DictConfig) else [full]  # type: ignore[arg-type]
    return out


def _is_text_field(key: str) -> bool:
    """Whether the schema field at dotted ``key`` is a plain string (``str`` or ``str | None``)."""
    obj: Any = TrainConfig
    parts = key.split(".")
    for i, part in enumerate(parts):
        hit = {f.name: f for f in fields(obj)}.get(part) if is_dataclass(obj) else None
        if hit is None:
            return False
        if i == len(parts) - 1:
            return str(hit.type).replace(" ", "") in ("str", "str|None")
        obj = hit.default_factory() if callable(hit.default_factory) else hit.default  # type: ignore[misc]
    return False


def parse_dotlist(dotlist: list[str]) -> DictConfig:
    """OmegaConf's dotlist parsing, except that a string field keeps its text verbatim.

    OmegaConf reads each value as YAML, so ``backbone.prompt=query: {text}`` would become a mapping and
    ``backbone.revision=0123`` the number 83; for a ``str`` field anything that does not parse to a string
    (quoted or not) or ``null`` is taken as the literal text instead.
    """
    out = OmegaConf.create()
    for tok in dotlist:
        key, value = tok.split("=", 1)
        try:
            parsed = OmegaConf.from_dotlist([tok])
            leaf = OmegaConf.select(parsed, key, throw_on_missing=False)
        except Exception:  # noqa: BLE001 - yaml's ScannerError, OmegaConf's errors: the value is not YAML
            parsed, leaf = None, None
        # YAML also turns a text field's value into another type: revision=0123 -> 83 (octal), 12e4567 -> inf,
        # output_dir=2024_01 -> 202401, instruction=on -> True; only a string (quoted or not) or null is kept.
        if _is_text_field(key) and (parsed is None or not (leaf is None or isinstance(leaf, str))):
            OmegaConf.update(out, key, value, merge=False)
        elif parsed is None:
            raise ConfigError(f"Override '{tok}' could not be parsed; quote the value (key='...').")
        else:
            out = OmegaConf.merge(out, parsed)  # type: ignore[assignment]
    return out  # type: ignore[return-value]


def _cuda_available() -> bool:
    """Whether torch sees a CUDA GPU; torch is imported only here, so parsing a config stays fast."""
    import torch

    return torch.cuda.is_available()


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"Invalid value {key}={value!r}: allowed {allowed}.")


def check_data_path(path: str | Path) -> None:
    """Refuse a ``data.path`` that does not exist, with the fix (before any data or training library loads).

    Raises:
        FileNotFoundError: naming the path.
    """
    if not Path(path).exists():
        raise FileNotFoundError(f"data.path={path} does not exist. Point it at your data file or folder.")


def validate_config(cfg: TrainConfig) -> None:
    """Check value ranges and the device before any file is written or any data or model is loaded.

    Raises:
        ConfigError: naming the first bad key, its value and the allowed range.
    """
    o, b, h, lo, d = cfg.optim, cfg.backbone, cfg.head, cfg.loss, cfg.data
    _check(o.epochs >= 1, "optim.epochs", o.epochs, "an integer >= 1")
    _check(math.isfinite(o.lr) and o.lr > 0, "optim.lr", o.lr, "a finite number > 0 (e.g. 8e-4)")
    _check(0 <= o.warmup_ratio <= 1, "optim.warmup_ratio", o.warmup_ratio, "0 <= warmup_ratio <= 1")
    _check(o.batch_size >= 1, "optim.batch_size", o.batch_size, "an integer >= 1")
    _check(
        math.isfinite(o.weight_decay) and o.weight_decay >= 0, "optim.weight_decay", o.weight_decay, ">= 0"
    )
    _check(b.max_length >= 1, "backbone.max_length", b.max_length, "an integer >= 1 (tokens)")
    _check(b.batch_size is None or b.batch_size >= 1, "backbone.batch_size", b.batch_size, ">= 1 or null")
    _check(b.max_batch_tokens >= 1, "backbone.max_batch_tokens", b.max_batch_tokens, "an integer >= 1")
    _check("{text}" in b.prompt, "backbone.prompt", b.prompt, "a template containing {text}")
    _check(b.max_windows >= 1, "backbone.max_windows", b.max_windows, "an integer >= 1")
    if b.long_texts is LongTexts.windows and (b.prompt != "{text}" or b.skip_prompt_prefix):
        raise ConfigError(
            f"backbone.long_texts=windows reads each window on its own, but backbone.prompt={b.prompt!r} "
            "would frame only the first one; use long_texts=truncate with this backbone, or prompt='{text}'."
        )
    _check(math.isfinite(lo.temperature) and lo.temperature > 0, "loss.temperature", lo.temperature, "> 0")
    _check(0 <= lo.lcl_weight <= 1, "loss.lcl_weight", lo.lcl_weight, "0 <= lcl_weight <= 1")
    _check(math.isfinite(lo.kl_weight) and lo.kl_weight >= 0, "loss.kl_weight", lo.kl_weight, ">= 0")
    _check(0 <= h.dropout < 1, "head.dropout", h.dropout, "0 <= dropout < 1")
    _check(
        bool(h.kernel_sizes) and min(h.kernel_sizes) >= 1,
        "head.kernel_sizes",
        h.kernel_sizes,
        "integers >= 1",
    )
    for key in ("num_filters", "embed_dim", "mlp_hidden"):
        value = getattr(h, key)
        _check(value is None or value >= 1, f"head.{key}", value, ">= 1 or null")
    _check(h.logreg_max_iter >= 1, "head.logreg_max_iter", h.logreg_max_iter, "an integer >= 1")
    _check(2 <= h.logreg_folds <= 100, "head.logreg_folds", h.logreg_folds, "an integer in [2, 100]")
    _check(0 < d.val_fraction < 1, "data.val_fraction", d.val_fraction, "0 < val_fraction < 1")
    _check(0 <= d.test_fraction < 1, "data.test_fraction", d.test_fraction, "0 <= test_fraction < 1")
    _check(d.min_label_rows >= 0, "data.min_label_rows", d.min_label_rows, "an integer >= 0")
    for key in ("max_train_samples", "max_eval_samples"):
        value = getattr(d, key)
        _check(value is None or value >= 1, f"data.{key}", value, ">= 1 or null")
    if d.ood_path is not None and not Path(d.ood_path).expanduser().is_file():
        raise ConfigError(
            f"data.ood_path={d.ood_path}: no such file; give a .txt (one out-of-scope example per line) or a "
            "table file with a text column."
        )
    if cfg.uncertainty.ood.threshold is OodThreshold.examples and d.ood_path is None:
        raise ConfigError(
            "uncertainty.ood.threshold=examples needs out-of-scope examples: give data.ood_path=<file>, or "
            "use threshold=auto (examples when given, else the tpr rule)."
        )
    tf = cfg.task.carved_test_fraction
    _check(tf is None or 0 < tf < 1, "task.carved_test_fraction", tf, "0 < carved_test_fraction < 1 or null")
    _check(cfg.num_workers >= 0, "num_workers", cfg.num_workers, "an integer >= 0")
    _check(cfg.log_every_n_steps >= 1, "log_every_n_steps", cfg.log_every_n_steps, "an integer >= 1")
    _check(0 <= cfg.seed < 2**32, "seed", cfg.seed, "an integer in [0, 2^32 - 1] (NumPy's seed range)")
    if Device(cfg.accelerator) is Device.cuda and not _cuda_available():
        raise ConfigError(
            "Invalid value accelerator='cuda': no CUDA GPU is visible; use accelerator=auto or "
            "accelerator=cpu."
        )
    if cfg.overwrite and cfg.ckpt_path:
        raise ConfigError(
            f"overwrite=true and ckpt_path={cfg.ckpt_path!r} contradict each other: overwrite starts the run "
            "afresh, ckpt_path resumes it; give one of them."
        )
    if Recipe(cfg.recipe) is Recipe.auto and HeadType(h.type) in (HeadType.auto, HeadType.blend):
        if cfg.devices > 1:
            raise ConfigError(
                f"head.type={HeadType(h.type).value} fits several heads in one process; use devices=1, or a "
                "single head (head=textcnn) to train on several devices."
            )
    # fitted in memory, no checkpoint: head=logreg always (it was silently refitted in place), auto / blend
    # under recipe=auto
    in_memory = HeadType(h.type) is HeadType.logreg or (
        Recipe(cfg.recipe) is Recipe.auto and HeadType(h.type) in (HeadType.auto, HeadType.blend)
    )
    if in_memory and cfg.ckpt_path:
        raise ConfigError(
            f"ckpt_path={cfg.ckpt_path!r}: head.type={HeadType(h.type).value} is fitted in memory and writes "
            "no checkpoint to resume; train it again without ckpt_path, with overwrite=true where the run "
            "folder holds the run (it takes minutes on cached states)."
        )
    if Recipe(cfg.recipe) is Recipe.paper and HeadType(h.type) is HeadType.blend:
        raise ConfigError(
            "head.type=blend with recipe=paper: the blend is fitted by recipe=auto only; use recipe=auto "
            "or head=textcnn."
        )
