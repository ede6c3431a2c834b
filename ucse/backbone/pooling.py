"""Pooling token states into one sentence vector; works for left and right padding alike."""

from __future__ import annotations

from typing import Any

import torch

from ucse.config import Pooling

POOLINGS = tuple(p.value for p in Pooling)


def _check(hidden: torch.Tensor, mask: torch.Tensor, host_checks: bool) -> torch.Tensor:
    """Validate shapes (with ``host_checks`` also that no row is empty); return the mask as bool (B, T)."""
    if hidden.dim() != 3 or mask.dim() != 2 or hidden.shape[:2] != mask.shape:
        raise ValueError(
            f"pool expects hidden (B, T, H) and mask (B, T); got {tuple(hidden.shape)}, {tuple(mask.shape)}."
        )
    keep = mask.bool()
    if not host_checks:
        return keep
    empty = (~keep.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"pool: rows {empty} of the mask have no real token; every row needs at least one.")
    return keep


def first_token_index(mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of the first non-pad token of each row of a (B, T) mask."""
    return mask.bool().int().argmax(dim=1)  # argmax returns the first maximal position


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of the last non-pad token of each row of a (B, T) mask."""
    positions = torch.arange(mask.shape[1], device=mask.device)  # (T,)
    return (positions * mask.bool()).argmax(dim=1)  # the largest real position is the unique maximum


def pool(
    hidden: torch.Tensor, mask: torch.Tensor, strategy: Pooling | str, host_checks: bool = True
) -> torch.Tensor:
    """Pool token states into sentence vectors.

    Args:
        hidden: (B, T, H) token states, any float dtype; padded positions may hold anything (even NaN).
        mask: (B, T) 1 for real tokens, 0 for padding, padding on either side.
        strategy: ``last`` (last real token, e.g. EOS), ``mean`` (masked mean) or ``cls`` (first real token).
        host_checks: read the empty-row check back to the host and raise on such a row. ``False`` (a head's
            forward on CUDA, :attr:`ucse.heads.Head.host_checks`): no read stalls the device's queue, and a
            row without real tokens comes out NaN.

    Returns:
        (B, H) float32 sentence vectors.

    Raises:
        ValueError: bad shapes, a row without real tokens (with ``host_checks``), or an unknown strategy.
    """
    try:
        strategy = Pooling(strategy)
    except ValueError:
        raise ValueError(f"Unknown pooling '{strategy}'; valid: {', '.join(POOLINGS)}.") from None
    keep = _check(hidden, mask, host_checks)  # (B, T)
    hidden = hidden.float()
    rows = torch.arange(hidden.shape[0], device=hidden.device)  # (B,)
    if strategy is Pooling.last:
        out = hidden[rows, last_token_index(keep)]  # (B, H)
    elif strategy is Pooling.cls:
        out = hidden[rows, first_token_index(keep)]  # (B, H)
    else:
        # where() rather than multiply so that non-finite values at pads cannot leak in.
        summed = torch.where(keep.unsqueeze(-1), hidden, 0.0).sum(dim=1)  # (B, H)
        out = summed / keep.sum(dim=1, keepdim=True).to(hidden.dtype)  # (B, H)
    if not host_checks:  # an empty row's index above is 0, a pad: its vector would look like a real one
        out = out.masked_fill(~keep.any(dim=1, keepdim=True), float("nan"))
    return out


def unit_pool(
    hidden: torch.Tensor, mask: torch.Tensor, strategy: Pooling | str, host_checks: bool = True
) -> torch.Tensor:
    """(B, H) float32 L2-normalised :func:`pool` vectors (``host_checks`` as there).

    The features of the linear probe (fitting and inference) and of the out-of-scope flag: one definition,
    so all of them read exactly the same vectors.
    """
    return torch.nn.functional.normalize(pool(hidden, mask, strategy, host_checks), dim=-1)


def first_token_sees_ahead(model: torch.nn.Module, layer: int | None, token_types: bool) -> bool:
    """Whether a model's first-token state depends on the tokens after it: False for a causal decoder.

    Two 4-token sequences that share their first token (ids 1-4 and 1, 5, 6, 7: in every vocabulary) go
    through the model in its own dtype: under causal attention the first position's states are equal, the
    same arithmetic on the same inputs; bidirectional attention mixes the later tokens in (except at layer 0,
    the embeddings, where nothing is mixed yet). The model's config does
    not say which (a GGUF decoder's names no architecture).

    Args:
        model: the frozen transformers model.
        layer: the ``hidden_states`` index read (``None``: the last layer).
        token_types: whether its forward takes ``token_type_ids``.
    """
    device = next(model.parameters()).device
    ids = torch.tensor([[1, 2, 3, 4], [1, 5, 6, 7]], device=device)  # (2, 4)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    inputs |= {"token_type_ids": torch.zeros_like(ids)} if token_types else {}
    with torch.inference_mode():
        out = model(**inputs, return_dict=True, output_hidden_states=layer is not None)
    hidden = out.last_hidden_state if layer is None else out.hidden_states[layer]  # (2, 4, H)
    first = hidden[:, 0].float()  # (2, H)
    return not torch.allclose(first[0], first[1], rtol=1e-4, atol=1e-5 * float(first.abs().max()))


def check_cls_reads_the_text(cfg: Any, model: torch.nn.Module, layer: int | None, token_types: bool) -> None:
    """Refuse ``backbone.pooling=cls`` on a decoder, whose first token is the same for every text.

    A decoder trial's ``head=logreg`` on such vectors answered one label for every text, exit 0.

    Args:
        cfg: the :class:`ucse.config.BackboneConfig` (its ``pooling`` and ``model``).
        model: the frozen transformers model.
        layer: the ``hidden_states`` index read (``None``: the last layer).
        token_types: whether its forward takes ``token_type_ids``.

    Raises:
        ValueError: naming the model and the poolings that read the text.
    """
    if Pooling(cfg.pooling) is Pooling.cls and not first_token_sees_ahead(model, layer, token_types):
        raise ValueError(
            f"backbone.pooling=cls reads each text's first token, but in {cfg.model} at "
            f"backbone.layer={cfg.layer if cfg.layer is not None else 'null (the last)'} that state is the "
            "same for every text (a decoder: each token sees only those before it; or the embedding layer, "
            "0): use backbone.pooling=last (a decoder's default) or backbone.pooling=mean."
        )
