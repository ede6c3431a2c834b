"""The run body of ``recipe=auto`` heads fitted in memory: ``head=auto``, ``head=blend``, ``head=logreg``.

Writes ``head/`` (the chosen head, saved like any other) and, after cross-validated selection,
``heldout.safetensors``: the out-of-fold outputs the uncertainty profile is calibrated on, since every
train and validation row then trained the shipped head.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save
from sklearn.metrics import accuracy_score, f1_score

from ucse import atomic
from ucse.backbone.states import TokenStates
from ucse.config import HeadType, TrainConfig
from ucse.config.run_layout import RunFolder
from ucse.heads import save_head
from ucse.heads.outputs import Outputs
from ucse.training.auto import (
    WEIGHTS,
    AutoResult,
    cross_fitted_probe,
    fit_auto,
    fit_probe_head,
    join_states,
    predict_outputs,
)
from ucse.training.label_report import confusion_counts
from ucse.training.logreg import probe_features
from ucse.training.preflight import cross_validates


def _scores(logits: np.ndarray, y: np.ndarray) -> dict:
    pred = logits.argmax(1)
    return {"accuracy": float(accuracy_score(y, pred)), "f1_macro": float(f1_score(y, pred, average="macro"))}


def fit_auto_run(
    cfg: TrainConfig,
    run_dir: Path,
    device: torch.device,
    states: dict[str, TokenStates],
    labels: dict[str, np.ndarray],
    num_classes: int,
    meta: dict,
    groups: np.ndarray | None = None,
    refit_test: bool = False,
    all_groups: np.ndarray | None = None,
) -> dict:
    """Fit ``cfg.head`` (auto, blend or logreg), save it in ``run_dir/head``, return the run's metrics.

    ``groups``: (train + validation,) ids of copies of one text (``ucse.data.duplicates.text_groups``).
    ``refit_test``: the test split was carved from the user's rows and may train the shipped head once
    scored (``data.refit_test``); ``all_groups``: then the (train + test + validation,) copy groups.
    """
    t0 = time.perf_counter()
    head_type = HeadType(cfg.head.type)

    def choose(
        states: dict[str, TokenStates], labels: dict[str, np.ndarray], groups, extra=None
    ) -> AutoResult:
        """The cross-validated (or held-out) choice of the head over ``states``' train + validation."""
        if head_type is HeadType.logreg:
            return cross_fitted_probe(cfg, states, labels, num_classes, groups)
        weights = WEIGHTS if head_type is HeadType.auto else tuple(w for w in WEIGHTS if 0 < w < 1)
        return fit_auto(cfg, states, labels, num_classes, device, weights, groups, extra)

    # head=logreg trains on train and is calibrated on validation, unless validation is too small for that
    crossfit = cfg.data.refit and cross_validates(len(labels["validation"]), num_classes)
    # With a validation split to select on, the test rows join the one refit of the chosen recipe (the models
    # fitted before it score them); a set that cross-validates runs its whole choice again below.
    test_in = refit_test and cfg.data.refit and not crossfit and len(labels["test"]) > 0
    if head_type is HeadType.logreg and not crossfit:
        x = probe_features(states["train"], cfg.backbone.pooling)
        train_groups = None if groups is None else groups[: len(labels["train"])]
        h = states["train"].hidden_size
        head, info = fit_probe_head(cfg, x, labels["train"], num_classes, h, groups=train_groups)
        shipped = head
        if test_in:  # calibrated on validation: the test rows alone join its refit, at the chosen C
            x_all = np.concatenate([x, probe_features(states["test"], cfg.backbone.pooling)])
            y_all = np.concatenate([labels["train"], labels["test"]])
            shipped = fit_probe_head(cfg, x_all, y_all, num_classes, h, info["C"])[0]
        result = AutoResult(shipped, {"probe": info}, scoring_head=head if test_in else None)
    else:
        result = choose(states, labels, groups, (states["test"], labels["test"]) if test_in else None)
    if test_in:
        result.report = {**result.report, "refit_test": int(len(labels["test"]))}
    fit_s = time.perf_counter() - t0
    metrics: dict = {}
    outputs = predict_outputs(cfg, device)
    # never a head that trained on the rows it scores
    scoring = result.head if result.scoring_head is None else result.scoring_head
    for split, key in (("validation", "val"), ("test", "test")):
        if len(labels[split]) == 0:  # data.test_fraction=0: no test split, no test figures
            continue
        logits = outputs(scoring, states[split]).logits
        metrics[key] = _scores(logits, labels[split])
        if split == "test":  # the run turns it into test_per_label, as for a Lightning-trained head
            metrics["test_confusion"] = confusion_counts(logits, labels[split], num_classes)
    if crossfit and refit_test and len(labels["test"]):
        # scored above by the head fitted without them, the test rows now train the shipped head: the whole
        # choice runs again over every row (cheap on a set small enough to cross-validate)
        merged = {"train": join_states(states["train"], states["test"]), "validation": states["validation"]}
        merged_labels = {
            "train": np.concatenate([labels["train"], labels["test"]]),
            "validation": labels["validation"],
        }
        result = choose(merged, merged_labels, all_groups)
        result.report = {**result.report, "refit_test": int(len(labels["test"]))}
        fit_s = time.perf_counter() - t0
    head, heldout, estimate = result.head, result.heldout, result.estimate_logits
    if heldout is not None:  # the validation rows trained the head: report the held-out estimate
        held_labels = result.heldout_labels
        if estimate is not None:  # the selection's own out-of-fold predictions (see AutoResult)
            metrics["val"] = {**_scores(estimate, held_labels), "estimate": "cross-validated"}
        else:
            metrics["val"] = {**_scores(heldout.logits, held_labels), "estimate": "held-out, before refit"}
        # per label too: with few rows per label every row is held out once, the test slice holds one or none
        held_logits = estimate if estimate is not None else heldout.logits
        metrics["heldout_confusion"] = confusion_counts(held_logits, held_labels, num_classes)
        save_heldout(
            RunFolder(run_dir).heldout,
            heldout,
            held_labels,
            result.heldout_distances,
            result.heldout_bank_rows,
        )
    save_head(head, RunFolder(run_dir).head, meta)
    metrics["head"] = head.spec.config.type.value
    metrics["selection"] = result.report
    metrics["fit_s"] = round(fit_s, 3)
    metrics["trainable_params"] = sum(p.numel() for p in head.parameters())
    return metrics


def save_heldout(
    path: Path,
    out: Outputs,
    labels: np.ndarray,
    distances: np.ndarray | None = None,
    bank_rows: np.ndarray | None = None,
) -> None:
    """Write the held-out outputs, labels, distances and their banks' sizes as safetensors (atomically).

    ``distances``: (N, K) each row's nearest training rows; ``bank_rows``: (N,) how many rows the bank they
    were measured in held.
    """
    tensors = {
        "mean": torch.as_tensor(np.ascontiguousarray(out.mean, dtype=np.float32)),
        "logits": torch.as_tensor(np.ascontiguousarray(out.logits, dtype=np.float32)),
        "labels": torch.as_tensor(np.asarray(labels, dtype=np.int64)),
    }
    if out.var is not None:
        tensors["var"] = torch.as_tensor(np.ascontiguousarray(out.var, dtype=np.float32))
    if distances is not None:
        tensors["distances"] = torch.as_tensor(np.ascontiguousarray(distances, dtype=np.float32))
        if bank_rows is not None:
            tensors["bank_rows"] = torch.as_tensor(np.asarray(bank_rows, dtype=np.int64))
    with atomic.atomic_file(path, "wb") as f:
        f.write(save(tensors))


def load_heldout(path: Path, num_classes: int) -> tuple[Outputs, np.ndarray] | None:
    """The out-of-fold outputs a run saved, checked (an untrusted file: shapes, finiteness, label range).

    Returns:
        ``None`` when the run has none (holdout selection, or another head).

    Raises:
        ValueError: naming the file and what is wrong with it.
    """
    read = read_heldout(path, num_classes)
    return None if read is None else (read.outputs, read.labels)


class Heldout(NamedTuple):
    """The checked contents of ``heldout.safetensors``: rows under models that did not train on them."""

    outputs: Outputs
    """(N, ...) the out-of-fold head outputs."""
    labels: np.ndarray
    """(N,) their labels."""
    distances: np.ndarray | None
    """(N, K) each row's nearest-neighbour distances in the joint space, or ``None`` where none were saved."""
    bank_rows: np.ndarray | None
    """(N,) the size of the bank each row was searched in, or ``None`` (runs before the sizes were kept)."""


def read_heldout(path: Path, num_classes: int) -> Heldout | None:
    """The contents of ``heldout.safetensors``, every tensor checked; ``None`` without the file."""
    t = _read_heldout(path, num_classes)
    if t is None:
        return None
    out = Outputs(t["mean"].numpy(), t["var"].numpy() if "var" in t else None, t["logits"].numpy())
    optional = [t[k].numpy() if k in t else None for k in ("distances", "bank_rows")]
    return Heldout(out, t["labels"].numpy(), *optional)


def _read_heldout(path: Path, num_classes: int) -> dict[str, torch.Tensor] | None:
    """The tensors of ``heldout.safetensors``, every one checked; ``None`` without the file."""
    if not path.is_file():
        return None
    fix = "delete it and retrain, or refit with the run's own files"
    try:
        t = load_file(str(path))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{path}: not a readable safetensors file ({err}); {fix}.") from None
    need = {"mean", "logits", "labels"}
    extra = {"var", "distances", "bank_rows"} if "distances" in t else {"var"}
    if not need <= set(t) or set(t) - need - extra:
        raise ValueError(
            f"{path}: holds {sorted(t)}, expected mean, logits, labels (and var, distances, bank_rows); "
            f"{fix}."
        )
    n = t["labels"].shape[0]
    shapes_ok = (
        t["labels"].dim() == 1
        and t["logits"].shape == (n, num_classes)
        and t["mean"].dim() == 2
        and t["mean"].shape[0] == n
        and ("var" not in t or t["var"].shape == t["mean"].shape)
    )
    if not shapes_ok or n < 2:
        shapes = [tuple(v.shape) for v in t.values()]
        raise ValueError(f"{path}: shapes {shapes} do not fit a {num_classes}-class head; {fix}.")
    floats = [t[k] for k in ("mean", "logits", "var") if k in t]
    if not all(v.is_floating_point() and bool(torch.isfinite(v).all()) for v in floats):
        raise ValueError(f"{path}: holds non-finite or non-float values; {fix}.")
    y = t["labels"]
    if y.dtype != torch.int64 or int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"{path}: labels outside 0..{num_classes - 1}; {fix}.")
    if "var" in t and bool((t["var"] <= 0).any()):
        raise ValueError(f"{path}: variances must be > 0; {fix}.")
    if "distances" in t:
        d = t["distances"]
        ok = d.dim() == 2 and d.shape[0] == n and d.shape[1] >= 1 and d.dtype == torch.float32
        # Distances between unit rows lie in [0, 2] and each row's neighbours come nearest first.
        ok = ok and bool(torch.isfinite(d).all()) and bool(((d >= 0) & (d <= 2)).all())
        if not ok or bool((d[:, 1:] < d[:, :-1]).any()):
            raise ValueError(
                f"{path}: distances {tuple(d.shape)} are not {n} rows of ascending float32 values in "
                f"[0, 2]; {fix}."
            )
        if "bank_rows" in t:  # each bank held at least the neighbours its row's distances name
            r = t["bank_rows"]
            if r.dtype != torch.int64 or r.shape != (n,) or int(r.min()) < d.shape[1]:
                raise ValueError(f"{path}: bank_rows is not {n} bank sizes of at least {d.shape[1]}; {fix}.")
    return t
