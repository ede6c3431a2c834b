"""A head's inference forward replayed as CUDA graphs, one per padded batch shape.

Why: over a 0.6B backbone at batch 64 the served ``blend`` head added 6.8 % to inference on an H200
(docs/RESULTS.md, section 6) while its arithmetic is a fraction of that: its ~100 eager operations are
launched one by one from Python after the backbone's own launches, and at small batches the device waits on
the launches. A CUDA graph replays all of them with one launch. ``torch.compile`` (``ucse.heads.compiled``)
also cuts them, but costs seconds of compilation per process; a graph is captured in milliseconds from the
eager kernels, so the same kernels (and, in the same padded shape, the same outputs to the bit) serve every
prediction.

Shapes: a graph replays fixed shapes, and the backbone's batches vary in rows (the last batch) and in length
(length-sorted batches). Rows are padded up to a power of two and lengths up to the next of 8, 12, 16, 24,
32, 48, ... (at most half again), the added rows all-real zero states, the added positions zero and masked:
every head masks its pads and pools per row, so a row's outputs do not depend on the padding (tested for
every head type in ``tests/heads/test_graphed.py``). At most ``MAX_GRAPHS`` shapes are captured; further
shapes run eagerly.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import torch

from ucse.heads.base import Head, HeadOutput

log = logging.getLogger(__name__)

MAX_GRAPHS = 48
"""Shapes captured per head (10 row buckets up to 512 rows x the length buckets a run meets)."""


def padded_rows(b: int) -> int:
    """The row bucket of a batch of ``b`` rows: the next power of two."""
    return 1 << max(0, b - 1).bit_length()


def padded_length(t: int) -> int:
    """The length bucket of ``t`` positions: the next of 8, 12, 16, 24, 32, 48, ... (2^k and 1.5 x 2^k)."""
    size = 8
    while size < t:
        size = size * 3 // 2 if size & (size - 1) == 0 else size // 3 * 4  # 2^k -> 1.5 x 2^k -> 2^(k+1)
    return size


def pad_batch(
    hidden: torch.Tensor, mask: torch.Tensor, rows: int, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, length, H) states, (rows, length) mask: the batch, zero masked pads after it, real zero rows.

    Args:
        hidden: (B, T, H) states.
        mask: (B, T) 1 for real tokens.
        rows: rows of the result, >= B.
        length: positions of the result, >= T.
    """
    b, t, h = hidden.shape
    out = hidden.new_zeros(rows, length, h)
    out[:b, :t] = hidden
    m = mask.new_ones(rows, length)  # the added rows: every position real (zero states; no empty-row NaN)
    m[:b, t:] = 0
    m[:b, :t] = mask
    return out, m


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    hidden: torch.Tensor  # (rows, length, H) the static input the graph reads
    mask: torch.Tensor  # (rows, length)
    out: HeadOutput  # the static outputs the graph writes


class GraphedHead:
    """Runs an eval-mode head on CUDA through captured graphs, and eagerly everywhere else.

    A graph is captured for each (rows, length) bucket on first use, under the caller's autocast dtype (the
    autocast weight cache is off during capture: a cached cast would be freed after the caller's autocast
    region while the graph still read it). Graphs share one memory pool: they run one at a time on one stream,
    and each keeps its static outputs allocated, so none overwrites another's. Where capture fails (an
    operation a graph cannot hold), the head runs eagerly from then on, with one warning.

    Args:
        head: the head, in eval mode (its weights are shared, not copied; replaced weights drop the graphs).
    """

    def __init__(self, head: Head) -> None:
        self.head = head
        self.graphs: dict[tuple, _Graph] = {}
        self.pool = None
        self.failed = False
        self._weights = self._weight_ptrs()

    def _weight_ptrs(self) -> tuple[int, ...]:
        return tuple(t.data_ptr() for t in (*self.head.parameters(), *self.head.buffers()))

    def __call__(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """The head's outputs for (B, T, H) states and a (B, T) mask: replayed on CUDA, else eager."""
        if self.failed or not hidden.is_cuda or self.head.training or torch.is_grad_enabled():
            return self.head(hidden, mask)
        if self._weight_ptrs() != self._weights:  # weights moved or replaced: the graphs read the old ones
            self.graphs, self.pool, self._weights = {}, None, self._weight_ptrs()
        b, t, _ = hidden.shape
        autocast = torch.is_autocast_enabled("cuda")
        dtype = torch.get_autocast_dtype("cuda")
        key = (padded_rows(b), padded_length(t), hidden.dtype, mask.dtype, autocast, dtype)
        g = self.graphs.get(key)
        if g is None:
            if len(self.graphs) >= MAX_GRAPHS:
                return self.head(hidden, mask)
            g = self._capture(hidden, mask, key)
            if g is None:
                return self.head(hidden, mask)
        # (B, T) of the static (rows, length) input; the pads after T zero and masked, as the eager head sees
        # them (a longer batch of the same bucket wrote there before); rows past B are discarded below
        g.hidden[:b, :t].copy_(hidden)
        g.hidden[:b, t:].zero_()
        g.mask[:b, :t].copy_(mask)
        g.mask[:b, t:].zero_()
        g.graph.replay()
        outs = (getattr(g.out, f.name) for f in dataclasses.fields(g.out))
        # copies: the next replay overwrites the static outputs
        return HeadOutput(*(None if x is None else x[:b].clone() for x in outs))

    def _capture(self, hidden: torch.Tensor, mask: torch.Tensor, key: tuple) -> _Graph | None:
        rows, length, *_, autocast, dtype = key
        static_h, static_m = pad_batch(hidden, mask, rows, length)
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            cast = torch.autocast("cuda", dtype, enabled=autocast, cache_enabled=False)
            with torch.cuda.stream(side), cast:
                for _ in range(2):  # warm-up off the capture: cuDNN/cuBLAS choose their kernels here
                    self.head(static_h, static_m)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            cast = torch.autocast("cuda", dtype, enabled=autocast, cache_enabled=False)
            with torch.cuda.graph(graph, pool=self.pool), cast:
                out = self.head(static_h, static_m)
        # A capture's failures come as RuntimeError (an operation that syncs or allocates on the host while
        # capturing); the head's own errors on these inputs would have surfaced in the warm-up the same way.
        except RuntimeError as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            log.warning("CUDA graph capture of the head failed (%s); running it without graphs.", reason)
            self.failed = True
            return None
        self.pool = graph.pool()
        g = self.graphs[key] = _Graph(graph, static_h, static_m, out)
        return g
