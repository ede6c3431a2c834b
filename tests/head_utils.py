"""Shared helpers of the head tests (a uniquely named module, not a conftest)."""

import torch


def pad_batch(items, side, fill=1e4):
    """Stack (L_i, H) sequences into (B, T, H) with `side` padding; pads hold a large value that would win
    any unmasked max and shift any unmasked mean."""
    t = max(len(x) for x in items)
    h = items[0].shape[1]
    hidden = torch.full((len(items), t, h), fill)
    mask = torch.zeros(len(items), t, dtype=torch.long)
    for i, x in enumerate(items):
        sl = slice(0, len(x)) if side == "right" else slice(t - len(x), t)
        hidden[i, sl] = x
        mask[i, sl] = 1
    return hidden, mask


def make_seqs(hidden=8, lengths=(7, 2, 4, 1, 5)):
    """Random (L, H) sequences; the lengths straddle the TextCNN kernel sizes 3..5."""
    g = torch.Generator().manual_seed(0)
    return [torch.randn(n, hidden, generator=g) for n in lengths]


def resign(head_dir):
    """Rewrite a head folder's manifest after a test edited its files.

    As a tamperer who knows the format would: the loaders' own field checks (not the checksum) must then
    catch the bad value.
    """
    from pathlib import Path

    from ucse.heads.io import ARTIFACTS
    from ucse.heads.manifest import write_manifest

    write_manifest(Path(head_dir), ARTIFACTS)
