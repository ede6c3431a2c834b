"""``python eval.py ensemble=<name> task=<task>``: members, baselines and UEC variants, scored by mteb.

Member Gaussians of every text the evaluation needs are computed once and cached on disk
(``<cache>/uec/embeddings``); fitted Laplace members are cached under ``<cache>/uec/laplace``. Each
variant then runs as its own mteb encoder over those cached rows, so mteb's STS / retrieval /
classification evaluators produce every number, with the variant's similarity in the hooks.
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
from scipy.stats import spearmanr

from ucse.atomic import write_json, write_text
from ucse.backbone import FrozenBackbone
from ucse.config import BackboneConfig, DataConfig, TaskConfig, TaskType, load_group
from ucse.data.loading import read_jsonl
from ucse.data.pairs import (
    doc_text,
    label_positive_pairs,
    load_retrieval,
    load_sts,
    retrieval_positive_pairs,
    sts_positive_pairs,
)
from ucse.data.tasks import DataError, resolve_data_root, task_folder
from ucse.evaluation.config import EvalConfig
from ucse.evaluation.plots import plot_weight_heatmap
from ucse.training import resolve_device
from ucse.uec.config import EnsembleConfig, MemberConfig, MemberKind, PairSource, load_ensemble_config
from ucse.uec.ensemble import GAUSSIAN_VARIANTS, RANK_VARIANTS, UecEnsemble, Variant, VariantScorer
from ucse.uec.fusion import select_weights, simplex_grid
from ucse.uec.members import CachedMember, HeadMember, LaplaceMember, cache_root, stable_digest

logger = logging.getLogger(__name__)
STS_METRICS = ("spearman", "pearson")
RETRIEVAL_METRICS = ("ndcg_at_10", "recall_at_10", "recall_at_100", "nauc_ndcg_at_10_max")
CLASSIFICATION_METRICS = ("accuracy", "f1")


def _task_config(name: str) -> TaskConfig:
    node = load_group("task", name).get("task", {})
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TaskConfig), node))  # type: ignore[return-value]


def fit_pairs(fit: Any, task: TaskConfig, root: Path) -> list[tuple[str, str]]:
    """Positive pairs of a member's Laplace fit (``fit.source`` auto follows the evaluated task's type)."""
    source = fit.source
    fit_task = _task_config(fit.task) if fit.task else task
    if source is PairSource.auto:
        source = {TaskType.sts: PairSource.sts, TaskType.retrieval: PairSource.retrieval}.get(
            fit_task.type, PairSource.labels
        )
    folder = task_folder(root, fit_task.name)
    if source is PairSource.sts:
        pairs = sts_positive_pairs(load_sts(folder, fit.split), fit.threshold)
    elif source is PairSource.retrieval:
        pairs = retrieval_positive_pairs(load_retrieval(folder, fit.split))
    else:
        pairs = label_positive_pairs(read_jsonl(folder / f"{fit.split}.jsonl"), fit.seed, fit.max_pairs)
    return pairs[: fit.max_pairs]


def _backbone_config(member: MemberConfig) -> BackboneConfig:
    node = load_group("backbone", member.backbone).get("backbone", {})
    merged = OmegaConf.merge(OmegaConf.structured(BackboneConfig), node, member.overrides)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def build_member(member: MemberConfig, task: TaskConfig, root: Path, device: torch.device) -> Any:
    """A head member, or a Laplace member loaded from the cache or fitted (then cached)."""
    if member.kind is MemberKind.head:
        return HeadMember(member.head_dir, member.id, device, member.overrides or None)
    backbone = FrozenBackbone(_backbone_config(member), device)
    probe = LaplaceMember(backbone.cfg, member.id, member.layer, backbone=backbone)
    pairs = fit_pairs(member.fit, task, root)
    fit_opts = {
        k: getattr(member.fit, k) for k in ("hessian", "prior", "temperature", "similarity", "batch_size")
    }
    key = stable_digest(
        [
            backbone.fingerprint,
            OmegaConf.to_container(OmegaConf.structured(backbone.cfg)),
            probe.layer_path,
            fit_opts,
            pairs,
        ]
    )
    folder = cache_root() / "uec" / "laplace" / f"{member.id}-{key}"
    if folder.is_dir():
        return LaplaceMember.load(folder, device, backbone=backbone)
    start = time.perf_counter()
    probe.fit(pairs, **fit_opts)
    logger.info(
        "fitted Laplace member %s on %d pairs in %.1fs", member.id, len(pairs), time.perf_counter() - start
    )
    probe.save(folder)
    return probe


def ndcg_at_10(scores: torch.Tensor, qrels: list[dict[int, int]]) -> float:
    """Mean nDCG@10 of score rows (Nq, Nc) against graded relevance per query (doc index -> gain)."""
    top = scores.topk(min(10, scores.shape[1]), dim=1).indices.tolist()
    discount = 1.0 / np.log2(np.arange(2, 12))
    out = []
    for ranked, rel in zip(top, qrels):
        dcg = sum(rel.get(d, 0) * discount[r] for r, d in enumerate(ranked))
        ideal = sum(g * discount[r] for r, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
        out.append(dcg / ideal if ideal > 0 else 0.0)
    return float(np.mean(out))


class _Task:
    """The evaluated task: texts to precompute, the mteb task object and a validation scorer."""

    def __init__(self, task: TaskConfig, root: Path, mteb_eval: Any) -> None:
        folder = task_folder(root, task.name)
        self.type = task.type
        if task.type is TaskType.sts:
            test, val = (
                load_sts(folder, task.test_split),
                load_sts(folder, task.validation_split or "validation"),
            )
            s1, s2 = list(test["sentence1"]), list(test["sentence2"])
            self.val_a, self.val_b, self.val_y = (
                list(val["sentence1"]),
                list(val["sentence2"]),
                list(val["score"]),
            )
            self.texts = s1 + s2 + self.val_a + self.val_b
            self.mteb_task = mteb_eval.local_sts_task(task.name, {task.test_split: test})
            self.heat_rows = {f"{task.name} sentences": s1 + s2}
        elif task.type is TaskType.retrieval:
            test, val = load_retrieval(folder, task.test_split), load_retrieval(folder, "train")
            ids = list(test.corpus)
            self.docs = [doc_text(test.corpus[i]) for i in ids]
            self.texts = self.docs + list(test.queries.values()) + list(val.queries.values())
            self.mteb_task = mteb_eval.local_retrieval_task(task.name, test.corpus, test.queries, test.qrels)
            pos = {d: i for i, d in enumerate(ids)}
            self.val_q = list(val.queries.values())
            self.val_rel = [{pos[d]: r for d, r in val.qrels[q].items()} for q in val.queries]
            self.heat_rows = {
                f"{task.name} queries": list(test.queries.values()),
                f"{task.name} corpus": self.docs,
            }
        else:
            self.mteb_task = mteb_eval.load_local_task(task.name, root, [task.test_split])
            self.texts = [t for split in self.mteb_task.dataset.values() for t in list(split["text"])]
            self.heat_rows = {f"{task.name} texts": self.texts}

    @property
    def metrics(self) -> tuple[str, ...]:
        return {TaskType.sts: STS_METRICS, TaskType.retrieval: RETRIEVAL_METRICS}.get(
            self.type, CLASSIFICATION_METRICS
        )

    def validation_means(self, members: list[CachedMember]) -> tuple[list[torch.Tensor], Any]:
        """Member means of the validation texts and ``score_fn(fused means (N, D)) -> float`` over them."""
        texts = self.val_a + self.val_b if self.type is TaskType.sts else self.docs + self.val_q
        means = [m.encode(texts).mean for m in members]
        return means, lambda fused: self._score(torch.nn.functional.normalize(fused, dim=-1), None)

    def validate(self, scorer: VariantScorer, members: list[CachedMember]) -> float:
        """Validation score of one variant (STS: Spearman; retrieval: nDCG@10 on the train qrels)."""
        texts = self.val_a + self.val_b if self.type is TaskType.sts else self.docs + self.val_q
        return self._score(scorer.pack([m.encode(texts) for m in members]), scorer)

    def _score(self, packed: Any, scorer: VariantScorer | None) -> float:
        if self.type is TaskType.sts:
            a, b = packed[: len(self.val_a)], packed[len(self.val_a) :]
            sim = scorer.similarity_pairwise(a, b) if scorer else (a * b).sum(1)
            return float(spearmanr(np.asarray(sim), self.val_y)[0])
        q, d = packed[len(self.docs) :], packed[: len(self.docs)]
        sim = scorer.similarity(q, d) if scorer else q @ d.T
        return ndcg_at_10(torch.as_tensor(sim), self.val_rel)


def _with_beta(cfg: EnsembleConfig, ens: UecEnsemble, task: _Task, members: list, **kw: Any) -> tuple:
    """A Gaussian variant's scorer with beta fixed by the config or chosen on the validation split."""
    scorer = ens.scorer(**kw)
    if cfg.beta is not None:
        return scorer, f"beta {cfg.beta}"
    if task.type is TaskType.classification:
        return scorer, "beta unused (classification probes the mean)"
    scores = {}
    for beta in cfg.beta_grid:
        scorer.beta = float(beta)
        scores[beta] = task.validate(scorer, members)
    scorer.beta = float(max(scores, key=scores.get))
    return scorer, f"beta {scorer.beta:g} on validation ({ {b: round(s, 4) for b, s in scores.items()} })"


def _scorers(cfg: EnsembleConfig, ens: UecEnsemble, task: _Task, members: list[CachedMember]) -> dict:
    """Name -> (VariantScorer, note) for every variant that applies to this task."""
    out: dict[str, tuple[VariantScorer, str]] = {}
    for name in cfg.variants:
        variant = Variant(name)
        if variant in RANK_VARIANTS and task.type is not TaskType.retrieval:
            continue  # rank fusion is retrieval-only
        if variant in (Variant.MEMBER, Variant.MEMBER_PROBIT):
            for k, m in enumerate(members):
                if variant is Variant.MEMBER:
                    out[f"{name}:{m.member_id}"] = (ens.scorer(variant, member=k), "")
                else:
                    out[f"{name}:{m.member_id}"] = _with_beta(
                        cfg, ens, task, members, variant=variant, member=k
                    )
        elif variant is Variant.WEIGHTED:
            if len(members) < 2 or task.type is TaskType.classification:
                continue  # one member, or no cheap validation score for the classification probe
            means, score_fn = task.validation_means(members)
            grid = simplex_grid(len(members), cfg.weight_step, cfg.weight_min)
            weights, scores = select_weights(means, score_fn, grid)
            picked = [round(float(w), 2) for w in weights]
            note = f"weights {picked} on validation (score {float(scores.max()):.4f})"
            out[name] = (ens.scorer(variant, weights=tuple(float(w) for w in weights)), note)
        elif variant in RANK_VARIANTS:
            out[name] = (ens.scorer(variant, rrf_k=cfg.rrf_k, expected_candidates=len(task.docs)), "")
        elif variant in GAUSSIAN_VARIANTS:
            out[name] = _with_beta(cfg, ens, task, members, variant=variant)
        else:
            out[name] = (ens.scorer(variant), "")
    return out


def _markdown(report: dict) -> str:
    metrics = report["metrics"]
    lines = [
        f"# Ensemble {report['ensemble']} on {report['task']} ({report['split']})",
        "",
        "| variant | " + " | ".join(metrics) + " | note |",
        "|" + "---|" * (len(metrics) + 2),
    ]
    for name, row in report["results"].items():
        vals = " | ".join(f"{100 * row['scores'][m]:.2f}" for m in metrics)
        lines.append(f"| {name} | {vals} | {row['note']} |")
    lines += [
        "",
        "Scores x100, from mteb's evaluators (STS: `spearman` = the variant's own similarity).",
        "",
        "| member | prior precision | mean tr(var) (normalised) | mean UEC weight |",
        "|---|---|---|---|",
    ]
    for m in report["members"]:
        lines.append(
            f"| {m['id']} | {m.get('prior_precision', '-')} | {m['mean_trace']:.4g} "
            f"| {m['mean_weight']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def write_weight_summary(ensemble_dir: Path) -> Path | None:
    """One heatmap of the mean UEC weights of every task this ensemble was run on (paper Fig. 4).

    Reads ``<ensemble_dir>/<task>/ensemble.json``; rows are the tasks' inputs (e.g. SciFact queries),
    columns the members. Returns the PNG path, or ``None`` when no run has been written yet.
    """
    rows: dict[str, list[float]] = {}
    members: list[str] | None = None
    for path in sorted(Path(ensemble_dir).glob("*/ensemble.json")):
        report = json.loads(path.read_text())
        ids = [m["id"] for m in report["members"]]
        if members is not None and ids != members:
            raise ValueError(f"{path} has members {ids}, other tasks of {ensemble_dir} have {members}.")
        members = ids
        rows.update(report["weights_per_row"])
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
    from ucse.evaluation import mteb_eval  # the only module importing mteb (slow import)

    if not cfg.task:
        raise DataError("ensemble mode needs task=<name>, e.g. task=STSBenchmark or task=SciFact")
    ens_cfg = load_ensemble_config(cfg.ensemble)
    task_cfg = _task_config(cfg.task)
    root = resolve_data_root(DataConfig(root=cfg.data_root))
    if root is None:
        raise DataError("ensemble mode reads local data: pass data_root=<folder> or set env UCSE_DATA_DIR")
    device = resolve_device(cfg.device)
    out = Path(cfg.out or Path("runs") / "ensembles" / ens_cfg.name / task_cfg.name)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    members = [build_member(m, task_cfg, root, device) for m in ens_cfg.members]
    timings["members_s"] = time.perf_counter() - start
    cached = [CachedMember(m, cache_root() / "uec" / "embeddings") for m in members]
    ens = UecEnsemble(
        cached,
        ens_cfg.rule,
        ens_cfg.temperature,
        ens_cfg.similarity,
        1.0 if ens_cfg.beta is None else ens_cfg.beta,
    )
    task = _Task(task_cfg, root, mteb_eval)
    start = time.perf_counter()
    for m in cached:
        m.precompute(task.texts)
    timings["encode_s"] = time.perf_counter() - start
    start = time.perf_counter()
    scorers = _scorers(ens_cfg, ens, task, cached)
    timings["weight_selection_s"] = time.perf_counter() - start
    results = {}
    for name, (scorer, note) in scorers.items():
        t0 = time.perf_counter()
        encoder = mteb_eval.UecMtebEncoder(
            cached, scorer, name=f"ucse/{ens_cfg.name}-{name.replace(':', '-')}"
        )
        scores = mteb_eval.evaluate_task(encoder, task.mteb_task, cfg.batch_size)
        results[name] = {
            "scores": {k: float(v) for k, v in scores.items() if isinstance(v, (int, float, np.floating))},
            "note": note,
            "seconds": time.perf_counter() - t0,
            "params": {"beta": scorer.beta, "weights": scorer.weights, "member": scorer.member},
        }
        logger.info("%s: %s", name, {m: round(results[name]["scores"][m], 4) for m in task.metrics})
    heat = {row: ens.encode(texts).weights.mean(0) for row, texts in task.heat_rows.items()}  # (K,) each
    all_texts = [t for texts in task.heat_rows.values() for t in texts]
    gauss = [g.normalized() for g in ens.member_gaussians(all_texts)]
    weights = ens.encode(all_texts).weights.mean(0)
    member_info = []
    for k, (m, g) in enumerate(zip(members, gauss)):
        info = {"id": m.member_id, "mean_trace": float(g.var.sum(1).mean()), "mean_weight": float(weights[k])}
        if isinstance(m, LaplaceMember):
            info["prior_precision"] = m.laplace.prior_precision
        member_info.append(info)
    timings["total_s"] = sum(timings.values()) + sum(r["seconds"] for r in results.values())
    report = {
        "ensemble": ens_cfg.name,
        "task": task_cfg.name,
        "split": task_cfg.test_split,
        "metrics": list(task.metrics),
        "config": OmegaConf.to_container(OmegaConf.structured(ens_cfg)),
        "members": member_info,
        "results": results,
        "weights_per_row": {r: w.tolist() for r, w in heat.items()},
        "timings": timings,
        "device": str(device),
    }
    write_json(out / "ensemble.json", report)
    write_text(out / "ensemble.md", _markdown(report))
    plot_weight_heatmap(torch.stack(list(heat.values())), list(heat), ens.member_ids, out / "weights.png")
    write_weight_summary(out.parent)
    return {
        "out": str(out),
        "results": {n: {m: r["scores"].get(m) for m in task.metrics} for n, r in results.items()},
    }
