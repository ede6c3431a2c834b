"""STS and retrieval data for the UEC ensembles, and positive text pairs for Laplace fitting."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np

from ucse.config import DataConfig, TaskConfig, TaskType
from ucse.data.checks import resolve_bad_rows, score_problems, text_problems
from ucse.data.files import load_in_memory, quiet_datasets
from ucse.data.loading import hub_id, load_hub, read_jsonl
from ucse.data.tasks import DATA_ENV, DataError, resolve_data_root, task_folder

STS_COLUMNS = ("sentence1", "sentence2", "score")


def _sts_source(source: str | Path | TaskConfig, data: DataConfig | None) -> Path | TaskConfig:
    """A local STS task folder, or the task config itself when it must come from the hub."""
    if not isinstance(source, TaskConfig):
        return Path(source)
    if source.type != TaskType.sts:
        raise DataError(f"Task '{source.name}' is a {source.type.value} task, not an STS task.")
    root = resolve_data_root(data or DataConfig())
    return task_folder(root, source.name) if root is not None else source


def load_sts(source: str | Path | TaskConfig, split: str, data: DataConfig | None = None) -> datasets.Dataset:
    """Load one split of an STS task as ``sentence1``, ``sentence2`` (str) and ``score`` (float).

    Args:
        source: the task folder (``<root>/STSBenchmark``), or a task config resolved through ``data``
            (local root when configured, else the hub).
        split: ``train``, ``validation`` or ``test``.
        data: data section (root and ``drop_bad_rows``); defaults apply when omitted.

    Returns:
        The checked split, scores cast to float64.

    Raises:
        DataError: on a missing file/split/column, unreachable hub, or bad rows (unless dropped).
    """
    resolved = _sts_source(source, data)
    if isinstance(resolved, Path):
        path = resolved / f"{split}.jsonl"
        if not path.is_file():
            found = sorted(p.name for p in resolved.glob("*.jsonl")) if resolved.is_dir() else "nothing"
            raise DataError(f"No STS split file {path}; found {found}.")
        ds, where = read_jsonl(path), str(path)
    else:
        hub = load_hub(resolved)
        if split not in hub:
            raise DataError(f"Hub dataset {hub_id(resolved)} has no split '{split}'; it has {list(hub)}.")
        ds, where = hub[split], f"hub {hub_id(resolved)} split '{split}'"
    missing = [c for c in STS_COLUMNS if c not in ds.column_names]
    if missing:
        raise DataError(f"{where} lacks STS column(s) {missing}; its columns are {ds.column_names}.")
    bad = text_problems(ds, "sentence1") + text_problems(ds, "sentence2") + score_problems(ds, "score")
    drop = data.drop_bad_rows if data is not None else False
    keep = resolve_bad_rows(len(ds), bad, split=split, where=where, drop=drop)
    features = datasets.Features(
        sentence1=datasets.Value("string"),
        sentence2=datasets.Value("string"),
        score=datasets.Value("float64"),
    )
    with quiet_datasets():  # "Flattening the indices" and "Casting the dataset" bars, twice a split
        ds = ds.select_columns(list(STS_COLUMNS)).select(keep).flatten_indices(keep_in_memory=True)
        return ds.cast(features)


@dataclass
class RetrievalData:
    """One split of a BEIR-layout retrieval task.

    Attributes:
        corpus: doc id -> ``{"title": str, "text": str}`` (the whole corpus).
        queries: query id -> text, only queries with relevance judgements in this split.
        qrels: query id -> doc id -> relevance.
    """

    corpus: dict[str, dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def _retrieval_folder(source: str | Path | TaskConfig, data: DataConfig | None) -> Path:
    if not isinstance(source, TaskConfig):
        return Path(source)
    root = resolve_data_root(data or DataConfig())
    if root is None:
        raise DataError(
            f"Retrieval task '{source.name}' is read from a local BEIR folder only: set data.root (or env "
            f"{DATA_ENV}) to a folder holding {source.name}/corpus.jsonl, queries.jsonl, qrels/<split>.tsv."
        )
    return task_folder(root, source.name)


def load_retrieval(
    source: str | Path | TaskConfig, split: str, data: DataConfig | None = None
) -> RetrievalData:
    """Load a BEIR-layout task: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv`` (with header).

    Args:
        source: the task folder (``<root>/SciFact``), or a task config resolved through ``data.root``.
        split: qrels split, e.g. ``train`` or ``test``.
        data: data section, used only with a task config.

    Returns:
        The corpus, the queries judged in ``split`` and their qrels.

    Raises:
        DataError: on missing files, or qrels naming unknown queries or documents.
    """
    folder = _retrieval_folder(source, data)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for path in (folder / "corpus.jsonl", folder / "queries.jsonl", qrels_path):
        if not path.is_file():
            raise DataError(
                f"Missing {path}; a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/<split>.tsv."
            )
    corpus_ds = read_jsonl(folder / "corpus.jsonl")
    title = corpus_ds["title"] if "title" in corpus_ds.column_names else [""] * len(corpus_ds)
    corpus = {
        str(i): {"title": t or "", "text": x or ""}
        for i, t, x in zip(corpus_ds["_id"], title, corpus_ds["text"])
    }
    query_ds = read_jsonl(folder / "queries.jsonl")
    all_queries = {str(i): t for i, t in zip(query_ds["_id"], query_ds["text"])}
    # Ids stay strings even when numeric: BEIR ids are opaque and may have leading zeros.
    qrels_ds = load_in_memory(
        "csv",
        qrels_path,
        delimiter="\t",
        features=datasets.Features(
            {
                "query-id": datasets.Value("string"),
                "corpus-id": datasets.Value("string"),
                "score": datasets.Value("int64"),
            }
        ),
    )
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for qid, did, score in zip(qrels_ds["query-id"], qrels_ds["corpus-id"], qrels_ds["score"]):
        qrels[qid][did] = int(score)
    unknown_q = sorted(set(qrels) - set(all_queries))
    unknown_d = sorted({d for docs in qrels.values() for d in docs} - set(corpus))
    if unknown_q or unknown_d:
        raise DataError(
            f"{qrels_path} names {len(unknown_q)} unknown query id(s) {unknown_q[:5]} and "
            f"{len(unknown_d)} unknown doc id(s) {unknown_d[:5]} (not in queries.jsonl / corpus.jsonl)."
        )
    return RetrievalData(corpus=corpus, queries={q: all_queries[q] for q in qrels}, qrels=dict(qrels))


def doc_text(doc: dict[str, str]) -> str:
    """A document as one string: ``"title text"`` (just the text when untitled)."""
    return f"{doc['title']} {doc['text']}".strip()


def sts_positive_pairs(ds: datasets.Dataset, threshold: float = 4.0) -> list[tuple[str, str]]:
    """``(sentence1, sentence2)`` of the STS pairs scored at least ``threshold`` (0..5 scale)."""
    return [(a, b) for a, b, s in zip(ds["sentence1"], ds["sentence2"], ds["score"]) if s >= threshold]


def retrieval_positive_pairs(data: RetrievalData, min_relevance: int = 1) -> list[tuple[str, str]]:
    """``(query text, "title text")`` for every judged-relevant (query, doc) of a retrieval split."""
    return [
        (data.queries[qid], doc_text(data.corpus[did]))
        for qid, docs in data.qrels.items()
        for did, rel in docs.items()
        if rel >= min_relevance
    ]


def label_positive_pairs(
    ds: datasets.Dataset, seed: int, max_pairs: int | None = None
) -> list[tuple[str, str]]:
    """Same-label pairs of a classification split: each row with one seeded random partner of its class.

    Rows of single-row classes have no partner and are skipped.

    Args:
        ds: a split with ``text`` and ``label`` columns.
        seed: seed of the partner choice and of the order (and thus of which pairs survive the cap).
        max_pairs: keep at most this many pairs.

    Returns:
        ``(text, partner text)`` pairs in shuffled order.
    """
    texts, labels = ds["text"], np.asarray(ds["label"])
    rng = np.random.default_rng(seed)
    firsts, partners = [], []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        n = len(members)
        if n < 2:
            continue
        # Offset 1..n-1 around the class ring: a uniform partner that is never the row itself.
        offsets = rng.integers(1, n, size=n)
        firsts.append(members)
        partners.append(members[(np.arange(n) + offsets) % n])
    if not firsts:
        return []
    first, partner = np.concatenate(firsts), np.concatenate(partners)
    order = rng.permutation(len(first))[:max_pairs]
    return [(texts[i], texts[j]) for i, j in zip(first[order], partner[order])]
