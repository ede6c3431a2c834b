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
    is extended on the right with zero columns, just as far as the furthest such window reaches (on CUDA,
    where that reach is not read back to the host, by max(k) - 1 columns: see ``host_checks``). Padding
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

    fuse_convs: bool | None = None
    """One convolution over zero-padded kernels instead of one per width (same outputs to float rounding; 25 %
    more multiply-adds for widths 3, 4, 5, but one kernel launch). ``None``: on CUDA only (docs/RESULTS.md,
    section 6). A runtime choice, not a hyperparameter: the saved weights are the same."""

    windows_matmul: bool | None = None
    """Each width as one matrix product over its unfolded windows, ``(B, S, H*k) @ (H*k, F)``, instead of a
    convolution (the same sums; ignored when ``fuse_convs``). ``None``: on the CPU under bf16 autocast, where
    oneDNN's bf16 convolution weight gradient runs at a third of its forward's rate (a training step 0.71x,
    inference 0.86x the convolutions'; in fp32 the convolutions are faster: ``bench/head_paths.py``). A
    runtime choice: the weights are the same."""

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
        ks, kmax = self.kernel_sizes, max(self.kernel_sizes)
        fuse = self.fuse_convs if self.fuse_convs is not None else hidden.is_cuda
        device = hidden.device.type
        cast = torch.is_autocast_enabled(device)
        matmul = not fuse and (
            self.windows_matmul if self.windows_matmul is not None else device == "cpu" and cast
        )
        # The window products read half-precision copies under autocast: cast once, before any copy is made.
        dtype = torch.get_autocast_dtype(device) if matmul and cast else self.bottleneck.mu.weight.dtype
        # masked_fill, not a multiply: pads may hold non-finite values and NaN * 0 is NaN
        x = hidden.to(dtype).masked_fill(~keep.unsqueeze(-1), 0.0)  # (B, T, H), pads zeroed

        pos = torch.arange(t, device=keep.device)  # (T,)
        first = torch.where(keep, pos, t).amin(dim=1, keepdim=True)  # (B, 1)
        last = torch.where(keep, pos, -1).amax(dim=1, keepdim=True)  # (B, 1)
        # (B, K, 1): the last valid window start per width
        stop = torch.stack([torch.maximum(first, last - k + 1) for k in ks], dim=1)
        valid = (pos >= first.unsqueeze(1)) & (pos <= stop)  # (B, K, T); never empty: `first` is always valid
        n_real = keep.sum(dim=1)  # (B,)
        host = self.checks_on_host(hidden)  # with it, the time extension is read back in the same transfer
        if host:
            # Extend time only as far as some row's last valid window reaches (a fused window is kmax wide):
            # right-padded rows at least max(k) long need no extension, and every extra column costs a conv
            # position per kernel. One host transfer for every check and size.
            reach = (stop.squeeze(2) + (kmax if fuse else torch.tensor(ks, device=keep.device))).amax()
            read = torch.cat([n_real, (last - first + 1).squeeze(1), reach.view(1)]).cpu()
            raise_empty_rows(read[:b] == 0)
            if bool((read[b : 2 * b] != read[:b]).any()):
                raise ValueError(
                    "GaussianTextCNN needs contiguous real tokens per row (padding on the left or right "
                    "only); the mask has padding between real tokens."
                )
            extend = max(0, int(read[-1]) - t)
        else:
            # A read back to the host would stall a GPU's queue on every forward: the head's kernels were
            # launched only once the backbone had finished (H200, batch 64: the head's share of inference
            # 4.9 % with the read, 3.7 % without). Instead: the widest extension any row can need, and the
            # rows the checks would refuse come out NaN (the training loop's finite check names the step;
            # the backbone's own masks are contiguous and never empty).
            bad = (n_real == 0) | ((last - first + 1).squeeze(1) != n_real)  # (B,)
            extend = kmax - 1
        x = F.pad(x, (0, 0, 0, extend))  # (B, T + extend, H)
        if fuse:
            x = x.transpose(1, 2)  # (B, H, T + extend): the convolution's layout
            # One convolution for every width: each kernel zero-padded on the right to kmax, so output
            # channel block i at start s is exactly conv_i's window at s (the zero taps read columns past it).
            padded = [F.pad(c.weight, (0, kmax - k)) for k, c in zip(ks, self.convs)]
            weight = torch.cat(padded)  # (K*F, H, kmax)
            bias = torch.cat([c.bias for c in self.convs])  # (K*F,)
            feats = F.conv1d(x, weight, bias)[:, :, :t]  # (B, K*F, S)
            s = feats.shape[2]
            feats = feats.unflatten(1, (len(ks), -1))  # (B, K, F, S)
            # max_t relu(f_t) == relu(max_t f_t) (relu is monotone), so the ReLU runs on the pooled maps, and
            # the fill is in place on the fresh conv output (convolution saves its input, not its output).
            feats = feats.masked_fill_(~valid[:, :, None, :s], float("-inf"))
            pooled = F.relu(feats.amax(dim=3)).flatten(1)  # (B, K*F)
        else:
            xc = None if matmul else x.transpose(1, 2)  # (B, H, T + extend): the convolutions' layout
            maps = []
            for i, (k, conv) in enumerate(zip(ks, self.convs)):
                # every valid start is < S because x reaches the furthest window
                if matmul:
                    # (B, S, H, k) -> (B, S, H*k): windows[b, s, h*k + j] = x[b, s + j, h], the weight's order
                    windows = x.unfold(1, k, 1).flatten(2)[:, :t]
                    feats = F.linear(windows, conv.weight.flatten(1), conv.bias)  # (B, S, F)
                    # masked and pooled in the product's own layout: a transposed view costs copies backward
                    s = feats.shape[1]
                    feats = feats.masked_fill_(~valid[:, i, :s, None], float("-inf")).amax(dim=1)
                else:
                    feats = conv(xc)[:, :, :t]  # (B, F, S): window starting at each position, S <= T
                    s = feats.shape[2]
                    feats = feats.masked_fill_(~valid[:, i, None, :s], float("-inf")).amax(dim=2)
                maps.append(F.relu(feats))  # (B, F)
            pooled = torch.cat(maps, dim=1)  # (B, K*F)
        if not host:
            pooled = pooled.masked_fill(bad.unsqueeze(1), float("nan"))
        return self.bottleneck(pooled)  # (B, K * F) -> HeadOutput
