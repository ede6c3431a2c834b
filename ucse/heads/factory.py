"""Build a head from its config: the single place that maps ``head.type`` to a class."""

from __future__ import annotations

from dataclasses import dataclass

from ucse.config import HeadConfig, HeadType, Pooling, parse_enum
from ucse.heads.attention import AttentionPoolHead
from ucse.heads.base import Head
from ucse.heads.blend import BlendHead
from ucse.heads.mlp import MLPHead
from ucse.heads.pooled import PooledHead
from ucse.heads.probe import ProbeHead
from ucse.heads.state_norm import attach_state_norm
from ucse.heads.textcnn import GaussianTextCNN

NN_HEADS = (
    HeadType.textcnn,
    HeadType.linear,
    HeadType.mean,
    HeadType.mlp,
    HeadType.attention,
    HeadType.logreg,
    HeadType.blend,
)
"""Head types with a module (``auto`` is a choice among them, made in training)."""


@dataclass(frozen=True)
class HeadSpec:
    """What ``build_head`` was called with; attached as ``head.spec`` so the head can be saved and rebuilt.

    Attributes:
        config: the head config.
        hidden_size: H of the backbone.
        num_classes: C.
        pooling: the backbone's pooling (used by ``linear`` and ``mlp``).
    """

    config: HeadConfig
    hidden_size: int
    num_classes: int
    pooling: Pooling


def _check(cfg: HeadConfig, hidden_size: int, num_classes: int) -> None:
    """Reject values no head can be built from, naming the field and the fix."""
    if hidden_size < 1:
        raise ValueError(f"hidden_size must be >= 1, got {hidden_size} (the backbone's hidden size H).")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}; a classifier needs 2+ labels.")
    if not 0.0 <= cfg.dropout < 1.0:
        raise ValueError(f"head.dropout must be in [0, 1), got {cfg.dropout} (the paper uses 0.5).")
    for name in ("num_filters", "embed_dim", "mlp_hidden"):
        value = getattr(cfg, name)
        if value is not None and value < 1:
            raise ValueError(f"head.{name} must be >= 1 or null (null = the default), got {value}.")


def build_head(cfg: HeadConfig, hidden_size: int, num_classes: int, pooling: Pooling) -> Head:
    """Build the trainable head ``cfg.type`` for a backbone of width H and C classes.

    Args:
        cfg: head config (``type``, ``gaussian``, ``kernel_sizes``, ``num_filters``, ``embed_dim``,
            ``dropout``, ``mlp_hidden``).
        hidden_size: H, the backbone's hidden size.
        num_classes: C.
        pooling: the backbone's pooling strategy, used by ``linear`` and ``mlp`` (``mean`` always mean-pools;
            ``textcnn`` and ``attention`` read all tokens).

    Returns:
        The head, with ``head.spec`` (a :class:`HeadSpec`) attached for :func:`ucse.heads.io.save_head`.

    Raises:
        ValueError: on an unknown head type or pooling, on ``auto`` (a choice made in training), or on
            invalid sizes.
    """
    head_type = parse_enum(HeadType, cfg.type, "head.type")
    pooling = parse_enum(Pooling, pooling, "backbone.pooling")
    if head_type is HeadType.auto:
        raise ValueError(
            "head.type=auto is a choice made in training (ucse.training.auto), not a head; build one of "
            f"{', '.join(t.value for t in NN_HEADS)}."
        )
    _check(cfg, hidden_size, num_classes)
    common = {"embed_dim": cfg.embed_dim, "uncertainty": cfg.gaussian, "dropout": cfg.dropout}
    if head_type in (HeadType.textcnn, HeadType.blend):
        head: Head = GaussianTextCNN(
            hidden_size, num_classes, cfg.kernel_sizes, num_filters=cfg.num_filters, **common
        )
        if head_type is HeadType.blend:
            # The probe reads raw pooled states (as LogisticRegressionCV was fitted); only the TextCNN gets
            # the standardisation of head.normalize_states.
            if cfg.normalize_states:
                attach_state_norm(head, hidden_size)
            head = BlendHead(head, ProbeHead(hidden_size, num_classes, pooling))
    elif head_type is HeadType.logreg:
        head = ProbeHead(hidden_size, num_classes, pooling)
    elif head_type is HeadType.linear:
        head = PooledHead(hidden_size, num_classes, pooling, **common)
    elif head_type is HeadType.mean:
        head = PooledHead(hidden_size, num_classes, Pooling.mean, **common)
    elif head_type is HeadType.mlp:
        head = MLPHead(
            hidden_size,
            num_classes,
            pooling,
            mlp_hidden=cfg.mlp_hidden,
            kernel_sizes=cfg.kernel_sizes,
            num_filters=cfg.num_filters,
            **common,
        )
    else:
        head = AttentionPoolHead(hidden_size, num_classes, **common)
    if cfg.normalize_states and head_type not in (HeadType.blend, HeadType.logreg):
        attach_state_norm(head, hidden_size)
    head.spec = HeadSpec(cfg, hidden_size, num_classes, pooling)
    return head
