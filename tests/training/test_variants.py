"""The ablation grid's variants map to the configs the paper describes."""

import dataclasses

import pytest

from ucse.config import ContrastiveType, HeadType, build_config
from ucse.training.variants import EXTRAS, TABLE7, Variant, variant_overrides


@pytest.mark.parametrize("variant", list(Variant))
def test_every_variant_builds_a_valid_config(variant):
    build_config(variant_overrides(variant))


@pytest.mark.parametrize(
    ("variant", "head", "ucl", "contrastive"),
    [
        ("linear-base", HeadType.linear, False, ContrastiveType.none),
        ("attention-lcl", HeadType.attention, False, ContrastiveType.lcl),
        ("textcnn-ucl", HeadType.textcnn, True, ContrastiveType.none),
        ("textcnn-both", HeadType.textcnn, True, ContrastiveType.lcl),
        ("supcon", HeadType.textcnn, False, ContrastiveType.supcon),
        ("simcse", HeadType.textcnn, False, ContrastiveType.simcse),
        ("mlp", HeadType.mlp, False, ContrastiveType.none),
    ],
)
def test_variant_semantics(variant, head, ucl, contrastive):
    cfg = build_config(variant_overrides(variant))
    assert (cfg.head.type, cfg.head.gaussian, cfg.loss.contrastive) == (head, ucl, contrastive)


def test_full_method_equals_the_default_config():
    # The default head=auto fits the full method's TextCNN (and recipe=paper trains exactly it).
    default, full = build_config([]), build_config(variant_overrides("textcnn-both"))
    assert (dataclasses.replace(default.head, type=HeadType.textcnn), default.loss) == (full.head, full.loss)


def test_table_layout_and_unknown_variant():
    assert len(TABLE7) == 12 and len(EXTRAS) == 5
    with pytest.raises(ValueError, match="Did you mean 'textcnn-both'"):
        variant_overrides("textcnn-bot")
