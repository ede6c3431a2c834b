"""The paper's uncertainty-aware TextCNN head (Sec. 4, Sec. 5.3, Table 6)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ucse.heads.base import Head, HeadOutput, check_shapes, raise_empty_rows
from ucse.heads.bottleneck import GaussianBottleneck


class GaussianTextCNN(Head):
    """Multi-kernel TextCNN over frozen token states, masked max-pool, Gaussian bottleneck.

    For each kernel size k a ``Conv1d(H, num_filters, k)`` slides over time, followed by ReLU and a max over
    the *valid* windows only; the pooled maps are concatenated to (B, len(kernel_sizes) * num_filters), then
    dropout, the mu / log-variance branches (``Linear(3H, D)`` each) and the classifier ``Linear(D, C)``.
    With H = 1024, k = (3, 4, 5), num_filters = D = H this is 19.0M trainable parameters (Table 6).

    Masking: a window is valid when it lies entirely on real tokens, i.e. it starts at
    ``t in [first, last - k + 1]`` (first/last = indices of the first/last real token), exactly the windows an
    unpadded, un-batched sequence would have, so the output does not depend on padding side or amount.
    Invalid windows are set to -inf before the max so that padding never wins. A sequence shorter than k has
    no such window; it keeps the single window starting at ``first``, which covers all its tokens plus zeroed
    padding. For that window to exist for left-padded rows too (where ``first`` may be T - 1), the time axis
    is extended on the right with zero columns, just as far as the furthest such window reaches. Padding
    positions are zeroed in ``hidden`` first so their (arbitrary) backbone states never enter a window.

    Args:
        hidden_size: H of the backbone.
        num_classes: C.
        kernel_sizes: convolution widths.
        num_filters: filters per kernel size; ``None`` means H.
        embed_dim: D; ``None`` means H.
        uncertainty: UCL variance branch.
        dropout: dropout on the concatenated pooled features.
    """

    def __init__(
        self,
        hidden_size: int,
        num_classes: int,
        kernel_sizes: Sequence[int] = (3, 4, 5),
        num_filters: int | None = None,
        embed_dim: int | None = None,
        uncertainty: bool = True,
        dropout: float = 0.5,
    ):
        super().__init__()
        if not kernel_sizes or any(int(k) < 1 for k in kernel_sizes):
            raise ValueError(
                f"kernel_sizes must be a non-empty list of positive ints, got {list(kernel_sizes)}; "
                "the paper uses head.kernel_sizes=[3,4,5]."
            )
        self.kernel_sizes = [int(k) for k in kernel_sizes]
        filters = num_filters or hidden_size
        self.convs = nn.ModuleList(nn.Conv1d(hidden_size, filters, k) for k in self.kernel_sizes)
        self.bottleneck = GaussianBottleneck(
            len(self.kernel_sizes) * filters, embed_dim or hidden_size, num_classes, uncertainty, dropout
        )

    @staticmethod
    def param_count(
        hidden_size: int,
        num_classes: int,
        kernel_sizes: Sequence[int] = (3, 4, 5),
        num_filters: int | None = None,
        embed_dim: int | None = None,
        uncertainty: bool = True,
    ) -> int:
        """Closed-form number of trainable parameters (what the MLP head is sized to match).

        ``sum_k (H * F * k + F)`` for the convolutions, ``(1 + uncertainty) * (K * F * D + D)`` for the
        branches, ``D * C + C`` for the classifier, with F filters, K kernel sizes, D = embed_dim.
        """
        h, c = hidden_size, num_classes
        f, d = num_filters or h, embed_dim or h
        convs = sum(h * f * int(k) + f for k in kernel_sizes)
        branches = (2 if uncertainty else 1) * (len(kernel_sizes) * f * d + d)
        return convs + branches + d * c + c

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """Map (B, T, H) token states and a (B, T) mask to a HeadOutput (mean/var/z (B, D), logits (B, C))."""
        keep = check_shapes(hidden, mask)  # (B, T) bool
        b, t = keep.shape
        dtype = self.bottleneck.mu.weight.dtype
        # masked_fill, not a multiply: pads may hold non-finite values and NaN * 0 is NaN
        x = hidden.to(dtype).masked_fill(~keep.unsqueeze(-1), 0.0).transpose(1, 2)  # (B, H, T), pads zeroed

        pos = torch.arange(t, device=keep.device)  # (T,)
        first = torch.where(keep, pos, t).amin(dim=1, keepdim=True)  # (B, 1)
        last = torch.where(keep, pos, -1).amax(dim=1, keepdim=True)  # (B, 1)
        # Extend time only as far as some row's last valid window reaches: right-padded rows at least
        # max(k) long need no extension, and every extra column costs a full conv position per kernel.
        reach = torch.stack([(torch.maximum(first, last - k + 1) + k).max() for k in self.kernel_sizes])
        # One host transfer for every check and size (each separate read would stall a GPU's queue).
        n_real = keep.sum(dim=1)  # (B,)
        host = torch.cat([n_real, (last - first + 1).squeeze(1), reach]).cpu()
        raise_empty_rows(host[:b] == 0)
        if bool((host[b : 2 * b] != host[:b]).any()):
            raise ValueError(
                "GaussianTextCNN needs contiguous real tokens per row (padding on the left or right only); "
                "the mask has padding between real tokens."
            )
        x = F.pad(x, (0, max(0, int(host[2 * b :].max()) - t)))  # (B, H, max(T, reach))
        pooled = []
        for k, conv in zip(self.kernel_sizes, self.convs):
            feats = conv(x)[:, :, :t]  # (B, filters, S): window starting at each position, S <= T
            starts = pos[: feats.shape[2]]  # (S,) every valid start is < S because x reaches `reach`
            stop = torch.maximum(first, last - k + 1)  # (B, 1) last valid window start
            valid = (starts >= first) & (starts <= stop)  # (B, S); never empty: `first` is always valid
            # max_t relu(f_t) == relu(max_t f_t) (relu is monotone), so the ReLU runs on (B, filters) instead
            # of (B, filters, S), and the fill is in place on the fresh conv output (convolution saves its
            # input, not its output, for backward): the same values, two fewer passes over the feature map.
            feats = feats.masked_fill_(~valid.unsqueeze(1), float("-inf"))
            pooled.append(F.relu(feats.amax(dim=2)))  # (B, filters)
        return self.bottleneck(torch.cat(pooled, dim=1))  # (B, len(k) * filters) -> HeadOutput
