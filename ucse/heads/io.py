"""Save and load a trained head as ``config.json`` + ``model.safetensors`` (no pickle).

A head folder may also hold the uncertainty profile fitted after training: ``calibration.json`` (scalars,
choices, guarantees) and ``calibration.safetensors`` (arrays) beside the weights. Their content belongs to
``ucse.uncertainty.profile``; this module only stores them, tied to the weights they were fitted for.
``manifest.json`` (:mod:`ucse.heads.manifest`) holds the SHA-256 of every file, and every file read back is
treated as untrusted: checked against it, typed, bounded and finite before it is used.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from enum import Enum
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save, save_file

from ucse import atomic
from ucse.config import HeadType
from ucse.heads.base import Head
from ucse.heads.factory import build_head
from ucse.heads.manifest import MANIFEST_FILE, verify_files, write_manifest
from ucse.heads.meta import check_label_names
from ucse.heads.saved_config import FORMAT_VERSION, REEXPORT, read_config, shown

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
CALIBRATION_FILE = "calibration.json"
CALIBRATION_ARRAYS = "calibration.safetensors"
ARTIFACTS = frozenset({CONFIG_FILE, WEIGHTS_FILE, CALIBRATION_FILE, CALIBRATION_ARRAYS})
"""The files the manifest covers."""
HEAD_FILES = ARTIFACTS | {MANIFEST_FILE}
REFIT = "refit it with `ucse calibrate run=<the run folder>` (an exported head: export it again)"


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

    Both files, then ``manifest.json`` (their SHA-256), are written to a temporary sibling folder which is
    then renamed into place (a calibration fitted for the previous weights goes with the old folder); an
    existing head folder is moved aside first and deleted only after the rename succeeded (restored on
    failure), so a crash never leaves a half-written head. A non-head folder (any other file in it) is never
    replaced.

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
    refuse_foreign(dest, "Choose an empty or new directory.")
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
    # what load_head would refuse is not written, so it never replaces a good head in its folder
    check_label_names(meta, spec.num_classes, dest)
    _check_tensors(tensors, dest / WEIGHTS_FILE, type(head))

    with atomic.atomic_dir(dest) as tmp:
        atomic.write_text(tmp / CONFIG_FILE, text)
        save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format_version": str(FORMAT_VERSION)})
        write_manifest(tmp, ARTIFACTS)  # last: it covers what was written
    return dest


def _file_shapes(w_path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from a safetensors header, without reading the tensors."""
    try:
        with safe_open(str(w_path), framework="pt") as fh:
            return {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}  # noqa: SIM118 - not a dict
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{w_path} is not a readable safetensors file ({err}); {REEXPORT}.") from None


STD_FLOOR = 1e-6
"""The smallest state-norm scale a head may hold: ``StateNorm.fit``'s own floor (a smaller one divides the
states into inf)."""


def _check_tensors(
    state: dict[str, torch.Tensor],
    w_path: Path,
    head_type: type[Head],
    dtypes: dict[str, torch.dtype] | None = None,
) -> None:
    """Refuse weights the head could not use: read back from disk, or about to be saved.

    Every tensor floating point and finite in the dtype the head holds it in (``dtypes``: a float64 1e300
    becomes a float32 inf); state-norm scales >= :data:`STD_FLOOR`; and the bounds of ``head_type`` itself
    (:meth:`~ucse.heads.base.Head.state_problem`: a blend's weight in [0, 1] and temperatures >=
    ``TEMPERATURE_FLOOR``). ``state`` holds exactly the head's tensor names (checked before).
    """
    for name, t in state.items():
        if not t.is_floating_point():
            raise ValueError(f"{w_path}: tensor '{name}' has dtype {t.dtype}, expected a float; {REEXPORT}.")
        held = t.to((dtypes or {}).get(name, t.dtype))
        bad = int((~torch.isfinite(held)).sum())
        if bad:
            raise ValueError(
                f"{w_path}: tensor '{name}' holds {bad} NaN/inf value(s) of {t.numel()} (as "
                f"{str(held.dtype).removeprefix('torch.')}): the head would give every text the same "
                f"meaningless answer; {REEXPORT}."
            )
    for name, t in state.items():
        # every state norm: a blend's TextCNN holds its own as 'gaussian.state_norm.std'
        if name.rsplit(".", 2)[-2:] == ["state_norm", "std"] and not bool((t >= STD_FLOOR).all()):
            raise ValueError(f"{w_path}: tensor '{name}' must be >= {STD_FLOOR:g} everywhere; {REEXPORT}.")
    problem = head_type.state_problem(state)
    if problem:
        raise ValueError(f"{w_path}: {problem}; {REEXPORT}.")


def load_head(directory: str | Path, map_location: str | torch.device = "cpu") -> tuple[Head, dict[str, Any]]:
    """Rebuild a head saved by :func:`save_head` and load its weights strictly, as untrusted input.

    The files are checked against ``manifest.json`` (when the head has one), every field of config.json is
    type- and range-checked, the head is first built on the ``meta`` device (no memory) and its tensor
    shapes compared with the file's header, and every tensor must be finite; only then is anything
    allocated.

    Args:
        directory: the head folder.
        map_location: device to put the weights (and the head) on.

    Returns:
        ``(head, meta)``: the head in eval mode and the caller's ``meta`` dict as saved.

    Raises:
        FileNotFoundError: if the folder or one of its two files is missing.
        ValueError: on a file that does not match the manifest, an unreadable or incomplete config, an
            unknown format version, an out-of-range field, bad ``meta.label_names``, corrupt safetensors,
            missing / unexpected / shape-mismatched tensors or non-finite weights; each message names the
            file and field.
    """
    root = Path(directory)
    cfg_path, w_path = root / CONFIG_FILE, root / WEIGHTS_FILE
    for path in (cfg_path, w_path):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found; a saved head folder holds {CONFIG_FILE} and {WEIGHTS_FILE}."
            )
    verify_files(root, (CONFIG_FILE, WEIGHTS_FILE), REEXPORT)
    config, head_cfg = read_config(cfg_path)
    sizes = (config["hidden_size"], config["num_classes"], config["pooling"])
    try:
        with torch.device("meta"):  # shapes only: nothing is allocated for what the file asks
            blank_head = build_head(head_cfg, *sizes)
            blank = blank_head.state_dict()
        expected = {k: tuple(v.shape) for k, v in blank.items()}
    except ValueError as err:
        raise ValueError(f"{cfg_path}: {err} Fix it or {REEXPORT}.") from None
    found = _file_shapes(w_path)
    absent, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    shapes = [
        f"{k}: file {found[k]} vs head {v}" for k, v in expected.items() if k in found and found[k] != v
    ]
    if absent or extra or shapes:
        raise ValueError(
            f"{w_path} does not match the head described in {cfg_path}: missing tensors {absent}, "
            f"unexpected tensors {extra}, shape mismatches {shapes[:3]}; {REEXPORT}."
        )
    try:
        state = load_file(str(w_path), device=str(map_location))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{w_path} is not a readable safetensors file ({err}); {REEXPORT}.") from None
    _check_tensors(state, w_path, type(blank_head), {k: v.dtype for k, v in blank.items()})
    head = build_head(head_cfg, *sizes)  # its sizes are now those of the file's tensors
    head.load_state_dict(state, strict=True)
    head.to(map_location).eval()
    return head, config["meta"]


def saved_sizes(directory: str | Path) -> tuple[int, int]:
    """``(C, D)`` of a saved head, its classes and embedding width, from its checked ``config.json``.

    Raises:
        FileNotFoundError / ValueError: as :func:`load_head` for the config.
    """
    cfg_path = Path(directory) / CONFIG_FILE
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path} not found; a saved head folder holds {CONFIG_FILE}.")
    verify_files(Path(directory), (CONFIG_FILE,), REEXPORT)
    config, head_cfg = read_config(cfg_path)
    # the probe's mu is the unit pooled state: head.embed_dim does not size it
    if HeadType(head_cfg.type) is HeadType.logreg:
        return config["num_classes"], config["hidden_size"]
    return config["num_classes"], head_cfg.embed_dim or config["hidden_size"]


def saved_hidden_size(directory: str | Path) -> int:
    """H, the width of the backbone states a saved head reads, from its checked ``config.json``."""
    return int(read_config(Path(directory) / CONFIG_FILE)[0]["hidden_size"])


def save_calibration(directory: str | Path, config: dict[str, Any], arrays: dict[str, torch.Tensor]) -> None:
    """Write ``calibration.safetensors`` then ``calibration.json`` into a saved head folder, each atomically.

    The JSON records the SHA-256 of the head's weights and of the arrays file, so :func:`load_calibration`
    refuses a calibration fitted for other weights; ``manifest.json`` is rewritten last over every file,
    so a pair torn by a crash between the renames is refused too.

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
    verify_files(root, (CONFIG_FILE, WEIGHTS_FILE), REEXPORT)  # never re-sign a changed head
    tensors = {k: v.detach().cpu().contiguous() for k, v in arrays.items()}
    with atomic.atomic_file(root / CALIBRATION_ARRAYS, "wb") as fh:
        fh.write(save(tensors, metadata={"format_version": str(FORMAT_VERSION)}))
    record = {
        "format_version": FORMAT_VERSION,
        "weights_sha256": atomic.sha256(root / WEIGHTS_FILE),
        "arrays_sha256": atomic.sha256(root / CALIBRATION_ARRAYS),
        **config,
    }
    atomic.write_text(root / CALIBRATION_FILE, atomic.dumps(record, indent=2, default=_jsonable))
    write_manifest(root, ARTIFACTS)


def load_calibration(
    directory: str | Path, lost_ok: bool = False
) -> tuple[dict[str, Any], dict[str, torch.Tensor]] | None:
    """Read the calibration saved by :func:`save_calibration`, or ``None`` when the head has none.

    Only the files are checked here (manifest, digests, JSON object, readable arrays); the fields belong to
    ``ucse.uncertainty.profile``, which range-checks them.

    Returns:
        ``(config, arrays)``: the JSON fields (with ``format_version`` and the digests) and the tensors.

    Raises:
        ValueError: on unreadable files, files that do not match the manifest, or digests that do not
            match the weights / arrays in the folder.
    """
    root = Path(directory)
    cfg_path, arr_path = root / CALIBRATION_FILE, root / CALIBRATION_ARRAYS
    if not cfg_path.is_file() and lost_ok:
        return None
    verify_files(root, (CALIBRATION_FILE, CALIBRATION_ARRAYS), REFIT)  # listed but missing fails too
    if not cfg_path.is_file():
        return None
    try:
        config = json.loads(cfg_path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{cfg_path} is not valid JSON ({err}); {REFIT}.") from None
    if not isinstance(config, dict):
        raise ValueError(f"{cfg_path} must hold a JSON object; {REFIT}.")
    version = config.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        kind = "" if type(version) is int else f", not the JSON integer {FORMAT_VERSION}"
        raise ValueError(
            f"{cfg_path}: field 'format_version' is {shown(version)}{kind}; this ucse reads only "
            f"{FORMAT_VERSION}: {REFIT} with this ucse version."
        )
    if not arr_path.is_file():
        raise FileNotFoundError(f"{arr_path} not found beside {cfg_path}; {REFIT}.")
    if config.get("weights_sha256") != atomic.sha256(root / WEIGHTS_FILE):
        raise ValueError(f"{cfg_path} was fitted for other weights than {root / WEIGHTS_FILE}; {REFIT}.")
    if config.get("arrays_sha256") != atomic.sha256(arr_path):
        raise ValueError(f"{arr_path} does not match {cfg_path} (interrupted write?); {REFIT}.")
    try:
        arrays = load_file(str(arr_path))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{arr_path} is not a readable safetensors file ({err}); {REFIT}.") from None
    return config, arrays


def refuse_foreign(dest: Path, fix: str) -> None:
    """Refuse ``dest`` unless it is absent or a saved head folder: a head write replaces only a head.

    Raises:
        ValueError: naming ``dest``, the files a head folder may hold, and ``fix``.
    """
    if dest.exists() and (not dest.is_dir() or {p.name for p in dest.iterdir()} - HEAD_FILES):
        raise ValueError(
            f"Refusing to replace {dest}: it is not a saved head folder (only "
            f"{', '.join(sorted(HEAD_FILES))} may be in it). {fix}"
        )


def refuse_overlap(head_dir: Path, target: Path) -> None:
    """Refuse a ``target`` that is ``head_dir``, inside it or holds it (a copy there replaces its source).

    Raises:
        ValueError: naming both folders.
    """
    t, src = Path(target).resolve(), Path(head_dir).resolve()
    if t.is_relative_to(src) or src.is_relative_to(t):
        raise ValueError(
            f"{target} overlaps the head folder {head_dir} (is it, is inside it or holds it); name another "
            "folder."
        )


def copy_head(source: str | Path, target: str | Path, overwrite: bool = False) -> Path:
    """Copy a saved head folder (head, profile, manifest) to ``target``, verified, written atomically.

    Every artifact is checked against the source's manifest in the copy before the copy is renamed into
    place, and the copied head is loaded once, so a tampered or torn source is never published.

    Args:
        source: a saved head folder.
        target: a missing or empty folder, or one with files when ``overwrite``.
        overwrite: replace a folder that holds files (swapped in whole once the copy is complete).

    Raises:
        FileExistsError: ``target`` holds files and ``overwrite`` is off, or ``target`` is a file.
        ValueError: ``target`` is ``source``, inside it or holds it; a file does not match the manifest.
    """
    source, target = Path(source), Path(target)
    refuse_overlap(source, target)
    if target.exists() and not target.is_dir():
        raise FileExistsError(f"{target} is a file; name a folder.")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise FileExistsError(
            f"{target} already holds files; nothing was written. Pass overwrite=True to replace it, or "
            "name a new folder."
        )
    refuse_foreign(target, "Nothing was written; name a new folder.")  # overwrite=True replaces a head only
    present = sorted(name for name in HEAD_FILES if (source / name).is_file())
    with atomic.atomic_dir(target, replace=overwrite) as tmp:
        for name in present:
            shutil.copyfile(source / name, tmp / name)
        # the profile and metadata files here; load_head checks config and weights against the manifest itself
        verify_files(
            tmp, tuple(n for n in present if n not in (MANIFEST_FILE, CONFIG_FILE, WEIGHTS_FILE)), REEXPORT
        )
        load_head(tmp)
    return target
