"""Inference: a run as a classifier with uncertainty; the files ``ucse predict`` reads and writes.

``UcseClassifier`` and ``resolve_head_dir`` load on first use (PEP 562 ``__getattr__``): ``ucse predict``
parses its arguments with ``ucse.inference.config``, and importing that must not import torch and
transformers through this package, or a typo would take seconds to report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ucse.inference.classifier import UcseClassifier, resolve_head_dir

__all__ = ["UcseClassifier", "resolve_head_dir"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ucse.inference import classifier

        return getattr(classifier, name)
    raise AttributeError(f"module 'ucse.inference' has no attribute {name!r}")
