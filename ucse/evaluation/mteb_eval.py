"""MTEB 2.x evaluation of any :class:`TextEncoder` on official tasks fed with local data.

With ``ucse/uec/mteb_encoder.py`` (UEC's encoder) the only modules that import mteb (~2 s to import).

The official task object is kept (metadata, protocol: logistic-regression probe, ``samples_per_label``,
``n_experiments``, seed); only its ``dataset`` is replaced by the local copy, so no hub access is needed.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import torch
from datasets import Dataset, DatasetDict
from mteb.abstasks.abstask import AbsTask
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta
from torch.utils.data import DataLoader

from ucse import json_read
from ucse.blank_text import blank_problem, is_blank
from ucse.config.env import quiet_loggers
from ucse.data.files import quiet_datasets
from ucse.evaluation.encoder_protocol import TextEncoder

# The paper evaluates the English portion of multilingual tasks; mteb names that subset "en".
ENGLISH_SUBSET = "en"


class MtebEncoder(AbsEncoder):
    """Adapts a :class:`TextEncoder` to mteb's encoder protocol.

    ``self.model`` is the wrapped encoder: when the meta has no ``similarity_fn_name``, mteb's
    ``AbsEncoder.similarity`` calls ``self.model.similarity`` if the encoder defines one, else cosine.
    """

    def __init__(
        self,
        encoder: TextEncoder,
        name: str = "ucse/encoder",
        revision: str = "local",
        embed_dim: int | None = None,
    ) -> None:
        """Wrap ``encoder``.

        Args:
            encoder: the text encoder.
            name: model name in "org/model" form, stored in the results.
            revision: model revision stored in the results (e.g. a checkpoint hash).
            embed_dim: embedding size, recorded in the metadata when known.
        """
        if not isinstance(encoder, TextEncoder):
            raise TypeError(f"{type(encoder).__name__} does not implement TextEncoder.encode")
        self.model = encoder
        # Without a meta, mteb.evaluate tries to look the model up in its registry (needs the hub).
        self.mteb_model_meta = ModelMeta.create_empty(
            overwrites={"name": name, "revision": revision, "embed_dim": embed_dim}
        )

    def encode(
        self,
        inputs: DataLoader,
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Embed every text of ``inputs``, one wrapped-encoder call per mteb batch.

        Args:
            inputs: mteb's DataLoader; each batch is a dict whose ``"text"`` is a list of strings.
            task_metadata: the task's metadata (unused: prompts are the wrapped encoder's business).
            hf_split: split being encoded (unused).
            hf_subset: subset being encoded (unused).
            prompt_type: query/document role for retrieval (unused for classification).
            **kwargs: encode kwargs such as ``batch_size`` (already applied by the DataLoader).

        Returns:
            (N, D) float32 embeddings in input order.
        """
        chunks = []
        for batch in inputs:
            texts = list(batch["text"])
            emb = self.model.encode(texts)
            emb = emb.detach().cpu().float().numpy() if isinstance(emb, torch.Tensor) else np.asarray(emb)
            if emb.ndim != 2 or emb.shape[0] != len(texts):
                raise ValueError(f"encoder returned shape {emb.shape} for {len(texts)} texts")
            chunks.append(emb.astype(np.float32, copy=False))
        if not chunks:
            raise ValueError("no inputs to encode")
        return np.concatenate(chunks, axis=0)


def _read_split(
    path: Path,
    label_ids: dict[str, int] | None = None,
    text_column: str = "text",
    label_column: str = "label",
    kinds: dict[str, str] | None = None,
) -> Dataset:
    """``text`` / int ``label`` rows; string labels are mapped through ``label_ids`` (grown as met).

    ``kinds`` records where the first name and the first id were met (shared by a task's splits).

    Raises:
        ValueError: naming the file and line of a row that is not an object with a string text and an
            integer or named label (a boolean or a 1.7 was read as the id 1 before).
    """
    kinds = {} if kinds is None else kinds
    texts: list[str] = []
    labels: list[int] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                row = json_read.loads(line)
            except ValueError as err:
                raise ValueError(f"{where}: not valid JSON ({err})") from None
            if not isinstance(row, dict) or text_column not in row or label_column not in row:
                raise ValueError(
                    f"{where}: expected an object with '{text_column}' and '{label_column}' "
                    "(set data.text_column / data.label_column to the file's columns)"
                )
            text, label = row[text_column], row[label_column]
            if not isinstance(text, str):
                raise ValueError(f"{where}: '{text_column}' is not a string: {text!r}")
            if is_blank(text):  # as every other reader of texts: no word for the backbone to read
                raise ValueError(f"{where}: '{text_column}' is {blank_problem(text)}; fix or remove the row")
            # Strings are names, whatever they spell ("01" and "1" are two labels, as ucse train reads a JSON
            # file); integers are ids. One kind per task: a name "1" and an id 1 would be two classes or one.
            kind = "name" if isinstance(label, str) else "id" if type(label) is int else None
            if kind is None or (kind == "name" and label_ids is None):
                raise ValueError(f"{where}: '{label_column}' must be an integer id or a name, got {label!r}")
            kinds.setdefault(kind, where)
            other = kinds.get("id" if kind == "name" else "name")
            if other is not None:
                raise ValueError(
                    f"{where}: '{label_column}' is {'the name' if kind == 'name' else 'the integer id'} "
                    f"{label!r}, but {other} has a label of the other kind; give every label as a name "
                    "(a string) or every label as an integer id."
                )
            labels.append(label_ids.setdefault(label, len(label_ids)) if kind == "name" else label)
            texts.append(text)
    return Dataset.from_dict({"text": texts, "label": labels})


# Official tasks whose protocol a task mteb does not know borrows (with the user's name and data).
TEMPLATE_TASKS = {"sts": "STSBenchmark", "retrieval": "SciFact", "classification": "Banking77Classification"}


def get_task_or_template(task_name: str, kind: str) -> AbsTask:
    """The official mteb task ``task_name``, or for a name mteb does not know a renamed same-kind one.

    The stand-in is the official task in ``TEMPLATE_TASKS`` (its protocol and metrics), renamed to
    ``task_name``, to be fed with the user's data.

    Args:
        task_name: the task's name.
        kind: ``sts``, ``retrieval`` or ``classification``.
    """
    try:
        return mteb.get_task(task_name)
    except KeyError:
        if kind not in TEMPLATE_TASKS:
            raise ValueError(
                f"task kind {kind!r} has no mteb protocol here; use one of {sorted(TEMPLATE_TASKS)}"
            ) from None
    task = mteb.get_task(TEMPLATE_TASKS[kind])
    # The template's successor (e.g. Banking77Classification.v2) is not the user's task's: no warning.
    task.metadata = task.metadata.model_copy(update={"name": task_name, "superseded_by": None})
    return task


def load_local_task(
    task_name: str,
    data_root: str | Path,
    eval_splits: Sequence[str] | None = ("test",),
    text_column: str = "text",
    label_column: str = "label",
) -> AbsTask:
    """The official mteb classification task with its data replaced by ``data_root/task_name/*.jsonl``.

    Only ``train`` (the probe's training pool) and the ``eval_splits`` are read, each a JSONL file with a
    text column and an integer (or named) label column. Multilingual tasks (AmazonCounterfactual, Massive*)
    are restricted to the English subset ``en``, and their dataset takes mteb's ``{hf_subset: DatasetDict}``
    form.

    Args:
        task_name: official MTEB task name, e.g. ``"Banking77Classification"``.
        data_root: folder holding one sub-folder per task (the shared/data layout).
        eval_splits: splits to evaluate on; ``None``: ``test`` (what the paper reports), or the task's
            official splits where it has none (FinancialPhrasebankClassification: ``train``).
        text_column: the files' text column (``data.text_column``).
        label_column: the files' label column (``data.label_column``).

    Returns:
        The task, with ``data_loaded`` set so mteb does not try to download it.
    """
    folder = Path(data_root) / task_name
    if not folder.is_dir():
        raise FileNotFoundError(f"no local data for {task_name} under {data_root}")
    task = get_task_or_template(task_name, "classification")
    eval_splits = _splits(task, eval_splits)
    task = task.filter_eval_splits(eval_splits)
    multilingual = task.metadata.is_multilingual
    if multilingual:
        # Raises ValueError when the task has no "en" subset.
        task.filter_languages(None, hf_subsets=[ENGLISH_SUBSET])

    splits = dict.fromkeys(["train", *eval_splits])
    label_ids: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for split in splits:
        path = folder / f"{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"missing split file {path}")
        splits[split] = _read_split(path, label_ids, text_column, label_column, kinds)
    data = DatasetDict(splits)
    task.dataset = {ENGLISH_SUBSET: data} if multilingual else data
    # The official tasks' transforms (column renames, subsampling) must run on injected data as well.
    task.dataset_transform()
    task.data_loaded = True
    return task


def check_known_task(task_name: str, option: str = "mteb=true") -> None:
    """Fail with one clear line when mteb has no task of this name (e.g. a task trained on your own data).

    Args:
        task_name: the task's name.
        option: what asked for mteb (``mteb=true`` or ``ensemble=``), for the message.

    Raises:
        ValueError: naming the task, mteb's closest name and what to do instead.
    """
    try:
        mteb.get_task(task_name)
    except KeyError as err:
        close = str(err).split("Did you mean:", 1)[1].strip(" \"'?") if "Did you mean:" in str(err) else ""
        hint = f"(Closest mteb task: '{close}'.) " if close else ""
        fix = (
            "Evaluate without mteb=true; eval.json still reports accuracy, calibration and uncertainty."
            if option == "mteb=true"
            else "Ensembles are scored by mteb's own task objects: pick an MTEB task, e.g. task=STSBenchmark."
        )
        raise ValueError(f"{option}: mteb has no task '{task_name}' (your own data?). {hint}{fix}") from None


def _splits(task: AbsTask, eval_splits: Sequence[str] | None) -> list[str]:
    """``eval_splits``; by default ``test``, or the official splits of a task without one.

    The paper reports ``test``; FinancialPhrasebankClassification has only ``train``.
    """
    if eval_splits is not None:
        return list(eval_splits)
    official = list(task.metadata.eval_splits)
    return ["test"] if "test" in official else official


def load_hub_task(task_name: str, eval_splits: Sequence[str] | None = None) -> AbsTask:
    """The official task with mteb loading its own data from the hub (no local copy configured).

    Multilingual tasks are restricted to the English subset, as for local data. ``eval_splits`` ``None``:
    ``test``, or the official splits of a task without one.
    """
    task = mteb.get_task(task_name)
    task = task.filter_eval_splits(_splits(task, eval_splits))
    if task.metadata.is_multilingual:
        task.filter_languages(None, hf_subsets=[ENGLISH_SUBSET])
    return task


def _not_superseded(record: logging.LogRecord) -> bool:
    """A logging filter: drops mteb's "is superseded by" advice (see :func:`_task_result`)."""
    return "is superseded by" not in record.getMessage()


def _task_result(model: AbsEncoder, task: AbsTask, batch_size: int) -> Any:
    """The ``TaskResult`` of ``model`` on ``task`` from mteb, evaluated afresh (no result cache)."""
    # cache=None: otherwise results go to ~/.cache/mteb and a rerun silently returns the old score.
    task_log = logging.getLogger("mteb.abstasks.abstask")
    task_log.addFilter(_not_superseded)  # its warning is logged as well as warned
    # mteb's INFO lines (six per evaluation, ~100 for an ensemble); quiet_datasets: mteb's "Flattening the
    # indices" / "Casting the dataset" bars
    with warnings.catch_warnings(), quiet_datasets(), quiet_loggers(("mteb",)):
        # The task versions are the papers' (MTEB(eng, v2) as the UCSE paper's Table 1 runs them), chosen on
        # purpose: mteb's "superseded by ... .v2" advice would repeat on every evaluation.
        warnings.filterwarnings("ignore", message=r"The task .* is superseded by", category=UserWarning)
        try:
            res = mteb.evaluate(
                model,
                [task],
                cache=None,
                encode_kwargs={"batch_size": batch_size},
                show_progress_bar=False,
                co2_tracker=False,
            )
        finally:
            task_log.removeFilter(_not_superseded)
    return res.task_results[0]


def evaluate_classification(
    encoder: TextEncoder | MtebEncoder, task: AbsTask, batch_size: int = 32
) -> dict[str, Any]:
    """Run mteb's classification protocol for ``encoder`` on ``task`` (no result cache).

    Args:
        encoder: a TextEncoder (wrapped on the fly) or an already wrapped MtebEncoder.
        task: a task from :func:`load_local_task` (or any loaded mteb task).
        batch_size: texts per encode call.

    Returns:
        ``{"task_name", "main_score" (accuracy for these tasks, in [0, 1]), "scores" ({split: [scores
        dict per subset]}, as in ``TaskResult.scores``)}``.
    """
    model = encoder if isinstance(encoder, MtebEncoder) else MtebEncoder(encoder)
    task_result = _task_result(model, task, batch_size)
    return {
        "task_name": task_result.task_name,
        "main_score": float(task_result.get_score()),
        "scores": task_result.scores,
    }


# Local STS / retrieval tasks (UEC's mteb encoder is ucse/uec/mteb_encoder.py).


def local_sts_task(task_name: str, pairs: dict[str, Dataset]) -> AbsTask:
    """The official mteb STS task with its splits replaced by ``pairs`` ({split: Dataset}).

    Each split needs ``sentence1``, ``sentence2`` and ``score`` (0..5; mteb normalises it).
    """
    task = get_task_or_template(task_name, "sts").filter_eval_splits(list(pairs))
    for split, ds in pairs.items():
        missing = {"sentence1", "sentence2", "score"} - set(ds.column_names)
        if missing:
            raise ValueError(f"STS split '{split}' lacks column(s) {sorted(missing)}; has {ds.column_names}")
    task.dataset = DatasetDict(pairs)
    task.data_loaded = True
    return task


def local_retrieval_task(
    task_name: str,
    corpus: dict[str, dict[str, str]],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    split: str = "test",
) -> AbsTask:
    """The official mteb retrieval task fed with a local BEIR split (mteb 2.x ``RetrievalSplitData`` layout).

    Args:
        task_name: e.g. ``"SciFact"``.
        corpus: doc id -> ``{"title", "text"}``.
        queries: query id -> text.
        qrels: query id -> doc id -> relevance.
        split: the split name the scores are reported under.
    """
    task = get_task_or_template(task_name, "retrieval").filter_eval_splits([split])
    corpus_ds = Dataset.from_dict(
        {
            "id": list(corpus),
            "title": [d.get("title", "") or "" for d in corpus.values()],
            "text": [d.get("text", "") or "" for d in corpus.values()],
        }
    )
    queries_ds = Dataset.from_dict({"id": list(queries), "text": list(queries.values())})
    split_data = {"corpus": corpus_ds, "queries": queries_ds, "relevant_docs": qrels, "top_ranked": None}
    task.dataset = {"default": {split: split_data}}
    task.data_loaded = True
    return task


def evaluate_task(model: AbsEncoder, task: AbsTask, batch_size: int = 64) -> dict[str, Any]:
    """Run ``task`` with mteb's own evaluator (no result cache); the first split/subset's scores dict."""
    task_result = _task_result(model, task, batch_size)
    split = next(iter(task_result.scores))
    return dict(task_result.scores[split][0])
