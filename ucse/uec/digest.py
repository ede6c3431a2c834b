"""Cache locations and stable cache keys of the UEC library."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def cache_root() -> Path:
    """Root of the UCSE cache: env ``UCSE_CACHE_DIR``, else ``~/.cache/ucse``."""
    return Path(os.environ.get("UCSE_CACHE_DIR") or Path.home() / ".cache" / "ucse").expanduser()


def stable_digest(obj: object) -> str:
    """24-hex-digit SHA-256 of ``obj``'s sorted JSON: a cache key that survives process restarts."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:24]
