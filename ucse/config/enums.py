"""The config's string enums: one name per concept, the values its YAML and command line spell.

Member names equal their values because OmegaConf parses enums by member name.
"""

from __future__ import annotations

from enum import Enum


class Pooling(str, Enum):
    """How a sentence vector is read from token states."""

    last = "last"  # last non-pad token (EOS for decoder embedders such as Qwen3-Embedding)
    mean = "mean"  # masked mean over tokens (sentence-transformers encoders)
    cls = "cls"  # first token


class PaddingSide(str, Enum):
    """Tokenizer padding side; ``auto`` keeps the tokenizer's own."""

    auto = "auto"
    left = "left"
    right = "right"


class LongTexts(str, Enum):
    """What the backbone does with a text longer than ``max_length`` tokens."""

    truncate = "truncate"  # read its first max_length tokens (a warning says how many texts reach it)
    windows = "windows"  # read it whole, window by window (ucse/backbone/windows.py)


class Precision(str, Enum):
    """Numeric precision (bf16: autocast on CPU; on a GPU the frozen backbone's weights are bf16 too)."""

    auto = "auto"  # bf16 where the device computes it natively (CUDA, CPUs with AVX512-BF16/AMX), else fp32
    fp32 = "fp32"
    bf16 = "bf16"


class CacheDtype(str, Enum):
    """Storage dtype of cached hidden states."""

    fp16 = "fp16"
    bf16 = "bf16"


class Device(str, Enum):
    """Where the run executes; ``auto`` picks CUDA when present."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Strategy(str, Enum):
    """How Lightning spreads training over ``devices`` processes (``Trainer(strategy=)``)."""

    auto = "auto"  # Lightning's choice: one device -> single-device, several -> ddp
    ddp = "ddp"  # one process per device, the script re-launched per rank (the fastest; not in notebooks)
    ddp_spawn = "ddp_spawn"  # one process per device started with multiprocessing spawn (works in notebooks)
    fsdp = "fsdp"  # sharded parameters/optimiser state; only worth it for heads too large for one GPU


class HeadType(str, Enum):
    """Trainable head on top of the frozen backbone."""

    textcnn = "textcnn"  # the paper's multi-kernel Gaussian TextCNN
    linear = "linear"  # pooled state (EOS/CLS/mean as the backbone says) + Linear: the reproduced baseline
    mean = "mean"  # mean-pooled state + Linear
    mlp = "mlp"  # MLP adapter with the TextCNN's parameter count
    attention = "attention"  # attention pooling + Linear
    logreg = "logreg"  # L2-normalised pooled states + LogisticRegression with C chosen by cross-validation
    blend = "blend"  # calibrated average of a Gaussian TextCNN and the logreg probe (head=auto may pick it)
    auto = "auto"  # fit textcnn, logreg and their blend on the cached states; keep the best by validation NLL


class Recipe(str, Enum):
    """How a head is trained: adapted to the data size, or exactly the paper's settings."""

    auto = "auto"  # training length in optimiser steps from the data size, the best state kept
    paper = "paper"  # the configs' epochs / batch / lr as they are (reproduces the paper's Table 7)


class ContrastiveType(str, Enum):
    """Auxiliary contrastive objective mixed in with weight ``loss.lcl_weight``."""

    lcl = "lcl"  # label-wise contrastive on sampled z (paper Eq. 3)
    supcon = "supcon"  # Khosla et al. 2020 supervised contrastive
    simcse = "simcse"  # unsupervised SimCSE: two dropout views of the same sentence
    none = "none"


class ProfilerType(str, Enum):
    """Lightning profiler for the head's training loop; its report is written into the run folder."""

    none = "none"
    simple = "simple"  # time per Lightning hook and step
    advanced = "advanced"  # cProfile of every hook
    pytorch = "pytorch"  # torch.profiler operator and kernel times


class TaskType(str, Enum):
    """Kind of task a task config describes."""

    classification = "classification"
    sts = "sts"
    retrieval = "retrieval"
