"""Whether the Hugging Face hub can be reached: asked once, fast, before a library retries for half a minute.

Without network (or DNS), ``huggingface_hub`` retries every request with back-off (~23 s for a dataset, ~45 s
for a model) and prints each retry twice before failing anyway; one name lookup says the same at once.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
"""The libraries' offline switches: with one on, they read their local cache and ask no network."""


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached, or ``None`` (it may be, or the libraries' offline mode reads a cache).

    One name lookup of the hub's host (``HF_ENDPOINT``'s, else huggingface.co). Offline mode
    (:data:`OFFLINE_ENV`) is left to the libraries, which then read their local cache.
    """
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in OFFLINE_ENV):
        return None
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError as err:
        return f"{host} cannot be reached ({err})"
    return None


def model_unreachable(hub_id: str) -> str | None:
    """Why the model ``hub_id`` cannot be loaded: not in the hub cache and the hub unreachable; else ``None``.

    A cached copy is left to transformers, which falls back to it.
    """
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name  # the cache's own folder naming

    if (Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=hub_id, repo_type="model")).exists():
        return None
    why = hub_unreachable()
    return None if why is None else f"hub id '{hub_id}' is not in the local cache and {why}"
