"""Typed run configuration: schema, building, checks and the uncertainty-profile settings.

The schema (``schema``), building it from ``configs/`` and ``key=value`` tokens (``build``), its value
checks (``checks``) and the uncertainty-profile settings (``uncertainty``).

``from ucse.config import TrainConfig, build_config`` is the public import; the submodules import one
another directly (never this package), so the package has no import circle.
"""

from ucse.config.build import (
    IN_MEMORY_TASK,
    RENAMED_KEYS,
    build_config,
    default_task_name,
    did_you_mean,
    from_yaml,
    group_choices,
    group_path,
    load_group,
    parse_enum,
    parse_flat_config,
    to_object,
    to_yaml,
)
from ucse.config.env import DEBUG_ENV, debug_mode
from ucse.config.schema import (
    CONFIG_DIR,
    GROUPS,
    BackboneConfig,
    CacheConfig,
    CacheDtype,
    ConfigError,
    ContrastiveType,
    DataConfig,
    Device,
    HeadConfig,
    HeadType,
    LossConfig,
    OptimConfig,
    PaddingSide,
    Pooling,
    Precision,
    ProfilerType,
    Recipe,
    Strategy,
    TaskConfig,
    TaskType,
    TrainConfig,
)

__all__ = [
    "DEBUG_ENV",
    "debug_mode",
    "CONFIG_DIR",
    "GROUPS",
    "IN_MEMORY_TASK",
    "RENAMED_KEYS",
    "parse_enum",
    "BackboneConfig",
    "CacheConfig",
    "CacheDtype",
    "ConfigError",
    "ContrastiveType",
    "DataConfig",
    "Device",
    "HeadConfig",
    "HeadType",
    "LossConfig",
    "OptimConfig",
    "PaddingSide",
    "Pooling",
    "Precision",
    "ProfilerType",
    "Recipe",
    "Strategy",
    "TaskConfig",
    "TaskType",
    "TrainConfig",
    "build_config",
    "default_task_name",
    "did_you_mean",
    "from_yaml",
    "group_choices",
    "group_path",
    "load_group",
    "parse_flat_config",
    "to_object",
    "to_yaml",
]
