"""Building a run's config: group files, command-line overrides, merging and (de)serialising.

The schema (the dataclass tree) is ``ucse/config/schema.py``; this module turns ``configs/`` files and
``key=value`` tokens into a validated :class:`~ucse.config.TrainConfig`. ``ucse.config`` re-exports the
public names, so ``from ucse.config import build_config`` is the public import.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from ucse.config.schema import CONFIG_DIR, GROUPS, ConfigError, HeadType, Recipe, TrainConfig

logger = logging.getLogger(__name__)

RENAMED_KEYS: dict[str, str] = {
    "device": "accelerator",
    "head.uncertainty": "head.gaussian",
    "task.text_column": "data.text_column",
    "task.label_column": "data.label_column",
    "task.test_fraction": "task.carved_test_fraction",
}
"""Old spelling (dotted path) -> today's name. The old one is still read for a version: from the command line
with a warning naming the new key, from a run's ``config.yaml`` written by an older ucse silently."""


def renamed_tokens(tokens: list[str], names: set[str] | frozenset[str] | None = None) -> list[str]:
    """``key=value`` tokens with old key spellings replaced by today's (a warning names each).

    Args:
        tokens: command-line tokens.
        names: the command's top-level field names; a rename applies only where the new name's first part is
            one of them (``None``: the train config's).
    """
    names = names if names is not None else {f.name for f in fields(TrainConfig)}
    out = []
    for tok in tokens:
        key, eq, value = tok.partition("=")
        new = RENAMED_KEYS.get(key)
        if eq and new is not None and new.split(".")[0] in names:
            logger.warning("'%s=' is now '%s='; the old spelling goes in a later version", key, new)
            tok = f"{new}={value}"
        out.append(tok)
    return out


def did_you_mean(value: str, choices: list[str] | tuple[str, ...], cutoff: float = 0.5) -> str:
    """Return a ``did you mean 'x'?`` suffix for the closest choice, or an empty string."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=cutoff)
    return f" Did you mean '{close[0]}'?" if close else ""


def parse_enum(cls: type[Enum], value: object, name: str) -> Enum:
    """``cls(value)`` (a member or its value) with an error naming the key, the bad value and the choices.

    The one parser of string choices: train, eval and ensemble configs, heads and UEC scorers use it.

    Raises:
        ConfigError: (a ``ValueError``) ``value`` is none of ``cls``'s values.
    """
    try:
        return cls(value.value if isinstance(value, Enum) else value)
    except ValueError:
        options = [m.value for m in cls]  # type: ignore[attr-defined]
        raise ConfigError(
            f"Invalid value {name}={value!r}; choose one of {options}.{did_you_mean(str(value), options)}"
        ) from None


def group_choices(group: str) -> list[str]:
    """Names of the YAML files available for a config group."""
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def _schema_keys(node: Any, path: str) -> list[str]:
    """Valid keys at a dotted path of the schema (for error messages)."""
    obj: Any = TrainConfig
    for part in [p for p in path.split(".") if p]:
        hit = {f.name: f for f in fields(obj)}.get(part) if is_dataclass(obj) else None
        if hit is None:
            return []
        obj = hit.default_factory() if callable(hit.default_factory) else hit.default  # type: ignore[misc]
    return [f.name for f in fields(obj)] if is_dataclass(obj) else []


def _dotted(suggestion: str, parent: str) -> str:
    """`` Did you mean 'text_column'?`` as the whole key, ``'data.text_column'``, to paste back as it is."""
    return suggestion.replace(" Did you mean '", f" Did you mean '{parent}.") if parent else suggestion


def _explain(err: OmegaConfBaseException, source: str) -> ConfigError:
    """Turn an OmegaConf error into a ConfigError naming the key, the valid choices and a suggestion."""
    key = str(getattr(err, "full_key", "") or getattr(err, "key", "") or "")
    parent, _, leaf = key.rpartition(".")
    if isinstance(err, ConfigKeyError):
        valid = _schema_keys(None, parent)
        return ConfigError(
            f"Unknown config key '{key}' (from {source}). Valid keys under '{parent or '<root>'}': "
            f"{', '.join(valid)}.{_dotted(did_you_mean(leaf, valid), parent)}"
        )
    msg = str(err).splitlines()[0]
    if isinstance(err, ValidationError) and "expected one of" in msg:
        options = msg.split("expected one of", 1)[1].strip(" []").replace("'", "").split(", ")
        bad = msg.split("'")[1] if "'" in msg else ""
        return ConfigError(f"Invalid value for '{key}' (from {source}): {msg}.{did_you_mean(bad, options)}")
    takes = _field_type(key)  # a value of the wrong type: say what the field takes (a trial typed layer=mid)
    hint = (
        f"; {key} takes {takes.replace('None', 'null')} (`ucse train --help` says what it means)"
        if takes
        else ""
    )
    return ConfigError(f"Invalid config at '{key}' (from {source}): {msg}{hint}")


def _field_type(key: str) -> str | None:
    """The annotation of the schema's field at a dotted ``key`` as written (``int | None``), or ``None``."""
    obj: Any = TrainConfig
    hit = None
    for part in [p for p in key.split(".") if p]:
        hit = {f.name: f for f in fields(obj)}.get(part) if is_dataclass(obj) else None
        if hit is None:
            return None
        obj = hit.default_factory() if callable(hit.default_factory) else hit.default  # type: ignore[misc]
    return hit.type if hit is not None and isinstance(hit.type, str) and not is_dataclass(obj) else None


def _merge(base: DictConfig, other: Any, source: str) -> DictConfig:
    try:
        return OmegaConf.merge(base, other)  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        raise _explain(err, source) from None


def group_path(group: str, name: str) -> Path:
    """Where a group choice lives: ``configs/<group>/<name>.yaml``, or a ``.yaml``/``.yml`` path.

    A path lets a config file live outside ``configs/``, e.g. ``task=/abs/path/my_task.yaml``.
    """
    if name.endswith((".yaml", ".yml")):
        return Path(name).expanduser()
    return CONFIG_DIR / group / f"{name}.yaml"


def load_group(group: str, name: str) -> DictConfig:
    """Load ``configs/<group>/<name>.yaml`` or a ``.yaml`` path (a partial root-level config)."""
    path = group_path(group, name)
    if name.endswith((".yaml", ".yml")) and not path.is_file():
        raise ConfigError(
            f"{group}={name}: no such file. Give an existing .yaml path or one of "
            f"{', '.join(group_choices(group))}."
        )
    if not path.is_file():
        choices = group_choices(group)
        raise ConfigError(
            f"Unknown {group} '{name}'. Valid {group} choices: {', '.join(choices)}."
            f"{did_you_mean(name, choices, cutoff=0.4)}"  # 0.4: a trial's head=logistic for logreg
            f" Add configs/{group}/{name}.yaml to define a new one, or give a path: {group}=/path/to/it.yaml."
        )
    try:
        loaded = OmegaConf.load(path)
    except Exception as err:  # yaml syntax errors are not ValueErrors; say which file and where
        raise ConfigError(f"{path} is not valid YAML: {' '.join(str(err).split())}") from None
    if not isinstance(loaded, DictConfig):  # a list merged into the config failed as a raw TypeError
        raise ConfigError(
            f"{group}={name}: {path} holds a {type(loaded).__name__}, not a mapping of keys "
            f"(e.g. '{group}:' with its settings under it)."
        )
    return loaded


def build_config(
    overrides: list[str] | None = None,
    base_file: str = "train.yaml",
    own_data: bool = False,
    source: str = "command line",
) -> TrainConfig:
    """Build a validated ``TrainConfig`` from ``configs/`` plus ``key=value`` overrides.

    With ``data.path`` (or ``own_data``) and no ``task=``, the user's own data is the task: the default task
    YAML is not merged (no hub path, no instruction) and ``task.name`` defaults to the path's stem or folder
    name (``data`` for in-memory data), unless ``task.name=`` is given.

    Args:
        overrides: command-line tokens. ``task=``, ``backbone=`` and ``head=`` select group files;
            everything else is an OmegaConf dotlist override such as ``loss.lcl_weight=0.6``.
        base_file: root YAML file under ``configs/``.
        own_data: the data will be passed in memory (``ucse.training.train(cfg, data=...)``).
        source: where the overrides came from, named in errors (``ucse.train``'s keyword arguments...).

    Returns:
        The merged, type-checked config.

    Raises:
        ConfigError: on an unknown key, group choice or enum value.
    """
    overrides = list(overrides or [])
    for tok in overrides:
        if "=" not in tok:
            raise ConfigError(f"Override '{tok}' is not of the form key=value (e.g. loss.lcl_weight=0.6).")
    overrides = renamed_tokens(overrides)
    cfg: DictConfig = OmegaConf.structured(TrainConfig)
    base = OmegaConf.load(CONFIG_DIR / base_file)
    defaults = base.pop("defaults", None) or {}
    groups: dict[str, str | None] = {g: defaults.get(g) for g in GROUPS}
    cfg = _merge(cfg, base, base_file)
    dotlist = []
    for tok in overrides:
        key, value = tok.split("=", 1)
        if value.strip() == "???":
            raise ConfigError(f"'{key}=???' leaves '{key}' unset; give it a value ({key}=<value>).")
        if key in GROUPS:
            groups[key] = value
        else:
            dotlist.append(tok)
    from ucse.config.checks import parse_dotlist

    cli = _merge(OmegaConf.structured(TrainConfig), parse_dotlist(dotlist), source)
    keys = {t.split("=", 1)[0] for t in overrides}
    own_data = (own_data or cli.data.path is not None) and "task" not in keys
    if own_data:
        # The user's own data: the default task's hub path and instruction must not leak into it.
        groups["task"] = None
    for g in GROUPS:  # backbone, then head, then task: later files win on shared keys
        if groups[g]:
            cfg = _merge(cfg, load_group(g, groups[g]), str(group_path(g, groups[g])))
    cfg = _merge(cfg, parse_dotlist(dotlist), source)
    # Absolute, so eval.py finds the data again from the run's config.yaml wherever it is run.
    if cfg.data.path is not None:
        cfg.data.path = str(Path(cfg.data.path).expanduser().resolve())
    if cfg.data.root:  # (a relative data.root=../shared/data failed from another folder)
        cfg.data.root = str(Path(cfg.data.root).expanduser().resolve())
    if own_data and "task.name" not in keys:
        cfg.task.name = default_task_name(cfg.data.path)
    from ucse.config.checks import leaf_keys, validate_config

    missing = [k for k in leaf_keys(cfg) if OmegaConf.is_missing(cfg, k)]
    if missing:
        raise ConfigError(f"Config key '{missing[0]}' is unset ('???'); give it a value ({missing[0]}=...).")
    typed = to_object(cfg)
    validate_config(typed)
    resolve_group_copies(typed)
    resolve_recipe_head(typed)
    return typed


def resolve_recipe_head(cfg: TrainConfig) -> None:
    """``head=auto`` under ``recipe=paper`` is the paper's TextCNN (so ``--cfg`` shows what trains)."""
    if Recipe(cfg.recipe) is Recipe.paper and HeadType(cfg.head.type) is HeadType.auto:
        cfg.head.type = HeadType.textcnn  # its Table 7 runs keep their folder names


def resolve_group_copies(cfg: TrainConfig) -> None:
    """Set ``data.group_copies=null``: on, off under ``recipe=paper`` (its plain carve: Table 7's rows)."""
    if cfg.data.group_copies is None:
        cfg.data.group_copies = Recipe(cfg.recipe) is not Recipe.paper


IN_MEMORY_TASK = "data"
"""Task name of in-memory data when none is given."""


def default_task_name(path: str | Path | None) -> str:
    """Own data's task name: a file's stem (``reviews.csv`` -> ``reviews``), a folder's name, or ``data``."""
    if path is None:
        return IN_MEMORY_TASK
    p = Path(path)
    return p.stem if p.is_file() else p.name


def to_object(cfg: DictConfig) -> TrainConfig:
    """Convert a merged DictConfig into the typed dataclass tree."""
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, TrainConfig)
    return obj


def to_yaml(cfg: TrainConfig) -> str:
    """Serialise a config (the resolved ``config.yaml`` of a run)."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def from_yaml(path: str | Path) -> TrainConfig:
    """Load a resolved run ``config.yaml`` back into a typed config (unknown keys fail).

    Raises:
        ConfigError: naming the file on a YAML syntax error, a document that is not a mapping of keys, or an
            unknown key / bad value (the file is read back from disk: untrusted).
    """
    try:
        loaded = OmegaConf.load(path)
    except FileNotFoundError:
        raise
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as err:  # OSError: a scalar document
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0][:80]
        raise ConfigError(
            f"{path}{where}: not a valid run config ({problem}); ucse train writes this file: restore it or "
            "retrain."
        ) from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(
            f"{path} must hold a mapping of config keys; ucse train writes it: restore it or retrain."
        )
    for old, new in RENAMED_KEYS.items():  # a run folder written before the rename
        _move_key(loaded, old, new)
    cfg = to_object(_merge(OmegaConf.structured(TrainConfig), loaded, str(path)))
    if cfg.data.group_copies is None:  # written before the setting: its slices were carved plainly
        cfg.data.group_copies = False
    return cfg


def _move_key(root: DictConfig, old: str, new: str) -> None:
    """Move the value at dotted path ``old`` to ``new`` unless ``new`` holds a value already (not null)."""

    def parent(path: str, create: bool) -> tuple[Any, str]:
        *parts, leaf = path.split(".")
        node: Any = root
        for part in parts:
            if isinstance(node, DictConfig) and part not in node and create:
                node[part] = {}
            node = node.get(part) if isinstance(node, DictConfig) else None
        return node, leaf

    src, leaf = parent(old, create=False)
    if not (isinstance(src, DictConfig) and leaf in src):
        return
    value = src.pop(leaf)
    dst, new_leaf = parent(new, create=True)
    if isinstance(dst, DictConfig) and dst.get(new_leaf) is None:
        dst[new_leaf] = value


def parse_flat_config(schema: type, tokens: list[str] | None, what: str, dash_is_text: bool = False) -> Any:
    """``key=value`` tokens of a one-level command config (``eval.py``, ``ucse predict``) -> ``schema``.

    Args:
        schema: the command's config dataclass.
        tokens: the command-line tokens.
        what: the command as named in errors (``eval.py``, ``predict``).
        dash_is_text: read a bare ``-`` (stdin/stdout) as the string, not as YAML's list item.

    Raises:
        ConfigError: a token without ``=``, or an unknown key / bad value, naming the valid keys.
    """
    tokens = list(tokens or [])
    for tok in tokens:
        if "=" not in tok:
            raise ConfigError(f"Argument '{tok}' is not of the form key=value (e.g. run=runs/...).")
    tokens = renamed_tokens(tokens, {f.name for f in fields(schema)})
    if dash_is_text:
        tokens = [f"{t.split('=', 1)[0]}='-'" if t.split("=", 1)[1] == "-" else t for t in tokens]
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.from_dotlist(tokens))
    except OmegaConfBaseException as err:
        key = str(getattr(err, "full_key", "") or "")
        valid = [f.name for f in fields(schema)]
        said = f"Invalid {what} argument '{key}': {str(err).splitlines()[0].split('. Did you mean')[0]}."
        if key in valid:  # a bad value of a known key: the value's message is the whole story
            raise ConfigError(said) from None
        top = key.split(".")[0]
        # a training setting after the run exists (a trial: predict ... backbone=minilm-l6): the run fixed it
        fixed = ""
        if "run" in valid and top == "uncertainty":  # refitted without retraining
            fixed = (
                f" {top} settings are the run's profile's: ucse calibrate run=<run> "
                "uncertainty.<setting>=... changes them."
            )
        elif "run" in valid and top in {f.name for f in fields(TrainConfig)}:
            fixed = f" {top} is the run's own, fixed when it was trained."
        raise ConfigError(
            f"{said}{fixed} Valid keys: {', '.join(valid)}.{did_you_mean(key, valid)}"
        ) from None
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, schema)
    return cfg
