"""``head.normalize_states``: per-dimension standardisation with the training split's statistics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from toy_tasks import LEARNS

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import build_head, load_head, save_head


class ListStates:
    """Token states from a list of (T_i, H) tensors (independent of the cache)."""

    def __init__(self, rows):
        self.rows, self.hidden_size = rows, rows[0].shape[1]
        self.lengths = np.array([r.shape[0] for r in rows])

    def __len__(self):
        return len(self.rows)

    def batch(self, idx):
        t = max(self.rows[i].shape[0] for i in idx)
        hidden, mask = torch.zeros(len(idx), t, self.hidden_size), torch.zeros(len(idx), t, dtype=torch.long)
        for b, i in enumerate(idx):
            hidden[b, : self.rows[i].shape[0]], mask[b, : self.rows[i].shape[0]] = self.rows[i], 1
        return hidden, mask


def _rows(n=37, h=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    offset = torch.linspace(-40, 40, h)  # a large common vector, as decoder states have
    scale = torch.ones(h)
    scale[3] = 25.0  # and an outlier dimension
    return [
        offset + scale * torch.randn(int(torch.randint(1, 9, (1,), generator=g)), h, generator=g)
        for _ in range(n)
    ]


@pytest.mark.parametrize("head_type", [HeadType.textcnn, HeadType.linear, HeadType.mean, HeadType.attention])
def test_statistics_are_the_real_tokens_mean_and_std_and_survive_save_and_load(head_type, tmp_path):
    rows = _rows()
    head = build_head(HeadConfig(type=head_type, normalize_states=True, dropout=0.0), 8, 3, Pooling.last)
    head.state_norm.fit(ListStates(rows))
    allr = torch.cat(rows).double()
    torch.testing.assert_close(head.state_norm.mean.double(), allr.mean(0), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(
        head.state_norm.std.double(), allr.std(0, unbiased=False), atol=1e-4, rtol=1e-5
    )
    hidden, mask = ListStates(rows).batch([0, 5, 9])
    # The head sees exactly (x - mean) / std at real tokens: same output as an un-normalised twin fed that.
    twin = build_head(HeadConfig(type=head_type, normalize_states=False, dropout=0.0), 8, 3, Pooling.last)
    twin.load_state_dict({k: v for k, v in head.state_dict().items() if not k.startswith("state_norm.")})
    z = ((hidden - head.state_norm.mean) / head.state_norm.std).masked_fill(~mask.bool().unsqueeze(-1), 0.0)
    head.eval(), twin.eval()
    torch.testing.assert_close(head(hidden, mask).logits, twin(z, mask).logits)
    save_head(head, tmp_path / "h", {"label_names": ["a", "b", "c"]})
    loaded, _ = load_head(tmp_path / "h")
    loaded.eval()
    torch.testing.assert_close(loaded(hidden, mask).logits, head(hidden, mask).logits)


def test_off_by_default_keeps_the_state_dict_unchanged():
    head = build_head(HeadConfig(type=HeadType.textcnn), 8, 3, Pooling.last)
    assert not hasattr(head, "state_norm") and not any(k.startswith("state_norm") for k in head.state_dict())


def test_a_training_run_fits_the_statistics_and_exports_them(tiny_run_cfg):
    from ucse.training import train

    result = train(tiny_run_cfg("head.normalize_states=true", *LEARNS))
    head, _ = load_head(result.run_dir / "head")
    assert head.state_norm.mean.abs().sum() > 0 and not torch.equal(head.state_norm.std, torch.ones(32))
    assert result.metrics["test"]["accuracy"] > 0.6  # the tiny cue task still learns (>= 0.82 measured)
