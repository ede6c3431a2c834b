from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from ucse.evaluation.plots import (
    balanced_sample,
    plot_arc,
    plot_difficulty,
    plot_tsne,
    plot_weight_heatmap,
)
from ucse.uncertainty.sigma import accuracy_rejection_curve, difficulty_bins


def _assert_png(path: Path, min_bytes: int = 8000) -> None:
    assert path.is_file()
    assert path.stat().st_size > min_bytes
    with Image.open(path) as im:
        assert im.format == "PNG"
        w, h = im.size
        assert w > 300 and h > 200
        pixels = np.asarray(im.convert("L"))
    assert pixels.std() > 5  # not a blank canvas
    assert not list(path.parent.glob(".*.tmp"))


def test_plot_arc(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    sigma = rng.uniform(0.2, 1.5, 300)
    correct = rng.uniform(size=300) > sigma / 1.6
    curves = {
        "TextCNN": accuracy_rejection_curve(-sigma, rng.permutation(correct)),
        "TextCNN-UCL": accuracy_rejection_curve(-sigma, correct),
    }
    _assert_png(plot_arc(curves, tmp_path / "arc.png"))
    with pytest.raises(ValueError):
        plot_arc({}, tmp_path / "empty.png")


def test_balanced_sample() -> None:
    labels = np.array([0] * 50 + [1] * 30 + [2] * 5)
    idx = balanced_sample(labels, 30, seed=0)
    assert len(idx) == 30
    assert len(np.unique(idx)) == 30
    counts = np.bincount(labels[idx], minlength=3)
    assert counts[2] == 5  # the small class is taken whole
    assert counts[0] >= 10 and counts[1] >= 10
    np.testing.assert_array_equal(idx, balanced_sample(labels, 30, seed=0))
    np.testing.assert_array_equal(balanced_sample(labels, 1000, seed=0), np.arange(85))
    even = balanced_sample(np.repeat(np.arange(4), 100), 40, seed=1)
    np.testing.assert_array_equal(np.bincount(np.repeat(np.arange(4), 100)[even]), [10, 10, 10, 10])


def test_plot_tsne(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 40)
    emb = rng.normal(size=(120, 8)) + 4 * np.eye(8)[labels]
    out = plot_tsne(
        emb, labels, tmp_path / "sub" / "tsne.png", n=60, seed=0, label_names=["neg", "neu", "pos"]
    )
    _assert_png(out)


def test_plot_difficulty_single_and_compared(tmp_path: Path) -> None:
    sigma = np.array([0.5, 0.9, 1.2, 0.7, 1.0, 0.85, 1.5, 0.3, 0.95, 1.1])
    correct = np.array([1, 1, 0, 1, 0, 0, 0, 1, 1, 1], dtype=bool)
    bins = difficulty_bins(sigma, correct)
    _assert_png(plot_difficulty(bins, tmp_path / "one.png"))
    both = {"TextCNN": difficulty_bins(sigma, ~correct), "TextCNN-UCL": bins}
    _assert_png(plot_difficulty(both, tmp_path / "two.png"))


def test_plot_weight_heatmap(tmp_path: Path) -> None:
    w = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]])
    out = plot_weight_heatmap(w, ["Banking77", "Imdb"], ["qwen3", "f2llm", "gemma"], tmp_path / "w.png")
    _assert_png(out)
    with pytest.raises(ValueError):
        plot_weight_heatmap(w, ["a"], ["x", "y", "z"], tmp_path / "bad.png")


def test_failed_save_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "arc.png"
    curves = {"m": (np.array([0.0, 0.5]), np.array([0.7, 0.8]))}
    plot_arc(curves, target)
    before = target.read_bytes()

    def broken_savefig(self: Figure, fh, **kwargs) -> None:
        fh.write(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", broken_savefig)
    with pytest.raises(OSError, match="disk full"):
        plot_arc(curves, target)
    with pytest.raises(OSError, match="disk full"):
        plot_arc(curves, tmp_path / "new.png")
    assert target.read_bytes() == before  # the previous figure survives intact
    assert not (tmp_path / "new.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arc.png"]
