"""Save and load a trained head as ``config.json`` + ``model.safetensors`` (no pickle).

A head folder may also hold the uncertainty profile fitted after training: ``calibration.json`` (scalars,
choices, guarantees) and ``calibration.safetensors`` (arrays) beside the weights. Their content belongs to
``ucse.uncertainty.profile``; this module only stores them, tied to the weights they were fitted for.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from enum import Enum
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save, save_file

from ucse import atomic
from ucse.config import HeadConfig, HeadType
from ucse.heads.base import Head
from ucse.heads.factory import build_head

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
CALIBRATION_FILE = "calibration.json"
CALIBRATION_ARRAYS = "calibration.safetensors"
HEAD_FILES = frozenset({CONFIG_FILE, WEIGHTS_FILE, CALIBRATION_FILE, CALIBRATION_ARRAYS})
_REQUIRED = ("format_version", "head", "hidden_size", "num_classes", "pooling", "meta")


def _jsonable(obj: Any) -> Any:
    """``json.dumps`` fallback for the config types we emit: enums as strings, dataclasses, paths."""
    if isinstance(obj, Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} value {obj!r} is not JSON-serialisable; pass plain JSON in meta.")


def save_head(head: Head, directory: str | Path, meta: dict[str, Any]) -> Path:
    """Write ``directory/config.json`` and ``directory/model.safetensors`` atomically.

    Both files are written to a temporary sibling folder which is then renamed into place (a calibration
    fitted for the previous weights goes with the old folder); an existing head folder is moved aside
    first and deleted only after the rename succeeded (restored on failure), so a crash never leaves a
    half-written head. A non-head folder (any other file in it) is never replaced.

    Args:
        head: a head built by :func:`ucse.heads.build_head` (it carries ``head.spec``).
        directory: destination folder.
        meta: caller's JSON-able metadata (label names, backbone config, ucse version, ...), stored under
            ``meta`` and returned unchanged by :func:`load_head`.

    Returns:
        The destination folder.

    Raises:
        ValueError: if the head has no ``spec`` or the destination is not a head folder.
        TypeError: if ``meta`` is not JSON-serialisable.
    """
    spec = getattr(head, "spec", None)
    if spec is None:
        raise ValueError(
            f"{type(head).__name__} has no .spec; build heads with ucse.heads.build_head to save them."
        )
    dest = Path(directory)
    if dest.exists() and (not dest.is_dir() or {p.name for p in dest.iterdir()} - HEAD_FILES):
        raise ValueError(
            f"Refusing to replace {dest}: it is not a saved head folder (only "
            f"{', '.join(sorted(HEAD_FILES))} may be in it). Choose an empty or new directory."
        )
    config = {
        "format_version": FORMAT_VERSION,
        "head": dataclasses.asdict(spec.config),
        "hidden_size": spec.hidden_size,
        "num_classes": spec.num_classes,
        "pooling": spec.pooling,
        "meta": meta,
    }
    text = atomic.dumps(config, indent=2, default=_jsonable)
    tensors = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}

    with atomic.atomic_dir(dest) as tmp:
        atomic.write_text(tmp / CONFIG_FILE, text)
        save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format_version": str(FORMAT_VERSION)})
    return dest


def _head_config(fields: Any, path: Path) -> HeadConfig:
    """Rebuild a HeadConfig from its JSON dict, rejecting unknown or missing fields by name."""
    if not isinstance(fields, dict):
        raise ValueError(
            f"{path}: field 'head' must be an object, got {type(fields).__name__}; re-export the head."
        )
    known = {f.name for f in dataclasses.fields(HeadConfig)}
    unknown, missing = sorted(set(fields) - known), sorted(known - set(fields))
    if unknown or missing:
        raise ValueError(
            f"{path}: field 'head' has unknown keys {unknown} / missing keys {missing} for this ucse version "
            f"(valid: {sorted(known)}); re-export the head with this version."
        )
    try:
        return HeadConfig(**{**fields, "type": HeadType(fields["type"])})
    except ValueError:
        raise ValueError(
            f"{path}: field 'head.type' is '{fields['type']}', valid: {', '.join(t.value for t in HeadType)}."
        ) from None


def load_head(directory: str | Path, map_location: str | torch.device = "cpu") -> tuple[Head, dict[str, Any]]:
    """Rebuild a head saved by :func:`save_head` and load its weights strictly.

    Args:
        directory: the head folder.
        map_location: device to put the weights (and the head) on.

    Returns:
        ``(head, meta)``: the head in eval mode and the caller's ``meta`` dict as saved.

    Raises:
        FileNotFoundError: if the folder or one of its two files is missing.
        ValueError: on an unreadable or incomplete config, an unknown format version, corrupt safetensors,
            or missing / unexpected / shape-mismatched tensors; each message names the file and field.
    """
    root = Path(directory)
    cfg_path, w_path = root / CONFIG_FILE, root / WEIGHTS_FILE
    for path in (cfg_path, w_path):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found; a saved head folder holds {CONFIG_FILE} and {WEIGHTS_FILE}."
            )
    try:
        config = json.loads(cfg_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{cfg_path} is not valid JSON ({err}); re-export the head.") from None
    if not isinstance(config, dict):
        raise ValueError(f"{cfg_path} must hold a JSON object; re-export the head.")
    missing = [k for k in _REQUIRED if k not in config]
    if missing:
        raise ValueError(f"{cfg_path} lacks field(s) {missing}; re-export the head.")
    if config["format_version"] != FORMAT_VERSION:
        raise ValueError(
            f"{cfg_path}: field 'format_version' is {config['format_version']!r}, this ucse reads only "
            f"{FORMAT_VERSION}; re-export the head with this ucse version."
        )
    head = build_head(
        _head_config(config["head"], cfg_path),
        int(config["hidden_size"]),
        int(config["num_classes"]),
        config["pooling"],
    )
    try:
        state = load_file(str(w_path), device=str(map_location))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{w_path} is not a readable safetensors file ({err}); re-export the head.") from err
    expected = head.state_dict()
    absent = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    shapes = [
        f"{k}: file {tuple(state[k].shape)} vs head {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    if absent or extra or shapes:
        raise ValueError(
            f"{w_path} does not match the head described in {cfg_path}: missing tensors {absent}, "
            f"unexpected tensors {extra}, shape mismatches {shapes}; re-export the head."
        )
    head.load_state_dict(state, strict=True)
    head.to(map_location).eval()
    return head, config["meta"]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_calibration(directory: str | Path, config: dict[str, Any], arrays: dict[str, torch.Tensor]) -> None:
    """Write ``calibration.safetensors`` then ``calibration.json`` into a saved head folder, each atomically.

    The JSON records the SHA-256 of the head's weights and of the arrays file, so :func:`load_calibration`
    refuses a calibration fitted for other weights or a pair torn by a crash between the two renames.

    Args:
        directory: a folder written by :func:`save_head`.
        config: JSON-able profile fields.
        arrays: named tensors (float64 is kept as is).

    Raises:
        FileNotFoundError: if ``directory`` holds no saved head.
    """
    root = Path(directory)
    if not (root / WEIGHTS_FILE).is_file():
        raise FileNotFoundError(f"{root / WEIGHTS_FILE} not found; save the head before its calibration.")
    tensors = {k: v.detach().cpu().contiguous() for k, v in arrays.items()}
    with atomic.atomic_file(root / CALIBRATION_ARRAYS, "wb") as fh:
        fh.write(save(tensors, metadata={"format_version": str(FORMAT_VERSION)}))
    record = {
        "format_version": FORMAT_VERSION,
        "weights_sha256": _sha256(root / WEIGHTS_FILE),
        "arrays_sha256": _sha256(root / CALIBRATION_ARRAYS),
        **config,
    }
    atomic.write_text(root / CALIBRATION_FILE, atomic.dumps(record, indent=2, default=_jsonable))


def load_calibration(directory: str | Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]] | None:
    """Read the calibration saved by :func:`save_calibration`, or ``None`` when the head has none.

    Returns:
        ``(config, arrays)``: the JSON fields (with ``format_version`` and the digests) and the tensors.

    Raises:
        ValueError: on unreadable files, or digests that do not match the weights / arrays in the folder.
    """
    root = Path(directory)
    cfg_path, arr_path = root / CALIBRATION_FILE, root / CALIBRATION_ARRAYS
    if not cfg_path.is_file():
        return None
    try:
        config = json.loads(cfg_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{cfg_path} is not valid JSON ({err}); refit it with fit_run_uncertainty."
        ) from None
    if not isinstance(config, dict) or config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{cfg_path}: unknown format; refit it with this ucse version.")
    if not arr_path.is_file():
        raise FileNotFoundError(f"{arr_path} not found beside {cfg_path}; refit the calibration.")
    if config.get("weights_sha256") != _sha256(root / WEIGHTS_FILE):
        raise ValueError(
            f"{cfg_path} was fitted for other weights than {root / WEIGHTS_FILE}; refit the calibration "
            "(ucse.uncertainty.fit.fit_run_uncertainty) or delete the two calibration files."
        )
    if config.get("arrays_sha256") != _sha256(arr_path):
        raise ValueError(f"{arr_path} does not match {cfg_path} (interrupted write?); refit the calibration.")
    try:
        arrays = load_file(str(arr_path))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{arr_path} is not a readable safetensors file ({err}); refit it.") from err
    return config, arrays


def resolve_head_dir(path: str | Path) -> Path:
    """The head folder of a run folder (``<run>/head``) or a head folder itself.

    Raises:
        FileNotFoundError: naming the path and what a run or head folder holds.
    """
    p = Path(path).expanduser()
    for cand in (p / "head", p):
        if (cand / "config.json").is_file() and (cand / "model.safetensors").is_file():
            return cand
    if not p.exists():
        raise FileNotFoundError(f"run={path}: no such folder. Pass a run folder written by `ucse train`.")
    raise FileNotFoundError(
        f"run={path} is neither a finished ucse run nor a head folder: no head/config.json + "
        "head/model.safetensors (or config.json + model.safetensors) in it. Pass a run folder written by "
        "`ucse train`, or its head/ folder."
    )
