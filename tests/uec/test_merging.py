"""Parameter merging against hand computation and the tiny BERT."""

from __future__ import annotations

import pytest
import torch
from tiny_models import make_tiny_bert_cfg, sample_texts

from ucse.backbone import FrozenBackbone
from ucse.uec.merging import MergedMember, MergeError, merge_states, task_arithmetic_states


def test_merge_and_task_arithmetic_by_hand():
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor([3])}
    b = {"w": torch.tensor([3.0, -2.0]), "n": torch.tensor([7])}
    merged = merge_states([a, b], [0.25, 0.75])
    torch.testing.assert_close(merged["w"], torch.tensor([0.25 * 1 + 0.75 * 3, 0.25 * 2 - 0.75 * 2]))
    assert merged["n"].item() == 3  # integer buffers come from the first model
    ta = task_arithmetic_states(a, b, a, 0.1)
    torch.testing.assert_close(ta["w"], torch.tensor([1.0 + 0.1 * 2, 2.0 - 0.1 * 4]))
    # Two members: task arithmetic from the first towards the second is the (1 - alpha, alpha) merge.
    torch.testing.assert_close(ta["w"], merge_states([a, b], [0.9, 0.1])["w"])
    with pytest.raises(MergeError, match="'w' is \\(2,\\) vs \\(3,\\)"):
        merge_states([a, {"w": torch.zeros(3), "n": torch.tensor([1])}], [0.5, 0.5], ["m1", "m2"])
    with pytest.raises(MergeError, match="different parameters"):
        merge_states([a, {"v": torch.zeros(2), "n": torch.tensor([1])}], [0.5, 0.5])


def test_merged_member_of_a_model_with_itself_is_the_model(tiny_bert_dir):
    cfg = make_tiny_bert_cfg(tiny_bert_dir)
    one, two = FrozenBackbone(cfg), FrozenBackbone(cfg)
    with torch.no_grad():
        for p in two.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    states = [{k: v.clone() for k, v in b.model.state_dict().items()} for b in (one, two)]
    texts = sample_texts(5, seed=4)
    first = MergedMember([one, two], merge_states(states, [1.0, 0.0]), "m", {"w": [1, 0]}).encode(texts)
    ref = torch.nn.functional.normalize(one.pooled(texts), dim=1)
    torch.testing.assert_close(first.mean, ref, rtol=1e-5, atol=1e-6)
    assert float(first.var.abs().max()) == 0.0
    half = MergedMember([one, two], merge_states(states, [0.5, 0.5]), "h", {"w": [0.5, 0.5]}).encode(texts)
    assert not torch.allclose(half.mean, ref, atol=1e-4)  # a genuinely different model
