"""Trainable heads on frozen token states; every head returns a :class:`HeadOutput`."""

from ucse.heads.attention import AttentionPoolHead
from ucse.heads.base import Head, HeadOutput, check_inputs
from ucse.heads.bottleneck import LOG_VAR_MAX, LOG_VAR_MIN, GaussianBottleneck
from ucse.heads.factory import HeadSpec, build_head
from ucse.heads.io import FORMAT_VERSION, load_head, save_head
from ucse.heads.mlp import MLPHead, matched_mlp_hidden
from ucse.heads.pooled import PooledHead
from ucse.heads.textcnn import GaussianTextCNN

__all__ = [
    "FORMAT_VERSION",
    "LOG_VAR_MAX",
    "LOG_VAR_MIN",
    "AttentionPoolHead",
    "GaussianBottleneck",
    "GaussianTextCNN",
    "Head",
    "HeadOutput",
    "HeadSpec",
    "MLPHead",
    "PooledHead",
    "build_head",
    "check_inputs",
    "load_head",
    "matched_mlp_hidden",
    "save_head",
]
