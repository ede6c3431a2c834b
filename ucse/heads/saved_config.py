"""The ``config.json`` of a saved head, read as untrusted input: every field typed and bounded before use.

A head is rebuilt from these numbers, so a file asking for ``hidden_size=10**9`` or ``kernel_sizes=[10**6]``
must fail here, naming the field and its allowed range, before any tensor is sized from it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ucse.config import HeadConfig, HeadType
from ucse.heads.meta import check_label_names

FORMAT_VERSION = 1
MAX_WIDTH = 1 << 20
"""Upper bound of every width read from a head's config.json (H, C, D, filters): a file asking for more is
refused before anything is built (the widest backbones today have H = 16384)."""
MAX_KERNEL = 1 << 12
"""Upper bound of a TextCNN kernel size (in tokens) and of the number of kernel sizes."""
REEXPORT = "re-export the head (retrain it with ucse train)"
_REQUIRED = ("format_version", "head", "hidden_size", "num_classes", "pooling", "meta")


def _is_int(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high  # bool is not an int here


def _width(value: Any) -> bool:
    return value is None or _is_int(value, 1, MAX_WIDTH)


def _kernels(value: Any) -> bool:
    return (
        isinstance(value, list)
        and 1 <= len(value) <= MAX_KERNEL
        and all(_is_int(k, 1, MAX_KERNEL) for k in value)
    )


WIDTH = f"null or an integer in [1, {MAX_WIDTH}]"
_HEAD_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "type": (lambda v: isinstance(v, str), "a head type name"),
    "gaussian": (lambda v: type(v) is bool, "true or false"),
    "kernel_sizes": (_kernels, f"a list of 1 to {MAX_KERNEL} integers in [1, {MAX_KERNEL}]"),
    "num_filters": (_width, WIDTH),
    "embed_dim": (_width, WIDTH),
    "dropout": (lambda v: type(v) in (int, float) and math.isfinite(v) and 0 <= v < 1, "a number in [0, 1)"),
    "mlp_hidden": (_width, WIDTH),
    "logreg_max_iter": (lambda v: type(v) is int and v >= 1, "an integer >= 1"),
    "logreg_folds": (lambda v: type(v) is int and 2 <= v <= 100, "an integer in [2, 100]"),
    "normalize_states": (lambda v: type(v) is bool, "true or false"),
}
"""Type and range of every ``head`` field of config.json."""


def _head_config(fields: Any, path: Path) -> HeadConfig:
    """Rebuild a HeadConfig from its JSON dict, rejecting unknown, missing or out-of-range fields by name."""
    if not isinstance(fields, dict):
        raise ValueError(f"{path}: field 'head' must be an object, got {type(fields).__name__}; {REEXPORT}.")
    if "uncertainty" in fields and "gaussian" not in fields:  # the field's name before ucse renamed it
        fields = {("gaussian" if k == "uncertainty" else k): v for k, v in fields.items()}
    known = {f.name for f in dataclasses.fields(HeadConfig)}
    unknown = sorted(set(fields) - known)
    if unknown or "type" not in fields:
        raise ValueError(
            f"{path}: field 'head' has unknown keys {unknown} (or no 'type') for this ucse version "
            f"(valid: {sorted(known)}); re-export the head with this version."
        )
    # A head saved by an older version lacks the fields added since; they take their defaults, which are
    # the values those versions used.
    defaults = dataclasses.asdict(HeadConfig())
    fields = {**{k: v.value if hasattr(v, "value") else v for k, v in defaults.items()}, **fields}
    for name, (ok, allowed) in _HEAD_FIELDS.items():
        if not ok(fields[name]):
            raise ValueError(
                f"{path}: field 'head.{name}' is {shown(fields[name])}, allowed: {allowed}; {REEXPORT}."
            )
    try:
        return HeadConfig(**{**fields, "type": HeadType(fields["type"])})
    except ValueError:
        raise ValueError(
            f"{path}: field 'head.type' is '{fields['type']}', valid: {', '.join(t.value for t in HeadType)}."
        ) from None


def shown(value: Any) -> str:
    """A value for a message: its repr cut to 60 characters, with its JSON type for strings, bools, null."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    kind = _SCALAR_KINDS.get(type(value))  # a quoted number or a boolean looks right unless its type is named
    return f"{text} (a {kind})" if kind else text


_SCALAR_KINDS = {str: "string", bool: "boolean", type(None): "null"}


def read_config(cfg_path: Path) -> tuple[dict[str, Any], HeadConfig]:
    """config.json parsed, every field checked (types, format version, bounded sizes, label names).

    Returns:
        ``(config, head config)``: the JSON object and its ``head`` field as a :class:`HeadConfig`.

    Raises:
        ValueError: naming the file, the field, its value and what is allowed.
    """
    try:
        config = json.loads(cfg_path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"{cfg_path} is not valid JSON ({err}); {REEXPORT}.") from None
    if not isinstance(config, dict):
        raise ValueError(f"{cfg_path} must hold a JSON object; {REEXPORT}.")
    missing = [k for k in _REQUIRED if k not in config]
    if missing:
        raise ValueError(f"{cfg_path} lacks field(s) {missing}; {REEXPORT}.")
    version = config["format_version"]
    if type(version) is not int:
        raise ValueError(
            f"{cfg_path}: field 'format_version' is {shown(version)}, not a JSON integer: this ucse reads "
            f"format_version {FORMAT_VERSION} (the number, unquoted); {REEXPORT}."
        )
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{cfg_path}: field 'format_version' is {version}, this ucse reads only {FORMAT_VERSION}; "
            "re-export the head with this ucse version."
        )
    for key, low in (("hidden_size", 1), ("num_classes", 2)):
        if not _is_int(config[key], low, MAX_WIDTH):
            raise ValueError(
                f"{cfg_path}: field '{key}' is {shown(config[key])}, allowed: an integer in "
                f"[{low}, {MAX_WIDTH}]; {REEXPORT}."
            )
    if not isinstance(config["pooling"], str):
        raise ValueError(f"{cfg_path}: field 'pooling' is {shown(config['pooling'])}; {REEXPORT}.")
    if not isinstance(config["meta"], dict):
        raise ValueError(f"{cfg_path}: field 'meta' must be an object; {REEXPORT}.")
    check_label_names(config["meta"], config["num_classes"], cfg_path)
    return config, _head_config(config["head"], cfg_path)
