"""The head runs under bf16 autocast exactly where the backbone runs bf16 (CPU or GPU), else in fp32.

Reference: the same head on the same texts with the backbone in fp32 (the head then in fp32); a spy on the
head's forward reads whether autocast was on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from toy_tasks import own_rows

from ucse.core.encoder import UcseEncoder


def _run(head_dir: Path, precision: str, texts: list[str]):
    enc = UcseEncoder.from_dir(head_dir, device="cpu", backbone_overrides={"precision": precision})
    seen: list[bool] = []
    forward = enc.head.forward

    def spy(hidden, mask):
        seen.append(torch.is_autocast_enabled("cpu"))
        return forward(hidden, mask)

    enc.head.forward = spy
    return enc.run_texts(texts), seen


def test_the_head_follows_the_backbone_precision(tiny_clf_run: Path):
    texts = [r["text"] for r in own_rows(12, seed=5)]
    fp32, seen32 = _run(tiny_clf_run / "head", "fp32", texts)
    bf16, seen16 = _run(tiny_clf_run / "head", "bf16", texts)
    assert seen32 and not any(seen32)  # fp32 backbone: fp32 head
    assert seen16 and all(seen16)  # bf16 backbone: the head under autocast too
    assert bf16.logits.dtype == np.float32  # outputs come back float32 either way
    assert not np.array_equal(bf16.logits, fp32.logits)  # autocast really changed the computation
    # bf16 keeps 8 bits of mantissa (relative rounding 2^-9 ~ 2e-3 per value); through the backbone's and the
    # head's sums the logits of this tiny model move by a few hundredths at most, far less than their spread.
    spread = float(np.ptp(fp32.logits))
    np.testing.assert_allclose(bf16.logits, fp32.logits, atol=0.05 * spread)
