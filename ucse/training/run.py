"""One training run end to end: data -> frozen backbone states (cached) -> head training -> run folder."""

from __future__ import annotations

import functools
import logging
import signal
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.profilers import AdvancedProfiler, Profiler, PyTorchProfiler, SimpleProfiler

from ucse import atomic
from ucse.backbone.cache import Dist, HiddenStateCache, OnTheFlyStates, SubsetStates, TokenStates
from ucse.backbone.device import resolve_device  # noqa: F401 - also imported from here (ucse.training)
from ucse.backbone.encoder import FrozenBackbone
from ucse.backbone.loading import model_fingerprint
from ucse.backbone.precision import effective_precision
from ucse.config import HeadType, Precision, ProfilerType, TrainConfig, to_yaml
from ucse.config.run_layout import RunFolder
from ucse.data import TaskData, load_classification
from ucse.data.duplicates import text_groups
from ucse.data.run_rows import save_rows
from ucse.heads import build_head, save_head
from ucse.interrupt import TerminatedError, interrupt_as_error, stop_mark, stop_on_sigterm, stops_since
from ucse.training.auto_run import fit_auto_run
from ucse.training.checkpoints import BackgroundCheckpointIO, RelocatableCheckpoint
from ucse.training.csv_log import RunCSVLogger
from ucse.training.datamodule import StatesDataModule
from ucse.training.distributed import LazyStates, is_rank_zero, stops_end_every_rank
from ucse.training.fit_head import KeepBest, schedule
from ucse.training.label_report import per_label
from ucse.training.module import UcseModule
from ucse.training.preflight import IN_MEMORY, check_data_rows, check_run, is_distributed
from ucse.training.run_folder import (
    check_best_on_disk,
    check_checkpoint_fits,
    check_run_dir,
    check_same_data,
    checkpoint_path,
    missing_best,
    read_checkpoint,
    tell_no_last_checkpoint,
    tell_nothing_resumed,
)
from ucse.training.run_lock import hold_run_folder
from ucse.training.stops import StopWhenSignalled
from ucse.training.torch_flags import run_torch_flags
from ucse.version import __version__

log = logging.getLogger(__name__)
SPLITS = ("train", "validation", "test")


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    metrics: dict


def _peak_gpu_mib(device: torch.device) -> float | None:
    """Peak GPU memory allocated by torch since the run started, in MiB (``None`` on CPU)."""
    return round(torch.cuda.max_memory_allocated(device) / 2**20, 1) if device.type == "cuda" else None


def task_pool(data: TaskData) -> list[str]:
    """The sorted unique texts of all splits: what the hidden-state cache stores for a task."""
    return sorted({t for s in SPLITS for t in data.texts(s)})


def build_states(
    cfg: TrainConfig, backbone: FrozenBackbone, data: TaskData, dist: Dist | None = None
) -> tuple[dict[str, TokenStates], HiddenStateCache | None]:
    """Token states of every split, as views of one pool of the task's unique texts.

    The pool (sorted unique texts of all splits) does not depend on the seed's validation slice, so
    every seed and every head of a sweep reuses one cache entry: one backbone pass per task. With ``dist``
    (several ranks) each rank encodes its share of the pool and rank 0 assembles the entry.
    """
    split_texts = {s: data.texts(s) for s in SPLITS}
    pool = task_pool(data)
    row = {t: i for i, t in enumerate(pool)}
    cache = None
    if cfg.cache.enabled:
        cache = HiddenStateCache(cfg.cache.dir, cfg.cache.dtype, progress=cfg.progress_bar)
        entry = cache.get_or_build(backbone, pool, task=cfg.task.name, split="pool", dist=dist)
        base: TokenStates = entry
        if _fits_on_device(cfg, backbone.device, entry.nbytes()):
            base = entry.to_device(backbone.device)
    else:
        base = OnTheFlyStates(backbone, pool)
    return {s: SubsetStates(base, [row[t] for t in texts]) for s, texts in split_texts.items()}, cache


def _fit_state_norm(head: torch.nn.Module, seed: int, states: dict[str, TokenStates]) -> None:
    """Fit ``head.state_norm`` on the training split (a picklable callback for ``LazyStates``)."""
    head.state_norm.fit(states["train"], seed)


def _fits_on_device(cfg: TrainConfig, device: torch.device, nbytes: int) -> bool:
    """Whether to hold the cached states in GPU memory (``cache.on_device``, under half the free memory)."""
    if device.type != "cuda" or not cfg.cache.on_device or cfg.num_workers > 0:
        return False
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes < free // 2


def head_meta(cfg: TrainConfig, data: TaskData) -> dict:
    """What a saved head needs to be used without Lightning: labels, backbone and task prompt."""
    from omegaconf import OmegaConf

    return {
        "label_names": list(data.label_names),
        "label_type": "int" if data.integer_labels else "str",  # integer ids come back as integers
        "backbone": OmegaConf.to_container(OmegaConf.structured(cfg.backbone), enum_to_str=True),
        # The weights' identity (memoised: the run's backbone hashed them already); loading checks it.
        "backbone_fingerprint": model_fingerprint(cfg.backbone),
        "task": cfg.task.name,
        "instruction": cfg.task.instruction,
        "seed": cfg.seed,
        "ucse_version": __version__,  # which ucse trained it (save_pretrained's folder carries it)
    }


def _profiler(cfg: TrainConfig, run_dir: Path) -> Profiler | None:
    """Lightning's profiler named by ``cfg.profiler``, writing ``profile*.txt`` into the run folder."""
    kinds = {
        ProfilerType.simple: SimpleProfiler,
        ProfilerType.advanced: AdvancedProfiler,
        ProfilerType.pytorch: PyTorchProfiler,
    }
    kind = kinds.get(ProfilerType(cfg.profiler))
    return None if kind is None else kind(dirpath=run_dir, filename="profile")


def _trainer(
    cfg: TrainConfig, run_dir: Path, device: torch.device, keep: Callback, resumed_epoch: int | None
) -> tuple[L.Trainer, ModelCheckpoint]:
    head_bf16 = effective_precision(cfg.head_precision, device) is Precision.bf16
    ckpt = RelocatableCheckpoint(
        dirpath=RunFolder(run_dir).checkpoints,
        filename="best-{epoch}-{step}",
        monitor="val/acc",
        mode="max",
        save_top_k=1,
        save_last=True,
    )
    trainer = L.Trainer(
        accelerator="gpu" if device.type == "cuda" else "cpu",
        devices=cfg.devices,
        strategy=cfg.strategy.value,
        use_distributed_sampler=False,  # LengthBucketSampler splits each global batch over the ranks itself
        max_epochs=cfg.optim.epochs,
        precision="bf16-mixed" if head_bf16 else "32-true",
        # The bar reads the logged loss (a host sync on a GPU) only when it redraws: every log interval.
        callbacks=[ckpt, keep, StopWhenSignalled()]
        + ([TQDMProgressBar(refresh_rate=cfg.log_every_n_steps)] if cfg.progress_bar else []),
        logger=[
            RunCSVLogger(run_dir, keep_through_epoch=resumed_epoch),
            TensorBoardLogger(run_dir, name="logs", version="", default_hp_metric=False),
        ],
        # Bit-for-bit determinism is promised on CPU; on CUDA it would need CUBLAS_WORKSPACE_CONFIG.
        deterministic=device.type == "cpu",
        log_every_n_steps=cfg.log_every_n_steps,
        enable_progress_bar=cfg.progress_bar,
        profiler=_profiler(cfg, run_dir),
        plugins=[BackgroundCheckpointIO()],
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    return trainer, ckpt


def train(cfg: TrainConfig, data: TaskData | None = None) -> RunResult:
    """Train one head as ``cfg`` says and write the run folder.

    ``data`` is a task already loaded (e.g. by :func:`ucse.data.load_task_data` from a DataFrame); ``None``
    loads ``cfg``'s task (``data.path``, ``data.root`` or the hub). Data are loaded and checked before
    anything is written.

    The folder holds ``config.yaml`` (resolved), ``metrics.json``
    (``{"val": {...}, "test": {"accuracy", "f1_macro"}, "test_per_label": [...], "timing": {...}, "data":
    {...}}``; ``test_per_label``, and ``heldout_per_label`` of a selection's held-out rows:
    :func:`ucse.training.label_report.per_label`), Lightning ``checkpoints/`` (``last.ckpt`` resumes with
    ``ckpt_path=last``), CSV/TensorBoard ``logs/`` and ``head/`` (``config.json`` + ``model.safetensors``).
    """
    t0 = time.perf_counter()
    device, run_dir = check_run(cfg)
    rank0 = is_rank_zero()  # other ranks of a distributed run write nothing into the run folder
    data = data if data is not None else load_classification(cfg.task, cfg.data, cfg.seed)
    check_data_rows(cfg, data)  # before the run folder is touched
    # Loaded before the folder is touched too (a backbone that failed left a config.yaml-only folder). A
    # distributed run encodes in DataModule.setup on every rank (on its device), once the processes exist.
    where = "cpu" if is_distributed(cfg) else device
    backbone = FrozenBackbone(cfg.backbone, where, instruction=cfg.task.instruction)
    swap = False
    mark = stop_mark()
    try:
        with ExitStack() as stack:
            stack.enter_context(run_torch_flags())  # Lightning's process-wide flags end with the run
            stack.enter_context(interrupt_as_error())  # Ctrl-C reaches us, not Lightning's sys.exit(1)
            stack.enter_context(stop_on_sigterm())  # SIGTERM too, not Lightning's deadlock-prone handler
            if rank0:
                # From here on the folder is this process's: a concurrent run into it fails in one line.
                stack.enter_context(hold_run_folder(run_dir))
                # A run killed while an overwrite swapped folders left the old run aside: put it back first.
                atomic.clean_leftovers(run_dir.parent, run_dir.name)
                swap = check_run_dir(cfg, run_dir)
                # Temporary files a killed run left in it (a half-written head, metrics or checkpoint) go.
                for sub in (run_dir, RunFolder(run_dir).checkpoints):
                    atomic.clean_leftovers(sub)
            # overwrite=true: train into a temporary sibling, swapped in whole when the run succeeded.
            work = stack.enter_context(atomic.atomic_dir(run_dir)) if swap else run_dir
            work.mkdir(parents=True, exist_ok=True)
            metrics = _run(cfg, data, work, device, t0, backbone)
    except TerminatedError as stop:
        _raise_stopped(stop, cfg, run_dir, swap)
    except Exception:
        # A stop swallowed on the way (a finalizer), then a failure it caused (its DataLoader workers ended
        # by the same Ctrl-C): the stop is what happened.
        stop = stops_since(mark)
        if stop is None:
            raise
        _raise_stopped(stop, cfg, run_dir, swap)
    if rank0:
        log.info("run folder: %s  test: %s", run_dir, metrics.get("test", "none (no test split)"))
    return RunResult(run_dir, metrics)


def _raise_stopped(stop: TerminatedError, cfg: TrainConfig, run_dir: Path, swap: bool) -> None:
    """Re-raise a stop with what the run left: Ctrl-C as ``KeyboardInterrupt``, SIGTERM as the stop."""
    if stop.signum == signal.SIGINT:  # Ctrl-C stays a KeyboardInterrupt for the caller, with the details
        raise KeyboardInterrupt(_stopped(stop, cfg, run_dir, swap)) from None
    raise TerminatedError(_stopped(stop, cfg, run_dir, swap), stop.signum) from None


def _stopped(stop: TerminatedError, cfg: TrainConfig, run_dir: Path, swap: bool) -> str:
    """What a run stopped by a signal left behind, and how to go on."""
    if RunFolder(run_dir).scratch:  # UcseClassifier.fit's temporary folder goes with the estimator
        return f"{stop}; nothing was kept (the estimator trained in a temporary folder)."
    if swap:
        return (
            f"{stop}; the run in {run_dir} is unchanged (the unfinished overwrite was discarded). Rerun with "
            "overwrite=true to replace it."
        )
    last = RunFolder(run_dir).last_checkpoint
    if not last.is_file():
        return f"{stop} before the first checkpoint; rerun the same command to start afresh."
    done = int(read_checkpoint(last).get("epoch", -1)) + 1
    return (
        f"{stop}; {last} holds {done} of {cfg.optim.epochs} epochs, intact. Resume with the same command "
        "plus ckpt_path=last."
    )


def _run(
    cfg: TrainConfig, data: TaskData, run_dir: Path, device: torch.device, t0: float, backbone: FrozenBackbone
) -> dict:
    """The run itself, writing into ``run_dir`` (the run folder, or its temporary sibling)."""
    schedule(cfg, len(data.splits["train"]))
    if is_rank_zero():
        atomic.write_text(RunFolder(run_dir).config, to_yaml(cfg))
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    distributed = is_distributed(cfg)
    t_states = time.perf_counter()
    if distributed:
        lazy = LazyStates(functools.partial(build_states, cfg, data=data), backbone)
        states, cache = lazy, None
    else:
        states, cache = build_states(cfg, backbone, data)
    states_s = time.perf_counter() - t_states
    states_peak = _peak_gpu_mib(device)
    labels = {s: data.labels(s) for s in SPLITS}
    fingerprints = data.fingerprints()  # checked on resume (checkpoints hold them), then in metrics.json

    if HeadType(cfg.head.type) in IN_MEMORY:
        texts = {s: data.texts(s) for s in SPLITS}
        groups = text_groups([*texts["train"], *texts["validation"]]) if cfg.data.group_copies else None
        # a test slice carved from the user's rows may train the shipped head once scored (data.refit_test)
        refit_test = cfg.data.refit_test and "test" in data.carved
        merged = [*texts["train"], *texts["test"], *texts["validation"]]
        all_groups = text_groups(merged) if refit_test and cfg.data.group_copies else None
        meta = head_meta(cfg, data)
        metrics = fit_auto_run(
            cfg, run_dir, device, states, labels, data.num_classes, meta, groups, refit_test, all_groups
        )
    else:
        metrics = _fit_lightning(
            cfg, run_dir, device, states, labels, data, backbone.hidden_size, fingerprints
        )
    if distributed:
        if not is_rank_zero():
            return metrics  # rank 0 alone writes metrics.json
        states_s, cache = lazy.seconds, lazy.cache  # measured inside fit (in the main process under ddp)

    for rows in ("test", "heldout"):  # (C, C) confusion matrices from either path -> one row per label
        if f"{rows}_confusion" in metrics:
            metrics[f"{rows}_per_label"] = per_label(metrics.pop(f"{rows}_confusion"), data.label_values)
    metrics["timing"] = {"states_s": round(states_s, 3), "total_s": round(time.perf_counter() - t0, 3)}
    if device.type == "cuda":
        metrics["timing"]["peak_gpu_mib_states"] = states_peak
        metrics["timing"]["peak_gpu_mib"] = _peak_gpu_mib(device)
    metrics["data"] = {
        "source": data.source,
        "sizes": {s: len(data.splits[s]) for s in SPLITS},
        "num_classes": data.num_classes,
        "dropped": data.dropped,
        "cache_bytes": cache.used_bytes() if cache is not None else 0,  # this run's entries only
        "cache_builds": cache.builds if cache is not None else 0,
        "fingerprints": fingerprints,  # ucse calibrate / eval check that they reload these splits
        "train_capped": cfg.data.max_train_samples is not None,  # a slice by choice: no "label more" advice
        # later commands read the rows from here, whatever becomes of the data file (checked against this)
        "rows": save_rows(run_dir, data),
    }
    atomic.write_json(RunFolder(run_dir).metrics, metrics)
    return metrics


def _fit_lightning(
    cfg: TrainConfig,
    run_dir: Path,
    device: torch.device,
    states: dict[str, TokenStates] | LazyStates,
    labels: dict[str, np.ndarray],
    data: TaskData,
    hidden_size: int,
    fingerprints: dict[str, str],
) -> dict:
    head = build_head(cfg.head, hidden_size, data.num_classes, cfg.backbone.pooling)
    if cfg.head.normalize_states:  # statistics of the training split's states (on every rank under DDP)
        if isinstance(states, LazyStates):
            states.on_built = functools.partial(_fit_state_norm, head, cfg.seed)
        else:
            head.state_norm.fit(states["train"], cfg.seed)
    module = UcseModule(head, data.num_classes, cfg.loss, cfg.optim)
    dm = StatesDataModule(states, labels, cfg.optim.batch_size, cfg.seed, cfg.num_workers)
    keep = KeepBest(monitor="val/acc", mode="max")  # ModelCheckpoint's criterion, held in memory
    module.data_fingerprints = fingerprints
    resume = checkpoint_path(cfg, run_dir)
    if resume is None and cfg.ckpt_path == "last":  # said: a mistyped output_dir trained afresh in silence
        tell_no_last_checkpoint(run_dir)
    if resume is not None:
        checkpoint = read_checkpoint(resume)
        check_checkpoint_fits(checkpoint, module, resume)
        check_same_data(checkpoint, module.data_fingerprints, resume)
        check_best_on_disk(checkpoint, RunFolder(run_dir).checkpoints)
    trainer, ckpt = _trainer(cfg, run_dir, device, keep, None if resume is None else int(checkpoint["epoch"]))
    with stops_end_every_rank(trainer):  # a stop ends every rank, not only this one
        t_fit = time.perf_counter()
        trainer.fit(module, datamodule=dm, ckpt_path=resume, weights_only=True)
        fit_s = time.perf_counter() - t_fit
        if resume is not None and trainer.global_step == int(checkpoint["global_step"]):
            tell_nothing_resumed(run_dir, trainer.global_step)
        best = ckpt.best_model_path or None
        if best and not Path(best).is_file():
            # Resumed from a run trained under another folder name (overwrite=true trains in a temporary
            # sibling, renamed at the end): the checkpoint kept its old path; it is in this run's
            # checkpoints/.
            moved = RunFolder(run_dir).checkpoints / Path(best).name
            best = str(moved) if moved.is_file() else None
        saved_best = None if ckpt.best_model_score is None else float(ckpt.best_model_score)
        if keep.state is not None and saved_best in (None, keep.best):
            # The best epoch ran in this process: its weights and validation scores are in memory, so
            # neither a checkpoint read nor a second validation pass is needed (docs/RESULTS.md section 5).
            module.head.load_state_dict(keep.state)
            val, reload = keep.metrics, None
        else:  # resumed, and the best epoch ran before the resume: its weights are only in its checkpoint
            if best is None:  # validate(ckpt_path=None) would score, and ship, the last epoch's weights
                raise missing_best(Path(ckpt.best_model_path).name, RunFolder(run_dir).checkpoints)
            val = trainer.validate(module, datamodule=dm, ckpt_path=best, verbose=False, weights_only=True)[0]
            reload = best
        scores = {"val": {"accuracy": val["val/acc"], "f1_macro": val["val/f1_macro"]}}
        if len(labels["test"]):  # data.test_fraction=0: no test split, no test figures
            test = trainer.test(module, datamodule=dm, ckpt_path=reload, verbose=False, weights_only=True)[0]
            scores["test"] = {"accuracy": test["test/acc"], "f1_macro": test["test/f1_macro"]}
            scores["test_confusion"] = module.test_confusion_counts
    if trainer.is_global_zero:
        save_head(module.head.cpu().float(), RunFolder(run_dir).head, head_meta(cfg, data))
    return {
        **scores,
        "best_checkpoint": Path(best).name if best else None,
        "fit_s": round(fit_s, 3),
        "trainable_params": sum(p.numel() for p in head.parameters() if p.requires_grad),
    }
