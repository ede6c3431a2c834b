"""Training: the LightningModule, the DataModule over cached states, and the run orchestration.

The names below load on first use (PEP 562 ``__getattr__``): ``ucse sweep`` checks its variant names with
``ucse.training.variants`` before anything is trained, and importing that must not import Lightning through
this package, or a typo would take seconds to report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ucse.training.preflight import run_dir_for
    from ucse.training.run import RunResult, resolve_device, train

__all__ = ["RunResult", "resolve_device", "run_dir_for", "train"]


def __getattr__(name: str) -> Any:
    if name == "run_dir_for":
        from ucse.training import preflight

        return preflight.run_dir_for
    if name in __all__:
        from ucse.training import run

        return getattr(run, name)
    raise AttributeError(f"module 'ucse.training' has no attribute {name!r}")
