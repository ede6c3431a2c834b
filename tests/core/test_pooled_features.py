"""``EncodedBatch.pooled``: the out-of-scope flag's features are the backbone's pooled unit vectors.

Reference: the tiny BERT run through transformers directly, pooled by hand with the run's pooling (mean over
real tokens, or the first token), L2-normalised; and the cached-states path of the same encoder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from toy_tasks import own_rows
from transformers import AutoModel, AutoTokenizer

from ucse.backbone.states import OnTheFlyStates
from ucse.core.encoder import UcseEncoder


def test_pooled_vectors_are_the_backbone_pooling_by_hand(tiny_clf_run: Path, tiny_bert_dir: Path):
    enc = UcseEncoder.from_dir(tiny_clf_run / "head", device="cpu")
    texts = [r["text"] for r in own_rows(9, seed=4)] + ["a", "one two three four five six seven"]
    got = enc.run_texts(texts).pooled  # (N, H)
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = AutoModel.from_pretrained(tiny_bert_dir).eval()
    batch = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state  # (N, T, H)
    mask = batch["attention_mask"][..., None].float()
    strategy = str(getattr(enc.backbone.cfg.pooling, "value", enc.backbone.cfg.pooling))
    assert strategy in ("cls", "mean")  # an encoder: right padding, no last-token pooling
    ref = hidden[:, 0] if strategy == "cls" else (hidden * mask).sum(1) / mask.sum(1)
    ref = torch.nn.functional.normalize(ref, dim=1).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)  # float32 forward passes, same weights
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # The cached-states path gives the same vectors, in input order.
    np.testing.assert_allclose(enc.run_states(OnTheFlyStates(enc.backbone, texts)).pooled, got, atol=1e-5)
