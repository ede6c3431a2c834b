"""Frozen-backbone layer: loading, pooling, batched token states and the hidden-state cache."""

from ucse.backbone.cache import (
    CachedStates,
    CacheError,
    HiddenStateCache,
    OnTheFlyStates,
    SubsetStates,
    TokenStates,
    right_pad,
    texts_hash,
)
from ucse.backbone.encoder import FrozenBackbone, TextValidationError, validate_texts
from ucse.backbone.loading import BackboneLoadError, load_backbone, model_fingerprint, resolve_model_path
from ucse.backbone.pooling import first_token_index, last_token_index, pool

__all__ = [
    "BackboneLoadError",
    "CacheError",
    "CachedStates",
    "FrozenBackbone",
    "HiddenStateCache",
    "OnTheFlyStates",
    "TextValidationError",
    "TokenStates",
    "first_token_index",
    "last_token_index",
    "load_backbone",
    "SubsetStates",
    "model_fingerprint",
    "pool",
    "resolve_model_path",
    "right_pad",
    "texts_hash",
    "validate_texts",
]
