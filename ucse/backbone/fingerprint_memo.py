"""A local model folder's content hash, remembered across processes.

``model_fingerprint`` hashes every weight, config and tokenizer file of a local model (SHA-256), and every
process that loads the model pays it: ``ucse train``, ``predict``, ``eval``, each estimator. SHA-256 runs at
~2 GB/s on these CPUs, before the read: ~1.2 s for a 0.6B model in fp32, ~8 s or more for an 8B one, on every
command. As git's index does for its blobs, the hash is kept beside the files' stat data (size, mtime, ctime,
inode, device), and a later process whose files show exactly the same stat data reuses it. Rewriting a file
changes its ctime and replacing it changes its inode (no user-level tool sets either back), so new content
under the old name is hashed again even with its size and mtime restored. As git does for its "racy" entries,
files changed in the last ``RACY_SECONDS`` are not remembered: on a filesystem with coarse timestamps a second
write within the same tick would leave the stat data as they were.

The memo lives in the cache folder (``<UCSE_CACHE_DIR or ~/.cache/ucse>/fingerprints/``), one small JSON file
per model folder. Read back from disk, it is untrusted: anything but an exact match (folder, GGUF file, every
file's stat data, a well-formed hash) is ignored and the files are hashed again. Like the hidden-state cache
beside it, it guards against stale and corrupt entries, not against someone who can write the cache folder.
``UCSE_FINGERPRINT_MEMO=0`` turns it off; a folder that cannot be written only means the hash is not kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path

from ucse import atomic, json_read
from ucse.backbone.cache_folder import cache_root

logger = logging.getLogger(__name__)

MEMO_ENV = "UCSE_FINGERPRINT_MEMO"
"""``0``: hash the model's files in every process (nothing read from or written to the memo)."""
RACY_SECONDS = 2.0
"""A file whose ctime is this recent is not remembered (FAT-like filesystems keep 2-second timestamps)."""
_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")

Stats = tuple[tuple[str, int, int, int, int, int], ...]
"""Per file, sorted by name: (name, size, mtime_ns, ctime_ns, inode, device)."""


def file_stats(folder: Path, names: list[str]) -> Stats:
    """The stat data that identify the current content of ``folder``'s files ``names``."""
    out = []
    for name in sorted(names):
        st = (folder / name).stat()
        out.append((name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev))
    return tuple(out)


def _memo_path(folder: Path, gguf_file: str | None) -> Path | None:
    if os.environ.get(MEMO_ENV, "1") == "0":
        return None
    # os.fsencode: a path that is not UTF-8 (Latin-1 bytes on Linux) holds surrogates, which .encode() refuses
    key = hashlib.sha256(os.fsencode(f"{folder}\0{gguf_file}")).hexdigest()[:32]
    return cache_root() / "fingerprints" / f"{key}.json"


def recall(folder: Path, gguf_file: str | None, stats: Stats) -> str | None:
    """The fingerprint remembered for exactly these files in exactly this state, else ``None``."""
    path = _memo_path(folder, gguf_file)
    if path is None or not path.is_file():
        return None
    try:
        record = json_read.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        logger.debug("ignoring the fingerprint memo %s (%s)", path, err)
        return None
    if not isinstance(record, dict):
        return None
    fingerprint = record.get("fingerprint")
    same = (
        record.get("folder") == str(folder)
        and record.get("gguf_file") == gguf_file
        and record.get("stats") == [list(s) for s in stats]  # JSON gives lists back
    )
    if same and isinstance(fingerprint, str) and _FINGERPRINT.fullmatch(fingerprint):
        return fingerprint
    return None


def remember(folder: Path, gguf_file: str | None, stats: Stats, fingerprint: str) -> None:
    """Keep ``fingerprint`` for these files in this state; a memo that cannot be written is skipped."""
    path = _memo_path(folder, gguf_file)
    recent = time.time_ns() - int(RACY_SECONDS * 1e9)
    if path is None or any(ctime >= recent for _, _, _, ctime, _, _ in stats):
        return
    record = {"folder": str(folder), "gguf_file": gguf_file, "stats": stats, "fingerprint": fingerprint}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(path, record)
    except OSError as err:
        logger.debug("the fingerprint memo %s was not written (%s)", path, err)
