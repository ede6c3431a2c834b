"""A dequantised copy of a GGUF backbone, so that only the first load pays for parsing and dequantising.

transformers reads a GGUF file by parsing its metadata (config and tokenizer vocabulary) and dequantising
every tensor in Python, which took ~45 s for SmolLM2-135M (Q4_1) on this project's 2-core CPU, on every run,
even when the token states come from the cache. The first load therefore saves the dequantised fp32 weights
(safetensors), the config and the tokenizer with ``save_pretrained`` under
``<UCSE_CACHE_DIR or ~/.cache/ucse>/gguf/<fingerprint hash>/``; later loads read that folder (memory-mapped
safetensors, about a second). The folder is keyed by the model's fingerprint (the GGUF file's content hash;
for a hub repo, the commit its revision resolves to), written into a temporary sibling and renamed, so a
changed or half-written file is never used; a copy that no longer loads is moved away and written again.
``UCSE_GGUF_CACHE=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ucse import atomic
from ucse.backbone.cache_folder import cache_root, discard
from ucse.config import BackboneConfig

if TYPE_CHECKING:  # imported where a copy is loaded (see ucse/backbone/loading.py)
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


def dequantised_dir(fingerprint: str) -> Path | None:
    """Folder of the dequantised copy for a GGUF fingerprint (``None`` when ``UCSE_GGUF_CACHE=0``)."""
    if os.environ.get("UCSE_GGUF_CACHE", "1") == "0":
        return None
    root = cache_root()
    return root / "gguf" / hashlib.sha256(fingerprint.encode()).hexdigest()[:32]


def load_dequantised(
    cfg: BackboneConfig, fingerprint: str
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase] | None:
    """The saved fp32 copy of ``cfg``'s GGUF model and its tokenizer, or ``None`` when there is none (yet)."""
    folder = dequantised_dir(fingerprint)
    if folder is None or not (folder / "complete").is_file():
        return None
    try:
        from transformers import AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(folder, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    # Any failure: safetensors' own SafetensorError (a truncated file) is neither an OSError nor a
    # ValueError, and escaped every handler on every load, since the folder stayed where it was.
    except Exception as err:  # noqa: BLE001
        logger.warning(
            "Rebuilding the unreadable dequantised copy of %s at '%s' (%s).", cfg.gguf_file, folder, err
        )
        try:  # out of sight, as a bad cache entry is, so that save_dequantised writes a new one
            discard(folder.parent, folder, folder.name)
        except OSError:  # a read-only cache: the GGUF is read as is
            pass
        return None
    return model, tokenizer


def save_dequantised(fingerprint: str, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Save the dequantised model and tokenizer for the next load (a read-only cache only logs)."""
    folder = dequantised_dir(fingerprint)
    if folder is None or folder.exists():
        return
    tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir(parents=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "complete").write_text(fingerprint)
        atomic.follow_umask(tmp)  # save_pretrained's safetensors files are 0600
        tmp.rename(folder)
    except (OSError, ValueError) as err:  # ValueError: a model transformers will not serialise
        if not folder.exists():
            logger.warning("Could not save a dequantised copy of the GGUF model to '%s' (%s).", folder, err)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
