"""The ablation grid of the UCSE paper (Tables 3, 4, 7, 8) as named config overrides."""

from __future__ import annotations

from enum import Enum


class Variant(str, Enum):
    """One column of the ablation table.

    ``<extractor>-<components>``: the extractor (``linear`` = pooled EOS/CLS/mean + Linear, ``attention``,
    ``textcnn``) with ``base`` (CE only), ``lcl`` (+ label-wise contrastive), ``ucl`` (+ variance branch and
    KL) or ``both`` (the full method for ``textcnn``). ``mean`` and ``mlp`` are Table 4's other extractors;
    ``supcon`` and ``simcse`` replace LCL on the base TextCNN (Table 4 right); ``logreg`` is the converged
    scikit-learn probe on pooled embeddings.
    """

    linear_base = "linear-base"
    linear_lcl = "linear-lcl"
    linear_ucl = "linear-ucl"
    linear_both = "linear-both"
    attention_base = "attention-base"
    attention_lcl = "attention-lcl"
    attention_ucl = "attention-ucl"
    attention_both = "attention-both"
    textcnn_base = "textcnn-base"
    textcnn_lcl = "textcnn-lcl"
    textcnn_ucl = "textcnn-ucl"
    textcnn_both = "textcnn-both"
    mean = "mean"
    mlp = "mlp"
    supcon = "supcon"
    simcse = "simcse"
    logreg = "logreg"


_COMPONENTS = {
    "base": ("head.gaussian=false", "loss.contrastive=none"),
    "lcl": ("head.gaussian=false", "loss.contrastive=lcl"),
    "ucl": ("head.gaussian=true", "loss.contrastive=none"),
    "both": ("head.gaussian=true", "loss.contrastive=lcl"),
}

_SINGLE = {
    Variant.mean: ("head=mean",),
    Variant.mlp: ("head=mlp",),
    Variant.supcon: ("head=textcnn", "head.gaussian=false", "loss.contrastive=supcon"),
    Variant.simcse: ("head=textcnn", "head.gaussian=false", "loss.contrastive=simcse"),
    Variant.logreg: ("head=logreg",),
}


def variant_overrides(variant: Variant | str) -> list[str]:
    """Config overrides that turn the default config into ``variant``.

    Raises:
        ValueError: for an unknown variant name (the message lists the valid ones).
    """
    try:
        v = Variant(variant)
    except ValueError:
        from ucse.config import did_you_mean

        names = [x.value for x in Variant]
        raise ValueError(
            f"Unknown variant '{variant}'. Valid variants: {', '.join(names)}."
            f"{did_you_mean(str(variant), names)}"
        ) from None
    if v in _SINGLE:
        return list(_SINGLE[v])
    extractor, components = v.value.split("-")
    return [f"head={extractor}", *_COMPONENTS[components]]


# Table 7's layout first (extractor x components), then Table 4's extra columns.
TABLE7 = [v for v in Variant if "-" in v.value]
EXTRAS = [Variant.mean, Variant.mlp, Variant.supcon, Variant.simcse, Variant.logreg]
