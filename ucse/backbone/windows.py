"""Texts longer than the backbone's window, read whole: ``backbone.long_texts=windows``.

A text of more tokens than ``max_length`` is cut into consecutive windows of its content tokens, each
framed by the model's own special tokens (``[CLS] ... [SEP]`` for BERT) and read on its own, positions
from 0; the windows' states are laid back end to end, the framing tokens kept once (the first window's
leading ones, the last window's trailing ones). A text's states then number exactly its untruncated tokens
(up to ``max_windows`` windows), so the head reads the whole text: a TextCNN's max over time finds a
phrase wherever it is, and mean pooling averages over every window. A window sees no context beyond its
own edges, which is what a model of ``max_length`` positions can read at once anyway; the last window is
end-aligned (it overlaps the one before rather than hold a few tokens alone). A pooling that reads one
token (``last``, ``cls``) reads one window: the last one, or the first.
"""

from __future__ import annotations

import numpy as np
import torch

PROBE = "probe"
"""A text to find where a tokenizer's special tokens go around a text."""


def framing(tokenizer) -> tuple[int, int]:
    """(leading, trailing) special tokens the tokenizer puts around one text (BERT: 1, 1; most decoders 0, 0).

    Read by tokenising a probe text with and without the special tokens (the post-processor of a fast
    tokenizer adds them; ``build_inputs_with_special_tokens`` does not always say so).
    """
    bare = list(tokenizer(PROBE, add_special_tokens=False)["input_ids"])
    framed = list(tokenizer(PROBE)["input_ids"])
    for lead in range(len(framed) - len(bare) + 1):
        if framed[lead : lead + len(bare)] == bare:
            return lead, len(framed) - lead - len(bare)
    return 0, 0  # no bare copy inside: nothing to repeat around a window


def window_rows(
    rows: list[dict[str, list[int]]], lead: int, trail: int, max_length: int
) -> tuple[list[dict[str, list[int]]], list[int], list[int]]:
    """Each text's unpadded tokenizer row cut into windows of at most ``max_length`` tokens.

    Args:
        rows: B texts as the tokenizer returns them unpadded (``input_ids`` and the other outputs).
        lead: special tokens before each text (:func:`framing`), repeated before every window.
        trail: special tokens after each text, repeated after every window.
        max_length: tokens per window, framing included (> lead + trail).

    Returns:
        (the windows, in text order; ``owner``: for each window, the position of its text in ``rows``;
        ``repeat``: for each window, how many of its first content tokens the window before it holds). A
        text that fits is its own single window, unchanged. A text's last window is always full: it ends at
        the text's end and reaches back over the window before it (``repeat`` > 0) rather than hold a few
        tokens alone (a lone EOS read by itself would be the same state for every text of that length).
    """
    step = max_length - lead - trail
    if step < 1:
        raise ValueError(f"max_length={max_length} leaves no room inside {lead} + {trail} special tokens")
    out: list[dict[str, list[int]]] = []
    owner: list[int] = []
    repeat: list[int] = []
    for b, row in enumerate(rows):
        n = len(row["input_ids"])
        if n <= max_length:
            out.append(row)
            owner.append(b)
            repeat.append(0)
            continue
        end = n - trail  # the content is row[lead:end], longer than one window's step
        starts = list(range(lead, end, step))
        last = end - step  # the last window, full and ending at the text's end
        for i, start in enumerate(starts[:-1] + [last]):
            out.append({k: v[:lead] + v[start : start + step] + v[end:] for k, v in row.items()})
            owner.append(b)
            repeat.append(starts[-2] + step - last if i == len(starts) - 1 else 0)
    return out, owner, repeat


def stitch(
    hidden: torch.Tensor,
    mask: torch.Tensor,
    windows: tuple[list[int], list[int]],
    lead: int,
    trail: int,
    left_pad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The windows' states laid back end to end per text: the framing once, every window's content.

    Args:
        hidden: (W, Tw, H) states of the windows, zeros at pads.
        mask: (W, Tw) 1 for real tokens.
        windows: (owner, repeat) of :func:`window_rows`: each window's text (consecutive per text) and its
            first content tokens that the window before it holds (dropped: the earlier window's are kept).
        lead: special tokens before each window's content.
        trail: special tokens after each window's content.
        left_pad: pad the texts on the left (the tokenizer's side), else on the right.

    Returns:
        hidden (B, T, H) with zeros at pads and mask (B, T), T the longest text's total tokens.
    """
    keep = mask.bool()
    owners, repeat = np.asarray(windows[0]), windows[1]
    texts: list[torch.Tensor] = []
    for b in range(int(owners.max()) + 1 if len(owners) else 0):
        ws = np.flatnonzero(owners == b)
        parts = [hidden[w][keep[w]] for w in ws]  # (len_w, H) each, real tokens in order
        if len(parts) == 1:
            texts.append(parts[0])
            continue
        body = [p[lead + repeat[w] : len(p) - trail] for w, p in zip(ws, parts)]  # each window's new content
        texts.append(torch.cat([parts[0][:lead], *body, parts[-1][len(parts[-1]) - trail :]]))
    longest = max(len(t) for t in texts)
    out = hidden.new_zeros(len(texts), longest, hidden.shape[-1])  # (B, T, H)
    out_mask = mask.new_zeros(len(texts), longest)  # (B, T)
    for b, t in enumerate(texts):
        span = slice(longest - len(t), longest) if left_pad else slice(0, len(t))
        out[b, span] = t
        out_mask[b, span] = 1
    return out, out_mask
