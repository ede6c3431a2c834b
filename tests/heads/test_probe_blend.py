"""The probe and blend heads against independent references: scikit-learn and the blend's formula by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

from ucse.config import HeadConfig, HeadType, Pooling
from ucse.heads import build_head, load_head, save_head
from ucse.training.logreg import fit_probe, probe_head


def _states(n: int, h: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, 5, h, generator=g)  # (N, T, H)
    mask = torch.ones(n, 5, dtype=torch.long)
    mask[::2, 3:] = 0  # ragged rows: pooling must respect the mask
    return hidden, mask


def _unit_pooled(hidden: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """Masked mean then L2 normalisation, written out here (the reference for ProbeHead.features)."""
    m = mask.unsqueeze(-1).double()
    x = (hidden.double() * m).sum(1) / m.sum(1)
    return (x / x.norm(dim=1, keepdim=True)).numpy()


@pytest.mark.parametrize("classes", [2, 4])
def test_probe_head_gives_sklearns_probabilities(classes):
    hidden, mask = _states(120, 6, 0)
    x = _unit_pooled(hidden, mask)
    y = np.arange(120) % classes
    x[:, 0] += 0.5 * y  # learnable, not separable
    clf, info = fit_probe(x, y, classes, folds=5, seed=0, max_iter=2000)
    ref = LogisticRegressionCV(Cs=np.logspace(-2, 4, 13), cv=5, max_iter=2000)
    assert info["C"] in ref.Cs and info["folds"] == 5 and info["converged"]
    head = probe_head(clf, 6, Pooling.mean).double()
    got = torch.softmax(head.linear(torch.as_tensor(x)), -1).detach().numpy()
    # The head stores float32 weights (relative rounding 6e-8); with |logits| < 20 the probabilities move
    # by at most ~20 * 6e-8 * 2 ~ 3e-6.
    np.testing.assert_allclose(got, clf.predict_proba(x), atol=3e-6)
    # The head's own pooling, in float32, is the reference's masked mean + normalisation (unit vectors:
    # float32 rounding ~1e-7 per component).
    feats = head.float().features(hidden, mask).detach().double().numpy()
    np.testing.assert_allclose(feats, _unit_pooled(hidden, mask), atol=1e-6)


def test_a_class_with_one_row_still_gets_its_probe_column():
    # A label with one training row (a rare label of the user's, or one row of a 2-row label in a
    # cross-validation fold): C is chosen over folds in which that class is missing from some training parts,
    # as scikit-learn's LogisticRegressionCV allows, and the final model, fitted on every row, has its column.
    rng = np.random.default_rng(0)
    y = np.array([0] * 8 + [1] * 8 + [2])
    x = rng.normal(size=(17, 3)) * 0.3
    x[np.arange(17), y] += 3.0  # class c lives along axis c
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    clf, info = fit_probe(x, y, 3, 5, 0, 500)
    assert info["folds"] == 2 and list(clf.classes_) == [0, 1, 2]
    # The final model is scikit-learn's at the chosen C, and its class-2 column points at that row.
    ref = LogisticRegression(C=info["C"], max_iter=500).fit(x, y)
    np.testing.assert_allclose(clf.predict_proba(x), ref.predict_proba(x), atol=1e-4)
    p2 = clf.predict_proba(x)[:, 2]
    assert p2[16] > p2[:16].max()
    with pytest.raises(ValueError, match="hold 2 of 3 classes"):  # a class with no row at all still fails
        fit_probe(x[:16], y[:16], 3, 5, 0, 500)


def test_blend_is_the_weighted_average_of_the_tempered_softmaxes(tmp_path):
    hidden, mask = _states(9, 8, 1)
    cfg = HeadConfig(type=HeadType.blend, num_filters=4, embed_dim=4, kernel_sizes=[1, 2])
    head = build_head(cfg, 8, 3, Pooling.mean).eval()
    head.set_blend(0.3, 2.0, 0.5)
    out = head(hidden, mask)
    a = head.gaussian(hidden, mask).logits.double()
    b = head.probe(hidden, mask).logits.double()
    ref = 0.3 * torch.softmax(a / 2.0, -1) + 0.7 * torch.softmax(b / 0.5, -1)
    torch.testing.assert_close(torch.softmax(out.logits.double(), -1), ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.mean, head.gaussian(hidden, mask).mean)
    assert out.var is not None
    # Saved and loaded like every head: weight and temperatures travel with the weights.
    save_head(head, tmp_path / "h", {"label_names": ["a", "b", "c"]})
    back, _ = load_head(tmp_path / "h")
    torch.testing.assert_close(back.eval()(hidden, mask).logits, out.logits)
    assert float(back.weight) == pytest.approx(0.3) and back.temperatures.tolist() == [2.0, 0.5]


@pytest.mark.parametrize("bad", [(-0.1, 1.0, 1.0), (0.5, 0.0, 1.0), (1.5, 1.0, 1.0)])
def test_blend_refuses_impossible_parameters(bad):
    head = build_head(HeadConfig(type=HeadType.blend, kernel_sizes=[1]), 4, 2, Pooling.mean)
    with pytest.raises(ValueError, match="blend needs"):
        head.set_blend(*bad)
