"""Relative member scales fitted on labels (ucse/uec/label_scales.py) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.label_scales import SCALE_GRID, fit_label_scales, fused_nll


def _gauss(traces: list[float], d: int = 4, seed: int = 0) -> GaussianEmbeddings:
    g = torch.Generator().manual_seed(seed)
    mean = torch.nn.functional.normalize(torch.randn(len(traces), d, generator=g), dim=1)
    var = torch.tensor(traces)[:, None].expand(-1, d) / d  # each row's trace as given
    return GaussianEmbeddings(mean, var.contiguous())


def test_fused_nll_by_hand():
    # Two members, two texts; Eq. 4 sharpened by T: pi_k ~ (s_k tr_k)^-T.
    a, b = _gauss([1.0, 2.0], seed=1), _gauss([3.0, 1.0], seed=2)
    probs = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.7, 0.3]]])  # (K, N, C)
    labels = np.array([0, 1])
    scales, t = [1.0, 0.5], 1.8
    ref = 0.0
    for i in range(2):
        c = [(scales[0] * [1.0, 2.0][i]) ** -t, (scales[1] * [3.0, 1.0][i]) ** -t]
        w = [x / sum(c) for x in c]
        ref -= math.log(w[0] * probs[0, i, labels[i]] + w[1] * probs[1, i, labels[i]])
    got = fused_nll([a, b], probs, labels, scales, "inverse_trace", t, "sharpen")
    assert got == pytest.approx(ref / 2, rel=1e-6)


def test_an_always_wrong_member_gets_the_largest_scale_and_the_nll_drops():
    n = 60
    good = np.tile([0.9, 0.1], (n, 1))
    bad = np.tile([0.2, 0.8], (n, 1))
    probs, labels = np.stack([good, bad]), np.zeros(n, dtype=int)
    gauss = [_gauss([1.0] * n, seed=3), _gauss([1.0] * n, seed=4)]  # equal traces: uniform UEC weights
    scales, nll = fit_label_scales(gauss, probs, labels, "inverse_trace", 1.8, "sharpen")
    assert scales == [1.0, max(SCALE_GRID)]
    assert nll < fused_nll(gauss, probs, labels, [1.0, 1.0], "inverse_trace", 1.8, "sharpen")
    # And the other way round: the first member is the bad one, so the second gets the smallest scale.
    scales, _ = fit_label_scales(gauss, probs[::-1].copy(), labels, "inverse_trace", 1.8, "sharpen")
    assert scales == [1.0, min(SCALE_GRID)]


def test_member_count_mismatch_is_refused():
    with pytest.raises(ValueError, match="2 members but probabilities for 3"):
        fit_label_scales(
            [_gauss([1.0]), _gauss([1.0])],
            np.ones((3, 1, 2)) / 2,
            np.zeros(1, int),
            "inverse_trace",
            1.0,
            "sharpen",
        )


def test_member_scales_labels_needs_heads_only(tmp_path):
    from ucse.config import ConfigError
    from ucse.uec.config import load_ensemble_config

    bad = tmp_path / "mixed.yaml"
    bad.write_text(
        "name: x\nmembers:\n  - {id: a, kind: head, head_dir: h}\n  - {id: b, backbone: minilm-l6}\n"
        "member_scales: labels\n"
    )
    with pytest.raises(ConfigError, match="member_scales=labels needs every member to be a trained head"):
        load_ensemble_config(str(bad))
    bad.write_text("name: x\nmembers:\n  - {id: a, kind: head, head_dir: h}\nmember_scales: val\n")
    with pytest.raises(ConfigError, match="member_scales='val'"):
        load_ensemble_config(str(bad))
