"""The task an ensemble is evaluated on: its mteb task object, its texts and a validation scorer.

A task named by a ``configs/task`` file is used as configured. Any other name is the user's own data
under ``<data_root>/<name>/``, in the own-data formats: retrieval (``corpus.jsonl``, ``queries.jsonl``,
``qrels/<split>.tsv``), STS pairs (``<split>.jsonl`` with ``sentence1``, ``sentence2``, ``score``) or
classification (``<split>.jsonl`` with ``text``, ``label``); mteb's evaluators run on a task object
built from that data (``mteb_eval.get_task_or_template``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from scipy.stats import spearmanr

from ucse import json_read
from ucse.config import ConfigError, TaskConfig, TaskType, did_you_mean, group_choices, load_group
from ucse.data.pairs import doc_text, load_retrieval, load_sts
from ucse.data.tasks import DataError, task_folder

STS_METRICS = ("spearman", "cosine_spearman", "pearson")
RETRIEVAL_METRICS = ("ndcg_at_10", "recall_at_10", "recall_at_100", "nauc_ndcg_at_10_max")
CLASSIFICATION_METRICS = ("accuracy", "f1")
RANKED_BY = {
    TaskType.sts: "spearman (the variant's own similarity through mteb's similarity_pairwise hook)",
    TaskType.retrieval: "ndcg_at_10 (mteb's main_score, the variant's own similarity in the search)",
    TaskType.classification: "accuracy (mteb's main_score: logistic-regression probe on the unit mean)",
}


def task_config(name: str, root: Path | None = None) -> TaskConfig:
    """The ``configs/task/<name>.yaml`` task, or the own-data folder ``<root>/<name>`` (type inferred)."""
    try:
        node = load_group("task", name).get("task", {})
    except ConfigError:
        if root is None or not (root / name).is_dir():
            known = group_choices("task") + ([p.name for p in root.iterdir() if p.is_dir()] if root else [])
            hint = did_you_mean(name, known)  # a typo of a task's name, before an own-data folder
            raise DataError(
                f"task '{name}' is neither a configs/task file nor a data folder under data_root "
                f"({root}).{hint} For data of your own, add {root}/{name}/ in an own-data format (retrieval "
                "corpus.jsonl + queries.jsonl + qrels/, STS <split>.jsonl with sentence1/sentence2/score, or "
                "<split>.jsonl with text/label)."
            ) from None
        return TaskConfig(name=name, type=infer_type(root / name))
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TaskConfig), node))  # type: ignore[return-value]


def infer_type(folder: Path) -> TaskType:
    """Own-data format of a task folder (retrieval, STS pairs or classification)."""
    if (folder / "corpus.jsonl").is_file() and (folder / "queries.jsonl").is_file():
        return TaskType.retrieval
    test = folder / "test.jsonl"
    if not test.is_file():
        raise DataError(
            f"{folder} has no test.jsonl (nor corpus.jsonl + queries.jsonl); cannot tell its format"
        )
    try:
        with test.open(encoding="utf-8") as fh:
            first = json_read.loads(next((line for line in fh if line.strip()), "{}"))
    except ValueError as err:  # malformed JSON or UTF-8 (both ValueErrors)
        raise DataError(
            f"{test}: its first row is not valid JSON ({err}); expected one object per line"
        ) from None
    if not isinstance(first, dict):
        raise DataError(f"{test}: its first row is not a JSON object ({{...}}); expected one object per line")
    if {"sentence1", "sentence2", "score"} <= set(first):
        return TaskType.sts
    if {"text", "label"} <= set(first):
        return TaskType.classification
    raise DataError(
        f"{test} line 1 has keys {sorted(first)}; expected sentence1/sentence2/score (STS) or text/label"
    )


def ndcg_at_10(scores: torch.Tensor, qrels: list[dict[int, int]]) -> float:
    """Mean nDCG@10 of score rows (Nq, Nc) against graded relevance per query (doc index -> gain)."""
    return float(np.mean(ndcg_at_10_per_query(scores, qrels)))


def ndcg_at_10_per_query(scores: torch.Tensor, qrels: list[dict[int, int]]) -> list[float]:
    """nDCG@10 of each score row (Nq, Nc) against its query's graded relevance (doc index -> gain)."""
    top = scores.topk(min(10, scores.shape[1]), dim=1).indices.tolist()
    discount = 1.0 / np.log2(np.arange(2, 12))
    out = []
    for ranked, rel in zip(top, qrels):
        dcg = sum(rel.get(d, 0) * discount[r] for r, d in enumerate(ranked))
        ideal = sum(g * discount[r] for r, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
        out.append(dcg / ideal if ideal > 0 else 0.0)
    return out


class EnsembleTask:
    """The evaluated task: texts to precompute, the mteb task object and a validation scorer.

    ``has_validation`` is False when the data has no split to tune on (then beta and the weighted
    variants' weights are not chosen; the test split is never used for that).
    """

    def __init__(self, task: TaskConfig, root: Path, mteb_eval: Any) -> None:
        folder = task_folder(root, task.name)
        self.type = task.type
        self.has_validation = True
        if task.type is TaskType.sts:
            test = load_sts(folder, task.test_split)
            val_split = task.validation_split or "validation"
            self.has_validation = (folder / f"{val_split}.jsonl").is_file()
            val = load_sts(folder, val_split) if self.has_validation else test.select([])
            s1, s2 = list(test["sentence1"]), list(test["sentence2"])
            self.test_a, self.test_b, self.test_y = s1, s2, list(test["score"])
            self.val_a, self.val_b = list(val["sentence1"]), list(val["sentence2"])
            self.val_y = list(val["score"])
            self.texts = s1 + s2 + self.val_a + self.val_b
            self.mteb_task = mteb_eval.local_sts_task(task.name, {task.test_split: test})
            self.heat_rows = {f"{task.name} sentences": s1 + s2}
        elif task.type is TaskType.retrieval:
            test = load_retrieval(folder, task.test_split)
            self.has_validation = (folder / "qrels" / "train.tsv").is_file()
            ids = list(test.corpus)
            self.docs = [doc_text(test.corpus[i]) for i in ids]
            pos = {d: i for i, d in enumerate(ids)}
            self.val_q, self.val_rel = [], []
            if self.has_validation:
                val = load_retrieval(folder, "train")
                self.val_q = list(val.queries.values())
                self.val_rel = [{pos[d]: r for d, r in val.qrels[q].items() if d in pos} for q in val.queries]
            self.texts = self.docs + list(test.queries.values()) + self.val_q
            self.test_q = list(test.queries.values())  # every query is judged in the split
            self.test_rel = [{pos[d]: r for d, r in test.qrels[q].items() if d in pos} for q in test.queries]
            self.mteb_task = mteb_eval.local_retrieval_task(
                task.name, test.corpus, test.queries, test.qrels, task.test_split
            )
            self.heat_rows = {
                f"{task.name} queries": list(test.queries.values()),
                f"{task.name} corpus": self.docs,
            }
        else:
            self.has_validation = False  # the probe's protocol is mteb's; nothing is tuned here
            self.mteb_task = mteb_eval.load_local_task(task.name, root, [task.test_split])
            data = self.mteb_task.dataset
            splits = data.get("en", data) if isinstance(data, dict) else data
            self.texts = [t for split in splits.values() for t in list(split["text"])]
            self.heat_rows = {f"{task.name} texts": self.texts}

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metrics shown in the report table."""
        return {TaskType.sts: STS_METRICS, TaskType.retrieval: RETRIEVAL_METRICS}.get(
            self.type, CLASSIFICATION_METRICS
        )

    @property
    def ranked_by(self) -> str:
        """The metric the report ranks by, in words."""
        return RANKED_BY[self.type]

    def validation_texts(self) -> list[str]:
        """The texts :meth:`validate` scores (STS: both sides of the pairs; retrieval: corpus + queries)."""
        return self.val_a + self.val_b if self.type is TaskType.sts else self.docs + self.val_q

    def validation_means(
        self, members: list[Any], max_pairs: int | None = None
    ) -> tuple[list[torch.Tensor], Any]:
        """Member means of the validation texts and ``score_fn(fused (N, D')) -> float`` over them.

        ``max_pairs`` keeps the first STS validation pairs only (for expensive candidates, e.g. merges).
        """
        if max_pairs is not None and self.type is TaskType.sts and max_pairs < len(self.val_a):
            sub = EnsembleTask.__new__(EnsembleTask)
            sub.type, sub.val_a, sub.val_b = self.type, self.val_a[:max_pairs], self.val_b[:max_pairs]
            sub.val_y = self.val_y[:max_pairs]
            return sub.validation_means(members)
        means = [m.encode(self.validation_texts()).mean for m in members]
        return means, lambda fused: self._score(torch.nn.functional.normalize(fused, dim=-1), None)

    def validate(self, scorer: Any, members: list[Any]) -> float:
        """Validation score of one variant (STS: Spearman; retrieval: nDCG@10 on the train qrels)."""
        gauss = [m.encode(self.validation_texts()) for m in members]
        packed = scorer.pack(gauss)
        var = scorer.gaussian(gauss).var.numpy() if scorer.gaussian_variant else None
        return self._score(packed, scorer, var)

    def _score(self, packed: Any, scorer: Any, var: Any = None) -> float:
        packed = torch.as_tensor(packed)
        split = len(self.val_a) if self.type is TaskType.sts else len(self.docs)
        va, vb = (None, None) if var is None else (var[:split], var[split:])
        if self.type is TaskType.sts:
            a, b = packed[:split], packed[split:]
            sim = scorer.similarity_pairwise(a, b, va, vb) if scorer else (a * b).sum(1)
            return float(spearmanr(np.asarray(sim), self.val_y)[0])
        d, q = packed[:split], packed[split:]
        sim = scorer.similarity(q, d, vb, va) if scorer else q @ d.T
        return ndcg_at_10(torch.as_tensor(sim), self.val_rel)
