"""Cache locations and stable cache keys of the UEC library."""

from __future__ import annotations

import hashlib
import json

from ucse.backbone.cache_folder import cache_root  # noqa: F401  (the one rule, re-exported for uec)


def stable_digest(obj: object) -> str:
    """24-hex-digit SHA-256 of ``obj``'s sorted JSON: a cache key that survives process restarts."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:24]
