"""``python eval.py ensemble=<name> task=<task>``: members, baselines and UEC variants, scored by mteb.

Members are built (Laplace fits cached under ``<cache>/uec/laplace``, pooled backbone embeddings under
``<cache>/uec/pooled``), given comparable variance scales on held-out positive pairs and aligned into one
space where needed (``ucse/uec/ensemble_members.py``). Member Gaussians of every evaluated text are
computed once (``<cache>/uec/embeddings``); each variant then runs as its own mteb encoder over them, so
mteb's STS / retrieval / classification evaluators produce every number, with the variant's similarity
in the hooks. The task may be the user's own data (``ucse/uec/ensemble_task.py``).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from ucse import json_read
from ucse.atomic import write_json, write_text
from ucse.backbone.device import resolve_device
from ucse.config import DataConfig, TaskType
from ucse.data.tasks import DataError, resolve_data_root
from ucse.evaluation.config import EvalConfig
from ucse.evaluation.plots import plot_weight_heatmap
from ucse.uec.config import EnsembleConfig, load_ensemble_config
from ucse.uec.convolution import TemperatureMode, paper_temperature
from ucse.uec.digest import cache_root
from ucse.uec.ensemble import (
    GAUSSIAN_VARIANTS,
    OWN_SPACE_VARIANTS,
    RANK_VARIANTS,
    WEIGHTED_VARIANTS,
    UecEnsemble,
    Variant,
    VariantScorer,
    concatenate,
)
from ucse.uec.ensemble_merges import merge_members, merge_scorer
from ucse.uec.ensemble_task import EnsembleTask, ndcg_at_10, task_config
from ucse.uec.fusion import simplex_grid, weighted_ensemble
from ucse.uec.members import CachedMember
from ucse.uec.validation_choice import choose_members
from ucse.uec.weight_signal import weight_signal

__all__ = ["ndcg_at_10", "run_ensemble", "write_weight_summary"]
logger = logging.getLogger(__name__)


def _with_beta(cfg: EnsembleConfig, ens: UecEnsemble, task: EnsembleTask, members: list, **kw: Any) -> tuple:
    """A Gaussian variant's scorer with beta fixed by the config or chosen on the validation split."""
    scorer = ens.scorer(**kw)
    if cfg.beta is not None:
        return scorer, f"beta {cfg.beta}"
    if task.type is TaskType.classification:
        return scorer, "beta unused (classification probes the mean)"
    if not task.has_validation:
        scorer.beta = 1.0
        return scorer, "beta 1 (no validation split to choose it on)"
    scores = {}
    for beta in cfg.beta_grid:
        scorer.beta = float(beta)
        scores[beta] = task.validate(scorer, members)
    scorer.beta = float(max(scores, key=scores.get))
    return scorer, f"beta {scorer.beta:g} on validation ({ {b: round(s, 4) for b, s in scores.items()} })"


def _pick_weights(cfg: EnsembleConfig, task: EnsembleTask, members: list, variant: Variant) -> tuple:
    means, score_fn = task.validation_means(members)
    combine = weighted_ensemble if variant is Variant.weighted else concatenate
    grid = simplex_grid(len(members), cfg.weight_step, cfg.weight_min)
    scores = torch.tensor([float(score_fn(combine(means, w.tolist()))) for w in grid])
    best = grid[int(scores.argmax())]
    note = f"weights {[round(float(w), 2) for w in best]} on validation (score {float(scores.max()):.4f})"
    return tuple(float(w) for w in best), note


def _scorers(
    cfg: EnsembleConfig,
    ens: UecEnsemble,
    task: EnsembleTask,
    members: list[CachedMember],
    own: list[CachedMember],
) -> dict:
    """Name -> (VariantScorer, note, the members it reads) for every variant that applies to this task.

    Rows that fuse in one space (UEC, its ablations, averaging) read the aligned ``members``; rows that score
    each member in its own space (a member alone, concatenations, rank fusion) read ``own``, the members
    before alignment: a projection into another member's space would only lose what they know.
    """
    out: dict[str, tuple[VariantScorer, str, list[CachedMember]]] = {}
    dims = tuple(m.dim for m in own)
    for choice in cfg.variants:
        variant = Variant(choice)
        name = variant.value  # the row's name in reports (an f-string of the member would read Variant.x)
        rows = own if variant in OWN_SPACE_VARIANTS else members
        kw = {"member_dims": dims} if variant in OWN_SPACE_VARIANTS else {}
        if variant in RANK_VARIANTS and task.type is not TaskType.retrieval:
            continue  # rank fusion is retrieval-only
        if variant in (Variant.member, Variant.member_probit):
            for k, m in enumerate(rows):
                if variant is Variant.member:
                    out[f"{name}:{m.member_id}"] = (ens.scorer(variant, member=k, **kw), "", rows)
                else:
                    scorer, note = _with_beta(cfg, ens, task, rows, variant=variant, member=k, **kw)
                    out[f"{name}:{m.member_id}"] = (scorer, note, rows)
        elif variant in WEIGHTED_VARIANTS:
            if len(members) < 2 or not task.has_validation:
                continue  # one member, or no validation split to pick the weights on
            weights, note = _pick_weights(cfg, task, rows, variant)
            out[name] = (ens.scorer(variant, weights=weights, **kw), note, rows)
        elif variant in RANK_VARIANTS:
            n_docs = len(task.docs)
            out[name] = (ens.scorer(variant, rrf_k=cfg.rrf_k, expected_candidates=n_docs, **kw), "", rows)
        elif variant in GAUSSIAN_VARIANTS:
            out[name] = (*_with_beta(cfg, ens, task, rows, variant=variant, **kw), rows)
        else:
            out[name] = (ens.scorer(variant, **kw), "", rows)
    return out


def _skipped(cfg: EnsembleConfig, task: EnsembleTask, n_members: int, ran: dict) -> dict[str, str]:
    """The configured variants and merges that did not run here, each with why (none is dropped unsaid)."""
    why: dict[str, str] = {}
    no_tuning = (
        "no validation split here to choose it on"
        if task.type is not TaskType.classification
        else "classification is scored by mteb's probe, with nothing chosen on validation"
    )
    for choice in cfg.variants:
        v = Variant(choice)
        if v in RANK_VARIANTS and task.type is not TaskType.retrieval:
            why[v.value] = "rank fusion is for retrieval"
        elif v in WEIGHTED_VARIANTS and v.value not in ran:
            why[v.value] = "one member" if n_members < 2 else no_tuning
    for m in cfg.merges:
        name = f"merge_{m}" if m != "task_arithmetic" else m
        if name in ran:
            continue
        if task.type is TaskType.retrieval and not cfg.merge_retrieval:
            why[name] = "merges skip retrieval (merge_retrieval=false)"
        elif m != "uniform" and not task.has_validation:
            why[name] = no_tuning
        else:
            why[name] = "parameter merging needs two or more backbone (Laplace) members of one architecture"
    return why


def _markdown(report: dict) -> str:
    metrics = report["metrics"]
    lines = [
        f"# Ensemble {report['ensemble']} on {report['task']} ({report['split']})",
        "",
        f"Ranked by: {report['ranked_by']}. T = {report['temperature']} ({report['temperature_mode']}).",
        "",
        "| variant | " + " | ".join(metrics) + " | note |",
        "|" + "---|" * (len(metrics) + 2),
    ]
    for name, row in report["results"].items():
        vals = " | ".join(f"{100 * row['scores'].get(m, float('nan')):.2f}" for m in metrics)
        lines.append(f"| {name} | {vals} | {row['note']} |")
    sts = report.get("task_type") == TaskType.sts.value
    lines += [
        "",
        "Scores x100, from mteb's evaluators"
        + (
            " (`spearman` = the variant's own similarity, `cosine_spearman` = cosine of the returned "
            "embedding, the fused mean)."
            if sts
            else "."
        ),
    ]
    if report.get("skipped"):
        lines += ["", "Not run here: " + "; ".join(f"{k} ({v})" for k, v in report["skipped"].items()) + "."]
    lines += [
        "",
        "| member | kind | prior precision | variance scale | mean tr(var) (unit space, scaled) "
        "| mean UEC weight |",
        "|---|---|---|---|---|---|",
    ]
    for m in report["members"]:
        lines.append(
            f"| {m['id']} | {m.get('kind', '-')} | {m.get('prior_precision', '-')} "
            f"| {m.get('variance_scale', 1.0):.4g} | {m['mean_trace']:.4g} | {m['mean_weight']:.3f} |"
        )
    choice = report.get("choice") or {}
    if "space_validation" in choice or "scales" in choice:
        lines += ["", f"Chosen on validation: {json.dumps(choice)}"]
    signal = report.get("weight_signal")
    if signal:
        lines += [
            "",
            f"Per-input weights vs per-input member quality on the test split: correlation "
            f"{signal['per_input_correlation']:.3f}; where one member is better ({signal['inputs']} inputs) "
            f"it gets {signal['weight_on_better']:.3f} of the weight "
            f"(its mean weight {signal['its_mean_weight']:.3f}).",
        ]
    return "\n".join(lines) + "\n"


def write_weight_summary(ensemble_dir: Path, name: str | None = None) -> Path | None:
    """One heatmap of the mean UEC weights of every task this ensemble was run on (paper Fig. 4).

    Reads ``<ensemble_dir>/<task>/ensemble.json``; rows are the tasks' inputs (e.g. SciFact queries),
    columns the members. With ``name``, reports of other ensembles in that folder (a user's ``out=`` may
    sit beside anything) are left out. Returns the PNG path, or ``None`` when no run has been written yet.

    Raises:
        ValueError: two reports of the same ensemble list different members.
    """
    rows: dict[str, list[float]] = {}
    members: list[str] | None = None
    for path in sorted(Path(ensemble_dir).glob("*/ensemble.json")):
        try:
            report = json_read.loads(path.read_text())
            if not isinstance(report, dict) or (name is not None and report.get("ensemble") != name):
                continue
            ids = [m["id"] for m in report["members"]]
            weights = dict(report["weights_per_row"])
        except (OSError, ValueError, KeyError, TypeError) as err:  # a file of the same name, not a report
            logger.warning("%s is not an ensemble report (%s); left out of the weight summary", path, err)
            continue
        if members is not None and ids != members:
            raise ValueError(f"{path} has members {ids}, other tasks of {ensemble_dir} have {members}.")
        members = ids
        rows.update(weights)
    if not rows or members is None:
        return None
    weights = torch.tensor(list(rows.values()))  # (rows, K)
    return plot_weight_heatmap(
        weights,
        list(rows),
        members,
        Path(ensemble_dir) / "weights_by_task.png",
        title=f"Mean UEC weights per task: {Path(ensemble_dir).name}",
    )


def run_ensemble(cfg: EvalConfig) -> dict:
    """Evaluate ensemble ``cfg.ensemble`` on ``cfg.task``; write ensemble.json, .md, weights.png to out."""
    from ucse.evaluation import mteb_eval  # mteb's tasks (slow import)
    from ucse.uec.mteb_encoder import UecMtebEncoder  # imports mteb too

    if not cfg.task:
        raise DataError("ensemble mode needs task=<name>, e.g. task=STSBenchmark or task=SciFact")
    ens_cfg = load_ensemble_config(cfg.ensemble)
    root = resolve_data_root(DataConfig(root=cfg.data_root))
    if root is None:
        raise DataError("ensemble mode reads local data: pass data_root=<folder> or set env UCSE_DATA_DIR")
    task_cfg = task_config(cfg.task, root)
    device = resolve_device(cfg.accelerator)
    out = Path(cfg.out or Path("runs") / "ensembles" / ens_cfg.name / task_cfg.name)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    temperature = ens_cfg.temperature or paper_temperature(ens_cfg.temperature_family)
    task = EnsembleTask(task_cfg, root, mteb_eval)
    built, members, fit_info, align_info, choice = choose_members(
        ens_cfg, task_cfg, task, root, device, temperature
    )
    temperature = choice.get("temperature", temperature)  # 0 where equal weights won on validation
    timings["members_s"] = time.perf_counter() - start
    cached = [CachedMember(m, cache_root() / "uec" / "embeddings") for m in members]
    # The members in their own spaces (before alignment), for the rows that need no common space.
    own = [
        c if m is b else CachedMember(b, cache_root() / "uec" / "embeddings")
        for c, m, b in zip(cached, members, built)
    ]
    ens = UecEnsemble(
        cached,
        ens_cfg.rule,
        temperature,
        ens_cfg.similarity,
        1.0 if ens_cfg.beta is None else ens_cfg.beta,
        temperature_mode=ens_cfg.temperature_mode,
    )
    start = time.perf_counter()
    for m in dict.fromkeys(cached + own):
        m.precompute(task.texts)
    timings["encode_s"] = time.perf_counter() - start
    start = time.perf_counter()
    scorers = _scorers(ens_cfg, ens, task, cached, own)
    timings["weight_selection_s"] = time.perf_counter() - start
    results = {}
    for name, (scorer, note, rows) in scorers.items():
        t0 = time.perf_counter()
        encoder = UecMtebEncoder(rows, scorer, name=f"ucse/{ens_cfg.name}-{name.replace(':', '-')}")
        scores = mteb_eval.evaluate_task(encoder, task.mteb_task, cfg.batch_size)
        results[name] = {
            "scores": {k: float(v) for k, v in scores.items() if isinstance(v, (int, float, np.floating))},
            "note": note,
            "seconds": time.perf_counter() - t0,
            "params": {"beta": scorer.beta, "weights": scorer.weights, "member": scorer.member},
        }
        logger.info(
            "%s: %s", name, {m: round(results[name]["scores"].get(m, float("nan")), 4) for m in task.metrics}
        )
    merges = ens_cfg.merges if task.type is not TaskType.retrieval or ens_cfg.merge_retrieval else []
    for name, (merged, note) in merge_members(merges, built, task, ens_cfg.merge_step).items():
        t0 = time.perf_counter()
        encoder = UecMtebEncoder([merged], merge_scorer(merged), name=f"ucse/{ens_cfg.name}-{name}")
        scores = mteb_eval.evaluate_task(encoder, task.mteb_task, cfg.batch_size)
        results[name] = {
            "scores": {k: float(v) for k, v in scores.items() if isinstance(v, (int, float, np.floating))},
            "note": note,
            "seconds": time.perf_counter() - t0,
            "params": {},
        }
    heat = {row: ens.encode(texts).weights.mean(0) for row, texts in task.heat_rows.items()}  # (K,) each
    all_texts = [t for texts in task.heat_rows.values() for t in texts]
    gauss = ens.member_gaussians(all_texts)
    weights = ens.encode(all_texts).weights.mean(0)
    member_info = []
    for k, (m, g) in enumerate(zip(members, gauss)):
        info = {"id": m.member_id, "mean_trace": float(g.var.sum(1).mean()), "mean_weight": float(weights[k])}
        info.update(fit_info[m.member_id])
        info.update({"alignment": align_info[m.member_id]} if m.member_id in align_info else {})
        member_info.append(info)
    signal = weight_signal(task, ens, own)
    timings["total_s"] = sum(timings.values()) + sum(r["seconds"] for r in results.values())
    report = {
        "ensemble": ens_cfg.name,
        "task": task_cfg.name,
        "split": task_cfg.test_split,
        "metrics": list(task.metrics),
        "ranked_by": task.ranked_by,
        "temperature": temperature,
        "temperature_mode": TemperatureMode(ens_cfg.temperature_mode).value,
        "config": OmegaConf.to_container(OmegaConf.structured(ens_cfg), enum_to_str=True),
        "members": member_info,
        "choice": choice,
        "results": results,
        "weights_per_row": {r: w.tolist() for r, w in heat.items()},
        "weight_signal": signal,
        "skipped": _skipped(ens_cfg, task, len(members), results),
        "task_type": task.type.value,
        "timings": timings,
        "device": str(device),
    }
    write_json(out / "ensemble.json", report)
    write_text(out / "ensemble.md", _markdown(report))
    plot_weight_heatmap(torch.stack(list(heat.values())), list(heat), ens.member_ids, out / "weights.png")
    summary = None
    try:  # beside the default layout's task folders only: a folder given as out= holds only what it asked
        if not cfg.out:
            summary = write_weight_summary(out.parent, ens_cfg.name)
    except ValueError as err:  # a by-product: never fail the finished evaluation over it
        logger.warning("no weights_by_task.png in %s: %s", out.parent, err)
    return {
        "out": str(out),
        "ranked_by": task.ranked_by,
        "results": {n: {m: r["scores"].get(m) for m in task.metrics} for n, r in results.items()},
        "skipped": report["skipped"],
        "weights_by_task": None if summary is None else str(summary),
    }
