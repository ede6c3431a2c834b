"""Saving and loading a :class:`~ucse.uec.laplace.DiagonalLaplace`, validating everything read.

``laplace.safetensors`` holds the MAP (``weight``, ``bias``), the prior mean (``prior_weight``,
``prior_bias``) and the diagonal curvature (``h_weight``, ``h_bias``); ``laplace.json`` the options,
the chosen prior precision, the grid scores and the refinement record. A file that is truncated,
mis-shaped, non-finite or has a negative curvature / non-positive prior precision is refused with an
error naming the file and the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from ucse import atomic, json_read
from ucse.uec.laplace import DiagonalLaplace

TENSORS = "laplace.safetensors"
CONFIG = "laplace.json"


class LaplaceFileError(ValueError):
    """A saved posterior that cannot be used (names the file and the field)."""


def save_laplace(la: DiagonalLaplace, directory: str | os.PathLike[str]) -> Path:
    """Write the two files atomically (the folder may also hold a caller's files); ``la`` must be fitted."""
    la._require_fit()
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        "weight": la.weight,
        "bias": la.bias,
        "prior_weight": la.prior_weight,
        "prior_bias": la.prior_bias,
        "h_weight": la.h_weight,
        "h_bias": la.h_bias,
    }
    with atomic.atomic_file(folder / TENSORS, "wb") as fh:
        fh.write(save({k: t.contiguous() for k, t in tensors.items()}))
    config = {
        "hessian": la.hessian.value,
        "prior": la.prior.value,
        "similarity": la.similarity.value,
        "temperature": la.temperature,
        "batch_size": la.batch_size,
        "refine_steps": la.refine_steps,
        "evidence_rounds": la.evidence_rounds,
        "prior_grid": la.prior_grid.tolist(),
        "grid_scores": la.grid_scores.tolist(),
        "prior_precision": la.prior_precision,
        "log_lik": la.log_lik,
        "diagnostics": la.diagnostics,
    }
    atomic.write_json(folder / CONFIG, config)
    return folder


def _field(config: dict, key: str, path: Path) -> object:
    if key not in config:
        raise LaplaceFileError(f"{path}: field '{key}' is missing; refit the member (the file is incomplete)")
    return config[key]


def load_laplace(directory: str | os.PathLike[str]) -> DiagonalLaplace:
    """Read a posterior written by :func:`save_laplace`, validating shapes, finiteness and positivity."""
    folder = Path(directory)
    cfg_path, ten_path = folder / CONFIG, folder / TENSORS
    for path in (cfg_path, ten_path):
        if not path.is_file():
            raise LaplaceFileError(f"{path} is missing; not a saved Laplace posterior (refit the member)")
    try:
        config = json_read.loads(cfg_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LaplaceFileError(f"{cfg_path}: unreadable JSON ({err}); refit the member") from None
    if not isinstance(config, dict):
        raise LaplaceFileError(f"{cfg_path}: expected a JSON object, got {type(config).__name__}")
    try:
        tensors = load_file(str(ten_path))
    except (OSError, SafetensorError) as err:
        raise LaplaceFileError(f"{ten_path}: unreadable safetensors ({err}); refit the member") from None
    for key in ("weight", "bias", "prior_weight", "prior_bias", "h_weight", "h_bias"):
        if key not in tensors:
            raise LaplaceFileError(f"{ten_path}: tensor '{key}' is missing; refit the member")
        if not bool(torch.isfinite(tensors[key]).all()):
            raise LaplaceFileError(f"{ten_path}: tensor '{key}' has non-finite values; refit the member")
    weight = tensors["weight"]
    if not weight.is_floating_point() or any(t.dtype != weight.dtype for t in tensors.values()):
        kinds = ", ".join(f"{k} {str(t.dtype).removeprefix('torch.')}" for k, t in tensors.items())
        raise LaplaceFileError(
            f"{ten_path}: the tensors must share one float dtype, got {kinds}; refit the member"
        )
    if weight.ndim != 2:
        raise LaplaceFileError(f"{ten_path}: tensor 'weight' must be (D, F), got {tuple(weight.shape)}")
    dim = weight.shape[0]
    expect = {
        "bias": (dim,),
        "prior_weight": tuple(weight.shape),
        "prior_bias": (dim,),
        "h_weight": tuple(weight.shape),
        "h_bias": (dim,),
    }
    for key, shape in expect.items():
        if tuple(tensors[key].shape) != shape:
            raise LaplaceFileError(
                f"{ten_path}: tensor '{key}' has shape {tuple(tensors[key].shape)}, expected {shape}"
            )
    for key in ("h_weight", "h_bias"):
        if bool((tensors[key] < 0).any()):
            raise LaplaceFileError(
                f"{ten_path}: tensor '{key}' (a curvature) has negative entries; refit the member"
            )
    delta = _field(config, "prior_precision", cfg_path)
    if not isinstance(delta, (int, float)) or not float(delta) > 0 or delta == float("inf"):
        raise LaplaceFileError(
            f"{cfg_path}: field 'prior_precision' must be a finite number > 0, got {delta!r}"
        )
    try:
        obj = DiagonalLaplace(
            hessian=_field(config, "hessian", cfg_path),
            prior=_field(config, "prior", cfg_path),
            temperature=_field(config, "temperature", cfg_path),
            similarity=_field(config, "similarity", cfg_path),
            prior_grid=torch.tensor(_field(config, "prior_grid", cfg_path)),
            batch_size=_field(config, "batch_size", cfg_path),
            refine_steps=config.get("refine_steps", 0),
            evidence_rounds=config.get("evidence_rounds", 1),
            dtype=weight.dtype,
        )
    except (ValueError, TypeError) as err:
        raise LaplaceFileError(f"{cfg_path}: {err}") from None
    obj.weight, obj.bias = weight, tensors["bias"]
    obj.prior_weight, obj.prior_bias = tensors["prior_weight"], tensors["prior_bias"]
    obj.h_weight, obj.h_bias = tensors["h_weight"], tensors["h_bias"]
    scores, log_lik = _field(config, "grid_scores", cfg_path), _field(config, "log_lik", cfg_path)
    diagnostics = config.get("diagnostics", {})
    if not (
        isinstance(scores, list) and all(_number(v) for v in scores) and len(scores) == len(obj.prior_grid)
    ):
        raise LaplaceFileError(f"{cfg_path}: field 'grid_scores' must be one number per prior_grid value")
    if not _number(log_lik) or not isinstance(diagnostics, dict):
        raise LaplaceFileError(f"{cfg_path}: field 'log_lik' must be a number and 'diagnostics' an object")
    obj.grid_scores = torch.tensor(scores, dtype=torch.float64)
    obj.prior_precision, obj.log_lik = float(delta), float(log_lik)
    obj.diagnostics = diagnostics
    return obj


def _number(value: object) -> bool:
    """A JSON number (not true/false, which Python counts as integers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
