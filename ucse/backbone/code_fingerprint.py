"""The identity of a local model's own Python code, where ``trust_remote_code`` runs it (a cache-key part)."""

from __future__ import annotations

import hashlib

from ucse.backbone.loading import check_local, resolve_model_path
from ucse.config import BackboneConfig


def code_fingerprint(cfg: BackboneConfig) -> str | None:
    """``sha256:<hex>`` over a local model folder's ``*.py`` files where ``trust_remote_code`` runs them.

    With remote code the folder's ``modeling_*.py`` is what the model computes: the token-state cache keys
    on it (an edited file served the old states). ``None`` without remote code (transformers ignores the
    files), for hub ids, and for a folder without Python files. Kept out of :func:`model_fingerprint`, which
    heads record at training: a head's weights identity does not change with the recipe of this key.
    """
    if not cfg.trust_remote_code:
        return None
    folder = check_local(cfg, resolve_model_path(cfg.model))
    if folder is None:
        return None
    files = sorted(p for p in folder.glob("*.py") if p.is_file())
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return f"sha256:{digest.hexdigest()}"
