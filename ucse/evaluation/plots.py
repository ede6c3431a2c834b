"""Figures: accuracy-rejection, t-SNE, difficulty bins, UEC weight heatmap, reliability, risk-coverage.

Every figure is written atomically (temporary file in the target folder, then an atomic rename), so an
interrupted or failing run never leaves a half-written PNG behind.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on training / CI machines

import matplotlib.pyplot as plt  # noqa: E402  (backend must be chosen before pyplot loads)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ucse import atomic  # noqa: E402
from ucse.uncertainty.sigma import BIN_NAMES  # noqa: E402


def _np(x: torch.Tensor | np.ndarray | Sequence) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().float().numpy()
    return np.asarray(x)


def save_figure(fig: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Write ``fig`` to ``path`` as PNG atomically and close it.

    Args:
        fig: the figure.
        path: target file; parent folders are created.
        dpi: resolution.

    Returns:
        The target path.
    """
    try:
        with atomic.atomic_file(path, "wb") as fh, warnings.catch_warnings():
            # A label with a character the font lacks (an emoji) is drawn as a box; matplotlib's warning,
            # with a line of its source, is no message for a user of ucse eval.
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
            fig.savefig(fh, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def plot_arc(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], path: str | Path) -> Path:
    """Accuracy-rejection curves, one line per method (paper Fig. 5, right).

    Args:
        curves: ``{method name: (rates (R,), accuracies (R,))}``.
        path: output PNG, conventionally ``arc.png``.

    Returns:
        The written path.
    """
    if not curves:
        raise ValueError("no curves to plot")
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    for name, (rates, accs) in curves.items():
        ax.plot(100 * _np(rates), 100 * _np(accs), marker="o", markersize=3, label=name)
    ax.set_xlabel("Rejection rate (%)")
    ax.set_ylabel("Accuracy on kept samples (%)")
    ax.set_title("Accuracy-rejection curve")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return save_figure(fig, path)


def balanced_sample(labels: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Indices of up to ``n`` samples drawn as evenly as possible over classes, without replacement.

    Each class gets floor(n / K) samples (fewer if it is smaller); slots left by small classes go to
    the remaining samples of larger classes at random. Returned indices are sorted.

    Args:
        labels: (N,) class ids.
        n: maximum sample count.
        seed: RNG seed.

    Returns:
        (min(n, N),) int64 indices into ``labels``.
    """
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    if n >= labels.size:
        return np.arange(labels.size)
    classes = np.unique(labels)
    per_class = n // len(classes)
    chosen: list[np.ndarray] = []
    leftovers: list[np.ndarray] = []
    for c in classes:
        idx = rng.permutation(np.flatnonzero(labels == c))
        chosen.append(idx[:per_class])
        leftovers.append(idx[per_class:])
    taken = np.concatenate(chosen)
    rest = rng.permutation(np.concatenate(leftovers))
    return np.sort(np.concatenate([taken, rest[: n - taken.size]])).astype(np.int64)


def plot_tsne(
    embeddings: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    path: str | Path,
    n: int = 2000,
    seed: int = 0,
    title: str = "t-SNE of test embeddings",
    label_names: Sequence[str] | None = None,
) -> Path:
    """2-D t-SNE of up to ``n`` class-balanced samples coloured by label (paper Fig. 4).

    Args:
        embeddings: (N, D) sentence embeddings (e.g. mu).
        labels: (N,) integer class ids.
        path: output PNG, conventionally ``tsne.png``.
        n: number of samples to embed (paper: 2000).
        seed: seed of the sampling and of t-SNE.
        title: figure title.
        label_names: optional names indexed by class id, for the legend.

    Returns:
        The written path.
    """
    from sklearn.manifold import TSNE  # imported here: sklearn.manifold is slow to import

    x = _np(embeddings).astype(np.float32)
    y = _np(labels).astype(np.int64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"embeddings must be (N, D) and labels (N,), got {x.shape}, {y.shape}")
    idx = balanced_sample(y, n, seed)
    x, y = x[idx], y[idx]
    # Perplexity must stay below the sample count; 30 is sklearn's default for large samples.
    perplexity = float(min(30.0, max(2.0, (len(x) - 1) / 3)))
    xy = TSNE(n_components=2, init="pca", perplexity=perplexity, random_state=seed).fit_transform(x)

    classes = np.unique(y)
    cmap = plt.get_cmap("tab10" if len(classes) <= 10 else "tab20")
    fig, ax = plt.subplots(figsize=(6.0, 5.5))
    for i, c in enumerate(classes):
        m = y == c
        name = label_names[c] if label_names is not None else f"class {c}"
        ax.scatter(xy[m, 0], xy[m, 1], s=6, alpha=0.7, color=cmap(i % cmap.N), label=name)
    ax.set_title(f"{title} (n={len(x)})")
    ax.set_xlabel("t-SNE dimension 1")
    ax.set_ylabel("t-SNE dimension 2")
    # Beyond 20 classes colours repeat and a legend stops being readable, so it is dropped.
    if len(classes) <= 20:
        ax.legend(markerscale=2, fontsize="small", loc="best", ncol=1 if len(classes) <= 10 else 2)
    return save_figure(fig, path)


def plot_difficulty(
    bins: Mapping[str, Mapping[str, float]] | Mapping[str, Mapping[str, Mapping[str, float]]],
    path: str | Path,
) -> Path:
    """Bar chart of the share of errors per difficulty bin (paper Fig. 5, left).

    Args:
        bins: one :func:`ucse.uncertainty.sigma.difficulty_bins` result, or ``{method name: result}``
            to compare methods side by side.
        path: output PNG.

    Returns:
        The written path.
    """
    first = next(iter(bins.values()))
    methods = {"model": bins} if "error_share" in first else dict(bins)
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    width = 0.8 / len(methods)
    x = np.arange(len(BIN_NAMES))
    for i, (name, result) in enumerate(methods.items()):
        shares = [100 * result[b]["error_share"] for b in BIN_NAMES]
        bars = ax.bar(x + (i - (len(methods) - 1) / 2) * width, shares, width, label=name)
        ax.bar_label(bars, fmt="%.1f", fontsize="small")
    ax.set_xticks(x, BIN_NAMES)
    ax.set_xlabel("Difficulty (by predicted sigma)")
    ax.set_ylabel("Share of misclassified samples (%)")
    ax.set_title("Where the errors fall")
    ax.legend()
    return save_figure(fig, path)


def plot_weight_heatmap(
    weights: torch.Tensor | np.ndarray,
    row_names: Sequence[str],
    member_names: Sequence[str],
    path: str | Path,
    title: str = "UEC ensemble weights",
    row_label: str = "Task",
) -> Path:
    """Heatmap of ensemble member weights, one row per task (or sample group), one column per member.

    Args:
        weights: (rows, K) weights, e.g. mean per-task UEC weights.
        row_names: (rows,) row labels.
        member_names: (K,) ensemble member labels.
        path: output PNG.
        title: figure title.
        row_label: y-axis label naming what the rows are.

    Returns:
        The written path.
    """
    w = _np(weights).astype(np.float64)
    if w.shape != (len(row_names), len(member_names)):
        raise ValueError(
            f"weights {w.shape} do not match {len(row_names)} rows x {len(member_names)} members"
        )
    fig, ax = plt.subplots(figsize=(1.2 * len(member_names) + 3, 0.45 * len(row_names) + 1.8))
    im = ax.imshow(w, cmap="viridis", aspect="auto")
    ax.set_xticks(np.arange(len(member_names)), member_names, rotation=30, ha="right")
    ax.set_yticks(np.arange(len(row_names)), row_names)
    mid = (np.nanmax(w) + np.nanmin(w)) / 2
    for (i, j), v in np.ndenumerate(w):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="black" if v > mid else "white")
    ax.set_xlabel("Ensemble member")
    ax.set_ylabel(row_label)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="Weight")
    return save_figure(fig, path)


def plot_reliability(
    bins: Mapping[str, Mapping[str, Sequence[float]]], path: str | Path, title: str = "Reliability diagram"
) -> Path:
    """Reliability diagram: accuracy per confidence bin against the diagonal, one panel per calibration.

    Args:
        bins: ``{name (e.g. "before", "after T=1.4"): ucse.uncertainty.calibration.reliability_bins(...)}``.
        path: output PNG, conventionally ``reliability.png``.
        title: figure title.

    Returns:
        The written path.
    """
    if not bins:
        raise ValueError("no reliability bins to plot")
    fig, axes = plt.subplots(1, len(bins), figsize=(4.2 * len(bins), 4.2), squeeze=False)
    for ax, (name, b) in zip(axes[0], bins.items(), strict=True):
        edges = np.asarray(b["edges"])
        acc = np.nan_to_num(np.asarray(b["accuracy"], dtype=float))
        conf = np.asarray(b["confidence"], dtype=float)
        count = np.asarray(b["count"], dtype=float)
        width = np.diff(edges)
        ax.bar(edges[:-1], acc, width=width, align="edge", edgecolor="black", alpha=0.7, label="accuracy")
        conf = np.where(count > 0, conf, acc)  # empty bins: no gap
        ax.bar(
            edges[:-1],
            np.abs(conf - acc),
            bottom=np.minimum(conf, acc),
            width=width,
            align="edge",
            fill=False,
            edgecolor="tab:red",
            hatch="//",
            lw=0.8,
            label="gap to mean confidence",
        )
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("Confidence (max probability)")
        ax.set_ylabel("Accuracy")
        ax.set_title(name)
        ax.legend(loc="upper left", fontsize="small")
    fig.suptitle(title)
    return save_figure(fig, path)


def plot_risk_coverage(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    path: str | Path,
    operating_point: tuple[float, float] | None = None,
    title: str = "Risk-coverage",
) -> Path:
    """Selective risk against coverage, one line per uncertainty score (lower is better).

    Args:
        curves: ``{score name (with its AURC): (coverage (N,), risk (N,))}``.
        path: output PNG, conventionally ``risk_coverage.png``.
        operating_point: ``(coverage, error)`` reached on test by the saved abstention threshold.
        title: figure title.

    Returns:
        The written path.
    """
    if not curves:
        raise ValueError("no curves to plot")
    fig, ax = plt.subplots(figsize=(6.0, 4.3))
    for name, (cov, risk) in curves.items():
        ax.plot(100 * _np(cov), 100 * _np(risk), lw=1.4, label=name)
    if operating_point is not None:
        ax.plot(
            100 * operating_point[0], 100 * operating_point[1], "k*", ms=12, label="saved threshold (test)"
        )
    ax.set_xlabel("Coverage: texts answered (%)")
    ax.set_ylabel("Error on answered texts (%)")
    ax.set_xlim(0, 100)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return save_figure(fig, path)
