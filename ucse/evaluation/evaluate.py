"""``eval.py run=<run folder>``: test metrics, calibration, uncertainty analyses, plots, efficiency, MTEB."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ucse import atomic
from ucse.config import TrainConfig, from_yaml
from ucse.config.run_layout import RunFolder, read_run_metrics, trained_on_test
from ucse.core.encoder import EncodedBatch, UcseEncoder
from ucse.core.run_folder import check_same_splits, finished_run, relocate_data, run_data
from ucse.data import TaskData, load_classification
from ucse.evaluation.config import EvalConfig
from ucse.evaluation.efficiency import count_parameters, measure_throughput
from ucse.evaluation.metrics import classification_metrics
from ucse.evaluation.plots import plot_arc, plot_difficulty, plot_tsne
from ucse.evaluation.uncertainty_report import actionable_report
from ucse.training.logreg import pooled_embeddings
from ucse.training.run import build_states, resolve_device, task_pool
from ucse.uncertainty.fit import classifier_weight, fit_profile
from ucse.uncertainty.profile import UncertaintyOutput, UncertaintyProfile, load_uncertainty_profile
from ucse.uncertainty.sigma import (
    accuracy_rejection_curve,
    arc_area,
    confidence_from_probs,
    confidence_from_sigma,
    difficulty_bins,
    sigma_scores,
)

log = logging.getLogger(__name__)

TSNE_MIN_ROWS = 3
"""A split of at most this many rows gets no t-SNE plot (sklearn's TSNE needs perplexity < n_samples)."""


class PooledBackboneEncoder:
    """The raw frozen backbone as a ``TextEncoder``: its pooled embedding (the MTEB baseline).

    Shares the trained encoder's token states, so known texts cost no backbone pass.
    """

    def __init__(self, encoder: UcseEncoder) -> None:
        self.encoder = encoder

    def encode(self, texts: list[str]) -> np.ndarray:
        """Texts -> (N, H) pooled embeddings with the backbone config's pooling."""
        return pooled_embeddings(self.encoder.states_for(list(texts)), self.encoder.backbone.cfg.pooling)


def load_run(
    run: str | Path, data_root: str | None = None, data_path: str | None = None
) -> tuple[Path, TrainConfig]:
    """The run folder and its resolved training config, its data where they are now (``relocate_data``)."""
    path = finished_run(run)
    cfg = from_yaml(RunFolder(path).config)
    relocate_data(cfg, data_root, data_path)
    return path, cfg


def attach_run_states(encoder: UcseEncoder, cfg: TrainConfig, data: TaskData | None = None) -> dict:
    """Serve every text of the run's task to ``encoder`` from the run's hidden-state cache entry.

    Every split is a view of one pool of the task's texts, so MTEB's (and an ensemble's) texts of that task
    are served from it too; the entry is built (one backbone pass) only if the cache lost it.

    Returns:
        The run's split name -> token states.
    """
    data = data or load_classification(cfg.task, cfg.data, cfg.seed)
    states, _ = build_states(cfg, encoder.backbone, data)
    encoder.attach_states(task_pool(data), states["train"].base)
    return states


def check_label_names(head: list[str], data: list[str], head_dir: Path) -> None:
    """The head's classes (in logit order) must be the data's label names in the same order.

    Raises:
        ValueError: on other names, or the same names in another order (label ids would not line up).
    """
    if not head or head == data:
        return
    if sorted(head) == sorted(data):
        at = next(i for i, (a, b) in enumerate(zip(head, data, strict=True)) if a != b)
        raise ValueError(
            f"The head in {head_dir} and the data name the same labels in another order (id {at}: "
            f"{head[at]!r} in the head, {data[at]!r} in the data), so label ids would not line up; evaluate "
            "on data whose label ids follow the head's label_names."
        )
    raise ValueError(
        f"The head in {head_dir} was trained on {len(head)} labels, the data has {len(data)} (only in the "
        f"head: {sorted(set(head) - set(data))[:5]}, only in the data: {sorted(set(data) - set(head))[:5]}); "
        "evaluate on the task the run was trained on."
    )


def uncertainty_report(out: EncodedBatch, labels: np.ndarray, thresholds: list[float]) -> tuple[dict, dict]:
    """Accuracy-rejection curves (by max probability and, with a variance branch, by sigma) and sigma bins."""
    probs = torch.softmax(torch.from_numpy(out.logits).double(), dim=1).numpy()  # (N, C)
    correct = probs.argmax(1) == labels  # (N,)
    curves = {"max probability": accuracy_rejection_curve(confidence_from_probs(probs), correct)}
    report: dict = {}
    if out.var is not None:
        sigma = sigma_scores(out.var)  # (N,)
        curves["sigma (UCL)"] = accuracy_rejection_curve(confidence_from_sigma(sigma), correct)
        report["sigma"] = {
            "mean": float(sigma.mean()),
            "quantiles": dict(zip(("p05", "p50", "p95"), map(float, np.quantile(sigma, [0.05, 0.5, 0.95])))),
            "error_vs_correct_mean": [float(sigma[~correct].mean()), float(sigma[correct].mean())]
            if (~correct).any()
            else None,
        }
        report["difficulty_bins"] = difficulty_bins(sigma, correct, tuple(thresholds))
        report["thresholds"] = list(thresholds)
        full = [name for name, b in report["difficulty_bins"].items() if b["count"] == len(sigma)]
        if full and len(sigma) > 1:  # the paper's thresholds are its backbones' scale, not every head's
            thirds = np.quantile(sigma, [1 / 3, 2 / 3])
            log.warning(
                "all %d texts fall in the %s difficulty bin (sigma %.3g-%.3g, sigma_thresholds=%s): the bins "
                "say nothing here; sigma_thresholds=[%.3g,%.3g] splits them in thirds.",
                len(sigma),
                full[0],
                float(sigma.min()),
                float(sigma.max()),
                list(thresholds),
                *map(float, thirds),
            )
    report["arc"] = {
        name: {"rates": r.tolist(), "accuracy": a.tolist(), "area": arc_area(r, a)}
        for name, (r, a) in curves.items()
    }
    return report, curves


def run_profile(
    run: Path, train_cfg: TrainConfig, encoder: UcseEncoder, data, states: dict
) -> tuple[UncertaintyProfile, str]:
    """The run's saved uncertainty profile, or one fitted now on its validation split (not saved).

    Returns:
        ``(profile, source)`` with source ``"saved"``, ``"fitted at evaluation"`` or, for a run trained with
        ``uncertainty.enabled=false``, the plain softmax profile.
    """
    profile = load_uncertainty_profile(RunFolder(run).head, num_classes=data.num_classes)
    if profile.fitted:
        return profile, "saved"
    if not train_cfg.uncertainty.enabled:
        return profile, "plain softmax (uncertainty.enabled=false)"
    # as ucse calibrate and review refuse: a profile fitted on other rows could read rows the head trained on
    check_same_splits(run, data, ("train", "validation"), refuse=True)
    val, train = encoder.run_states(states["validation"]), encoder.run_states(states["train"])
    fitted = fit_profile(
        val,
        data.labels("validation"),
        train_cfg.uncertainty,
        classifier_weight(encoder.head),
        train,
        data.labels("train"),
        label_names=data.label_names,
    )
    return fitted, "fitted at evaluation"


def efficiency_report(encoder: UcseEncoder, texts: list[str], batches: int, batch_size: int) -> dict:
    """Paper Table 5: parameters, latency and throughput of backbone alone vs backbone + head, end to end.

    Each chunk of ``batch_size`` texts is one forward pass on both paths (fewer texts where the chunk's
    padded tokens exceed ``backbone.max_batch_tokens``), so ``batch_size`` in the report is the batch timed.
    """
    chunk = [texts[i : i + batch_size] for i in range(0, min(len(texts), batches * batch_size), batch_size)]
    # Both paths run the backbone on the fly: attached cache states must not make the full path look free.
    timing = measure_throughput(
        lambda b: encoder.backbone.pooled(b, batch_size=len(b)),
        lambda b: encoder.run_texts(b, batch_size=len(b)),
        chunk,
        warmup=1,
        repeats=3,
    )
    frozen = count_parameters(encoder.backbone.model)
    head = count_parameters(encoder.head, trainable_only=False)
    return {
        "backbone_params": frozen,
        "head_params": head,
        "param_overhead_percent": 100.0 * head / frozen,
        "batch_size": batch_size,
        **timing,
    }


def mteb_report(encoder: UcseEncoder, cfg: TrainConfig, batch_size: int) -> dict:
    """Official MTEB task on the trained encoder (mu) and on the raw backbone's pooled embedding."""
    from ucse.data.tasks import resolve_data_root
    from ucse.evaluation.mteb_eval import evaluate_classification, load_hub_task, load_local_task

    root = resolve_data_root(cfg.data)
    results = {}
    for name, enc in (
        ("trained_encoder_mu", encoder),
        ("raw_backbone_pooled", PooledBackboneEncoder(encoder)),
    ):
        # A fresh task object per model: evaluation consumes the task's state.
        task = (
            load_local_task(cfg.task.name, root, None, cfg.data.text_column, cfg.data.label_column)
            if root
            else load_hub_task(cfg.task.name)
        )
        results[name] = evaluate_classification(enc, task, batch_size=batch_size)
        log.info("MTEB %s %s: %.4f", cfg.task.name, name, results[name]["main_score"])
    from ucse.heads.probe import ProbeHead

    if isinstance(encoder.head, ProbeHead):  # its "mu" is the pooled vector, normalised: nothing trained
        results["trained_encoder_mu"]["note"] = (
            "a logistic-regression head: its embedding is the frozen pooled vector, L2-normalised, so the "
            "gap to raw_backbone_pooled is that normalisation, not training"
        )
    return results


def in_sample(run: Path, split: str) -> str | None:
    """Why the shipped head trained on ``split``'s rows, making its figures there in-sample (``None``: not).

    A refit on train + validation (``head=auto``) trains on the validation rows; ``data.refit_test`` on a
    user's own small file trains on the test rows too (an ops trial archived ``ucse eval``'s 100 % on them
    as the week's figure, where the training had printed 92 % held out).
    """
    metrics = read_run_metrics(run, "no in-sample note")
    val, test = metrics.get("val"), metrics.get("test")
    refit_val = isinstance(val, dict) and val.get("estimate") in REFIT_ESTIMATES
    # (head=logreg on a validation split calibrates there: its refit takes the test rows, not those)
    if trained_on_test(metrics) and (split == "test" or refit_val):
        acc = test.get("accuracy") if isinstance(test, dict) else None
        held = f": accuracy {acc:.4f}" if isinstance(acc, float) else ""
        return (
            "the shipped head was refitted on the run's rows, test included (data.refit_test), so "
            "these rows trained it; the held-out estimate is the one training printed (metrics.json's "
            f"test{held}); score new labelled texts with ucse eval run={run} input=<file>"
        )
    if split != "test" and refit_val:
        return (
            "the shipped head was refitted on train + validation, so these rows trained it; split=test is "
            "held out"
        )
    return None


REFIT_ESTIMATES = ("cross-validated", "held-out, before refit")
"""``metrics.json``'s ``val.estimate`` where the shipped head was refitted on train + validation."""


def evaluate_run(cfg: EvalConfig) -> dict:
    """Evaluate a run folder on ``cfg.split`` and write ``eval.json`` (+ plots) into it.

    The head is reloaded from ``head/`` (not from Lightning checkpoints) with the backbone named in the run's
    ``config.yaml``; token states come from the hidden-state cache when the training run left them there.
    """
    run, train_cfg = load_run(cfg.run or "", cfg.data_root, cfg.data_path)
    fix = "score labelled texts from Python with UcseClassifier.from_pretrained(run).score(texts, labels)"
    # before the backbone loads
    data = run_data(run, train_cfg, cfg.data_root, cfg.data_path, "eval", fix)
    device = resolve_device(cfg.accelerator)
    folder = RunFolder(run)
    encoder = UcseEncoder.from_dir(folder.head, device=device, trust_remote_code=cfg.trust_remote_code)
    if cfg.split not in data.splits:
        raise ValueError(f"split={cfg.split!r} is not one of {list(data.splits)}.")
    if len(data.splits[cfg.split]) == 0:  # data.test_fraction=0, or a file too small to carve test rows
        others = [s for s, ds in data.splits.items() if len(ds) and s != "train"]
        hint = f"; evaluate another with split={others[0]}" if others else ""
        raise ValueError(f"The run {run} has no {cfg.split} rows (its training carved none){hint}.")
    check_label_names(encoder.label_names, list(data.label_names), folder.head)
    check_same_splits(run, data, (cfg.split,), refuse=False)
    note = in_sample(run, cfg.split)
    if note is not None:
        log.warning("split=%s: the figures are in-sample: %s.", cfg.split, note)
    states = attach_run_states(encoder, train_cfg, data)
    out = encoder.run_states(states[cfg.split])
    labels = data.labels(cfg.split)
    report: dict = {"run": str(run), "task": train_cfg.task.name, "split": cfg.split, "n": len(labels)}
    report |= {} if note is None else {"in_sample": note}
    profile, source = run_profile(run, train_cfg, encoder, data, states)
    figures, curves = judge_outputs(
        out, labels, data.label_values, profile, cfg.sigma_thresholds, run if cfg.plots else None
    )
    report |= figures
    unc = report["uncertainty"]
    report["profile_source"] = source
    extra_plots = report.pop("plots", [])
    if cfg.plots:
        report["plots"] = [str(plot_arc(curves, run / "arc.png"))]
        if len(labels) > TSNE_MIN_ROWS:  # t-SNE's perplexity (>= 2) must stay below the number of points
            tsne = plot_tsne(
                out.mean,
                labels,
                run / "tsne.png",
                n=cfg.tsne_samples,
                seed=train_cfg.seed,
                title=f"t-SNE of mu: {train_cfg.task.name} {cfg.split}",
                label_names=data.label_names,
            )
            report["plots"].append(str(tsne))
        if "difficulty_bins" in unc:
            report["plots"].append(str(plot_difficulty(unc["difficulty_bins"], run / "difficulty.png")))
        else:  # the sigma bins need a variance branch
            log.info("no difficulty.png: the head has no variance branch (head=textcnn has one)")
        report["plots"] += extra_plots
    if cfg.efficiency:
        report["efficiency"] = efficiency_report(
            encoder, data.texts(cfg.split), cfg.efficiency_batches, cfg.batch_size
        )
    if cfg.mteb:
        report["mteb"] = mteb_report(encoder, train_cfg, cfg.batch_size)
    atomic.write_json(folder.eval_report(cfg.split), report)
    return terminal_view(report)


def judge_outputs(
    out: EncodedBatch,
    labels: np.ndarray,
    label_names: Sequence[str | int],
    profile: UncertaintyProfile,
    thresholds: list[float],
    plots_dir: Path | None,
    res: UncertaintyOutput | None = None,
) -> tuple[dict, dict]:
    """A report's figures for one set of head outputs, and the accuracy-rejection curves to plot.

    ``res``: ``profile.apply`` of ``out`` with sets, where the caller needs it too (applied once).

    Returns:
        ``({"metrics", "uncertainty", ...actionable_report's sections}, curves)``.
    """
    figures: dict = {"metrics": classification_metrics(out.logits, labels, len(label_names))}
    figures["uncertainty"], curves = uncertainty_report(out, labels, thresholds)
    figures |= actionable_report(profile, out, labels, plots_dir, label_names, res)
    return figures, curves


def terminal_view(report: dict) -> dict:
    """What a command hands its summary: the report without its curves, with their areas."""
    areas = {k: v["area"] for k, v in report["uncertainty"]["arc"].items()}
    return {k: v for k, v in report.items() if k != "uncertainty"} | {"arc_area": areas}
