"""``ucse cache``: what the hidden-state cache holds, and removing what no run reads any more.

Usage:
    ucse cache                                  # list the entries, least recently used first, and the total
    ucse cache prune unused_days=30             # remove the entries no run has read for 30 days
    ucse cache prune max_gb=20 dry_run=true     # which least recently used entries would go to fit in 20 GB

Every run keeps the token states of each (backbone, task, split, texts...) it trains on in the cache
folder (``cache.dir``, else env ``UCSE_CACHE_DIR``, else ``~/.cache/ucse``) and nothing is ever removed by
itself. The listing gives, per entry, when a run last read it, its size, texts, split, backbone fingerprint
and task. ``prune`` removes entries (a later run that needs one builds it again: one backbone pass) unused
for more than ``unused_days``, then the least recently used until the rest fit in ``max_gb`` (GiB);
``dry_run=true`` lists them and removes nothing. Only entry folders are removed (a 64-hex name with its own
``meta.json``); anything else in the folder, and the dequantised GGUF copies, fingerprints and stores kept
beside them, is counted apart and left alone. Options: ``dir=`` (another cache folder), ``unused_days=``,
``max_gb=``, ``dry_run=``.
"""

from __future__ import annotations

from ucse.cli import run_cli
from ucse.cli.help import show, wants_help
from ucse.config import ConfigError, did_you_mean

KEYS = ("dir", "unused_days", "max_gb", "dry_run")
OTHER = {
    "uec/": " (ensembles' member caches: rebuilt when missing, so the folder may be deleted)",
    "gguf/": " (dequantised GGUF copies: rebuilt when missing)",
}
"""What the cache folder's known non-entry folders hold, for the listing."""


def _number(opts: dict[str, str], key: str) -> float | None:
    """``opts[key]`` as a number (``None`` when not given), checked as the prune checks its limits."""
    from ucse.backbone.cache_entries import check_limit

    if key not in opts:
        return None
    try:
        value = float(opts[key])
        check_limit(key, value)
    except ValueError:
        raise ConfigError(f"{key}={opts[key]}: give a number >= 0 (e.g. {key}=30).") from None
    return value


def main(argv: list[str]) -> int:
    """List the cache's entries, or prune them (``prune`` first)."""
    if wants_help(argv):
        return show(__doc__.strip())

    def body() -> int:
        pruning = bool(argv) and argv[0] == "prune"
        opts: dict[str, str] = {}
        for tok in argv[1:] if pruning else argv:
            key, eq, value = tok.partition("=")
            allowed = KEYS if pruning else ("dir",)
            if key not in allowed and key in KEYS and eq and value:  # a prune option without prune
                raise ConfigError(f"{key}= goes with prune: ucse cache prune {tok} (the listing takes dir=).")
            if key not in allowed or not eq or not value:
                hint = did_you_mean(key, [*allowed, "prune"]) if key not in allowed else ""
                usage = "ucse cache [dir=...] or ucse cache prune unused_days=N max_gb=N [dry_run=true]"
                raise ConfigError(f"cache takes: {usage}; got '{tok}'.{hint}")
            opts[key] = value
        unused_days, max_gb = _number(opts, "unused_days"), _number(opts, "max_gb")
        dry = opts.get("dry_run", "false").lower()
        if dry not in ("true", "false"):
            raise ConfigError(f"dry_run={opts['dry_run']}: give true or false.")
        if pruning and unused_days is None and max_gb is None:
            raise ConfigError(
                "cache prune needs unused_days=<days> or max_gb=<GiB> (or both); nothing was removed."
            )
        from ucse.backbone.cache_entries import describe, human_bytes, list_entries, prune
        from ucse.backbone.cache_folder import check_cache_root

        root = check_cache_root(opts.get("dir"), given_as="dir")
        if not root.exists():
            print(f"{root}: no cache folder (nothing cached there yet).")
            return 0
        if pruning:
            max_bytes = None if max_gb is None else max_gb * 2**30
            done = prune(root, unused_days, max_bytes, dry_run=dry == "true")  # lists the entries itself
            for entry in done.removed:
                print(describe(entry))
            verb = "would remove" if dry == "true" else "removed"
            freed = human_bytes(sum(e.bytes for e in done.removed))
            kept = f"; kept {len(done.kept)} that a run holds open or read meanwhile" if done.kept else ""
            temps = (
                f"; {verb} {len(done.temps)} folders of builds whose process is dead" if done.temps else ""
            )
            print(f"{root}: {verb} {len(done.removed)} of {done.listed} entries ({freed}){kept}{temps}.")
            return 0
        entries, other = list_entries(root)
        print(f"{'last used (UTC)':<16}  {'size':>12}  {'texts':>8}  {'split':<10}  {'backbone':<15}  task")
        for entry in entries:
            print(describe(entry))
        total = human_bytes(sum(e.bytes for e in entries))
        big = sorted(other.items(), key=lambda kv: -kv[1])[:4]
        parts = ", ".join(f"{name} {human_bytes(n)}{OTHER.get(name, '')}" for name, n in big)
        print(
            f"{root}: {len(entries)} entries, {total}; other files {human_bytes(sum(other.values()))} (never "
            f"pruned{': ' + parts if parts else ''}). Remove unused entries: `ucse cache prune "
            "unused_days=30` or max_gb=N (dry_run=true)."
        )
        return 0

    return run_cli(body)
