"""The ``meta`` fields of a saved head's ``config.json`` that ucse itself reads, checked as untrusted input.

``label_names`` names the logits (one unique string per class, in logit order: duplicates would merge two
classes' probabilities under one key, a string would be read letter by letter), ``label_type`` says whether
the labels were integer ids in the data (``"int"``: the names are their decimal forms) or names (``"str"``,
also when absent), and ``backbone`` names the
model whose token states the head was trained on (fields of :class:`ucse.config.BackboneConfig`), with
``instruction`` for its prompt. Every other ``meta`` key is the caller's and is returned as saved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ucse.config import BackboneConfig

MAX_TOKENS = 1 << 24
"""Upper bound of the token counts a stored backbone config may ask for (``max_length``, batch sizes)."""
REEXPORT = "re-export the head with this ucse version (ucse train)"

_RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "max_length": (lambda v: 1 <= v <= MAX_TOKENS, f"an integer in [1, {MAX_TOKENS}]"),
    "batch_size": (lambda v: v is None or 1 <= v <= MAX_TOKENS, f"null or an integer in [1, {MAX_TOKENS}]"),
    "max_batch_tokens": (lambda v: 1 <= v <= MAX_TOKENS, f"an integer in [1, {MAX_TOKENS}]"),
    "prompt": (lambda v: "{text}" in v, "a template containing {text}"),
    "layer": (lambda v: v is None or -1024 <= v <= 1024, "null or an integer in [-1024, 1024]"),
    "max_windows": (lambda v: 1 <= v <= 4096, "an integer in [1, 4096]"),
}


LABEL_TYPES = ("str", "int")
"""``meta.label_type``: labels that were names, or integer ids (given back as integers)."""


def check_label_names(meta: dict[str, Any], num_classes: int, where: Path) -> None:
    """``meta.label_names``: ``num_classes`` unique non-empty strings (when present); ``label_type`` checked.

    ``label_type`` must be one of :data:`LABEL_TYPES`, and with ``"int"`` every name the decimal form of an
    integer.

    Raises:
        ValueError: naming the file, the value and the fix.
    """
    kind = meta.get("label_type", "str")
    if kind not in LABEL_TYPES:
        raise ValueError(
            f"{where}: meta.label_type is {repr(kind)[:40]}, expected one of {list(LABEL_TYPES)}; {REEXPORT}."
        )
    if "label_names" not in meta:
        return  # a head saved without names: the classes are named by their ids
    names = meta["label_names"]
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        shown = repr(names)[:80]
        raise ValueError(
            f"{where}: meta.label_names must be a list of non-empty strings (one per class), got {shown}; "
            f"{REEXPORT}."
        )
    if len(names) != num_classes:
        raise ValueError(
            f"{where}: meta.label_names holds {len(names)} names but the head has num_classes={num_classes} "
            f"outputs; {REEXPORT}."
        )
    twice = sorted(n for n, count in Counter(names).items() if count > 1)
    if twice:
        raise ValueError(
            f"{where}: meta.label_names repeats {twice[:5]} (each class needs its own name, or two classes' "
            f"probabilities merge under one key); {REEXPORT}."
        )
    odd = [n for n in names if kind == "int" and not _is_decimal(n)]
    if odd:
        raise ValueError(
            f"{where}: meta.label_type is 'int' but meta.label_names has {repr(odd[0])[:40]}, not the "
            f"decimal form of a 64-bit integer; {REEXPORT}."
        )


def _is_decimal(name: str) -> bool:
    """Whether ``name`` is an int64's decimal form (``"-3"``, ``"10"``; not ``"03"``, ``"1.0"``, 2**64)."""
    try:
        value = int(name)
    except ValueError:
        return False
    return str(value) == name and -(2**63) <= value < 2**63  # classes_ hold them as int64


def label_values(meta: dict[str, Any]) -> list[str] | list[int]:
    """The saved labels as the data had them: ``meta.label_names``, as ints where ``label_type`` is ``int``.

    ``meta`` must have passed :func:`check_label_names`.
    """
    names = list(meta.get("label_names", []))
    return [int(n) for n in names] if meta.get("label_type") == "int" else names


def stored_backbone(meta: dict[str, Any], where: Path) -> dict[str, Any]:
    """``meta.backbone`` checked against :class:`BackboneConfig`: known keys, right types, sane ranges.

    Returns:
        The stored fields, as saved (the caller merges its own overrides over them).

    Raises:
        ValueError: on a missing or non-object ``backbone``, an unknown key, or a bad value; naming the file.
    """
    stored = meta.get("backbone")
    if not isinstance(stored, dict):
        got = "no meta.backbone" if stored is None else f"meta.backbone of type {type(stored).__name__}"
        raise ValueError(
            f"{where} has {got}: the head does not say which backbone it was trained on; {REEXPORT}."
        )
    known = list(BackboneConfig.__dataclass_fields__)
    unknown = sorted(str(k) for k in stored if k not in known)
    if unknown:
        raise ValueError(
            f"{where}: meta.backbone has unknown key(s) {unknown} (known: {', '.join(known)}); remove "
            f"them or {REEXPORT}."
        )
    try:
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(BackboneConfig), stored))
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        reason = str(getattr(err, "msg", err)).splitlines()[0]  # OmegaConf appends full_key/object_type lines
        raise ValueError(
            f"{where}: meta.backbone.{key}={stored.get(key)!r} is invalid ({reason}); {REEXPORT}."
        ) from None
    for key, (ok, allowed) in _RANGES.items():
        value = getattr(cfg, key)
        if not ok(value):
            raise ValueError(
                f"{where}: meta.backbone.{key}={value!r} is out of range (allowed: {allowed}); {REEXPORT}."
            )
    if cfg.long_texts.value == "windows" and (cfg.prompt != "{text}" or cfg.skip_prompt_prefix):
        raise ValueError(  # as the config check refuses it: only the first window would hold the prompt
            f"{where}: meta.backbone.long_texts=windows with a prompt around {{text}} ({cfg.prompt!r}) is no "
            f"setting ucse trains; {REEXPORT}."
        )
    return dict(stored)


def stored_instruction(meta: dict[str, Any], where: Path) -> str:
    """``meta.instruction`` (the task instruction of instruction-style prompts): a string, ``""`` if absent.

    Raises:
        ValueError: when it is not a string, naming the file.
    """
    value = meta.get("instruction", "")
    if not isinstance(value, str):
        raise ValueError(
            f"{where}: meta.instruction is {repr(value)[:60]}, expected a string (the task instruction); "
            f"{REEXPORT}."
        )
    return value
