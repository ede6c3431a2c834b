"""A head's forward through ``torch.compile``, falling back to eager where compilation fails.

Measured on an H100 (docs/RESULTS.md, section 6): the served ``blend`` head's share of inference over a
0.6B backbone fell from 1.9 % to 1.1 % at batch 512 and from 5.5 % to 3.4 % at batch 64, after 1-6 s of
compilation in each process. So it is opt-in (``ucse predict compile_head=true``): worth it for long inputs or
a long-lived process, not for a few texts. On the CPU the mask checks read back to the host
(``Head.host_checks``) and break the graph, so it pays less there (not measured).
"""

from __future__ import annotations

import logging

import torch
import torch._dynamo.exc  # no public base class of the compiler's own errors: see CompiledHead.__call__

from ucse.heads.base import Head, HeadOutput

log = logging.getLogger(__name__)


class CompiledHead:
    """Calls ``torch.compile(head, dynamic=True)`` until compilation fails once, then the head itself.

    Dynamic shapes because every length-sorted batch has its own sequence length: one graph serves them all
    instead of a recompilation per length.

    Args:
        head: the head, in eval mode (its weights are shared, not copied).
    """

    def __init__(self, head: Head) -> None:
        self.head = head
        self.compiled: torch.nn.Module | None = torch.compile(head, dynamic=True)

    def __call__(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """The head's outputs for (B, T, H) states and a (B, T) mask, compiled where the compiler works."""
        if self.compiled is not None:
            try:
                return self.compiled(hidden, mask)
            # The compiler's failures (a backend without a C++ compiler, an unsupported op) all derive from
            # TorchDynamoException; a head's own errors (e.g. a refused mask) are not caught: they surface as
            # they would eagerly.
            except torch._dynamo.exc.TorchDynamoException as err:
                text = str(err).strip()
                reason = text.splitlines()[0][:200] if text else type(err).__name__
                log.warning("torch.compile of the head failed (%s); running it without compilation.", reason)
                self.compiled = None
        return self.head(hidden, mask)
