"""Task data: your own files or in-memory data, MTEB tasks (local or hub), row checks, STS/retrieval pairs."""

from ucse.data.checks import BadRow, label_problems, resolve_bad_rows, score_problems, text_problems
from ucse.data.loading import hub_id, load_classification, load_hub
from ucse.data.pairs import (
    RetrievalData,
    doc_text,
    label_positive_pairs,
    load_retrieval,
    load_sts,
    retrieval_positive_pairs,
    sts_positive_pairs,
)
from ucse.data.sources import DataSource, load_task_data
from ucse.data.splitting import stratified_sample, stratified_split
from ucse.data.tasks import DATA_ENV, DataError, TaskData, resolve_data_root, task_folder, task_names

__all__ = [
    "DATA_ENV",
    "BadRow",
    "DataError",
    "DataSource",
    "RetrievalData",
    "TaskData",
    "doc_text",
    "hub_id",
    "label_positive_pairs",
    "label_problems",
    "load_classification",
    "load_hub",
    "load_retrieval",
    "load_sts",
    "load_task_data",
    "resolve_bad_rows",
    "resolve_data_root",
    "retrieval_positive_pairs",
    "score_problems",
    "stratified_sample",
    "stratified_split",
    "sts_positive_pairs",
    "task_folder",
    "task_names",
    "text_problems",
]
