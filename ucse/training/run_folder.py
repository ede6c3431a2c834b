"""The run folder: what may be trained into it and resuming from its checkpoints.

No Lightning here: these checks run before the training stack is imported (``ucse.training.preflight``);
Lightning's checkpoint I/O and callback live in ``ucse.training.checkpoints``.
"""

from __future__ import annotations

import logging
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import torch

from ucse import atomic
from ucse.config import ConfigError, Recipe, TrainConfig, from_yaml
from ucse.config.run_layout import RunFolder, profile_repair, wants_profile
from ucse.heads.io import CALIBRATION_FILE, HEAD_FILES, WEIGHTS_FILE

DATA_KEY = "ucse_data_fingerprints"
"""Checkpoint key of the split fingerprints (``TaskData.fingerprints``): resuming on other rows fails."""
RESULT_MARKERS = (RunFolder.METRICS, RunFolder.HEAD, RunFolder.CHECKPOINTS)
"""What makes a folder hold a run worth keeping: results, a head, or checkpoints to resume from."""
# Sections a resumed run must share with the run it resumes (epochs may grow; logging may change). optim, the
# recipe and the head's precision were left out: a resume took a new lr / weight decay / batch size into
# config.yaml while the optimiser state went on with the old ones.
_RESUME_KEYS = ("task", "backbone", "head", "loss", "data", "seed", "optim", "recipe", "head_precision")
_MAY_GROW = {"optim": ("epochs",)}
"""Fields of a resume section that may differ: more epochs continue the run."""
_SCHEDULED = {"optim": ("epochs", "batch_size")}
"""Under ``recipe=auto`` the run sets these itself from the data size (``fit_head.schedule``, written into its
config.yaml): the command's own values are not the run's, so they are not compared."""


log = logging.getLogger(__name__)


def holds_results(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run worth keeping (:data:`RESULT_MARKERS`)."""
    run = RunFolder(run_dir)
    ckpts = run.checkpoints
    return run.metrics.exists() or run.head.exists() or (ckpts.is_dir() and any(ckpts.glob("*.ckpt")))


def check_run_dir(cfg: TrainConfig, run_dir: Path) -> bool:
    """Decide, before anything is loaded or written, whether training may go into ``run_dir``.

    A folder holding a run (results, a head or checkpoints) is refused unless ``overwrite=true`` (the old
    run is replaced whole when the new one finishes) or ``ckpt_path`` (resume it; its config must match).
    A non-empty folder without a run's ``config.yaml`` is always refused. Nothing is changed here.

    Returns:
        Whether the run must be trained in a temporary sibling and swapped in at the end (``overwrite``).

    Raises:
        ConfigError: naming the folder, what is in it and the flag or folder that allows the run.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"Run folder {run_dir} is a file; choose another output_dir.")
    if cfg.ckpt_path and cfg.ckpt_path != "last":
        checkpoint_path(cfg, run_dir)  # a named file must be this run's own, even in a new folder
    if not run_dir.is_dir():
        return False
    # Only this program's own temporaries are ignored: a user's `.draft.tmp` makes the folder not ours.
    names = {p.name for p in run_dir.iterdir() if atomic.leftover_target(p.name) is None}
    if names and RunFolder.CONFIG not in names:
        raise ConfigError(
            f"Refusing to train into {run_dir}: it holds files but no ucse run (no config.yaml: "
            f"{', '.join(sorted(names)[:5])}); nothing was changed. Choose another output_dir (or name)."
        )
    if not holds_results(run_dir):
        _check_unfinished(run_dir, names)
        return False  # empty, or a run that failed before training: nothing worth keeping
    if cfg.ckpt_path:
        _check_resume(cfg, run_dir)
        return False
    if cfg.overwrite:
        return True
    present = sorted(n for n in names if n in RESULT_MARKERS)
    if lacks_profile(run_dir):
        from ucse.data.run_rows import intact as rows_intact  # here: the checks run before `datasets` loads

        raise ConfigError(
            f"{run_dir} already holds a trained run ({', '.join(present)}) without its uncertainty profile "
            f"(stopped before fitting it, or trained by ucse.training.train); nothing was changed. For the "
            f"profile, {profile_repair(run_dir, rows_intact(run_dir))}; "
            "or pass overwrite=true to train it again, or choose another output_dir (or name)."
        )
    # resuming is offered only where there is a checkpoint to resume from (head=auto writes none: a trial
    # followed the offer into "writes no checkpoint")
    resume = ", ckpt_path=last to resume it," if RunFolder(run_dir).last_checkpoint.is_file() else ""
    raise ConfigError(
        f"{run_dir} already holds a run ({', '.join(present)}); nothing was changed. Pass overwrite=true to "
        f"replace it whole{resume} or choose another output_dir (or name) to keep it beside the new one."
    )


def lacks_profile(run_dir: Path) -> bool:
    """Whether a run's head was written but the profile its config asks for was not (a stopped run)."""
    head = RunFolder(run_dir).head
    if not (head / WEIGHTS_FILE).is_file() or (head / CALIBRATION_FILE).exists():
        return False
    return wants_profile(run_dir, if_unreadable=False)  # unreadable: not this run's to judge here


_UNFINISHED = {
    RunFolder.CONFIG,
    RunFolder.LOGS,
    RunFolder.CHECKPOINTS,
    RunFolder.HELDOUT,
    RunFolder.LABEL_REVIEW,
    RunFolder.ROWS,
}
"""What a run that stopped before its results can leave (besides profiler reports, ``<stage>-profile*``)."""


def _check_unfinished(run_dir: Path, names: set[str]) -> None:
    """Refuse a folder that a run without results did not leave: a user's ``config.yaml`` beside their files.

    Trained into until now, since a ``config.yaml`` was taken for a ucse run's: the user's ``config.yaml``
    and ``logs/`` were replaced, and a later ``overwrite=true`` deleted the rest.
    """
    if not names:
        return
    # profiler reports: <stage>-profile.txt (simple/advanced), <stage>-profile-...pt.trace.json (pytorch)
    foreign = sorted(n for n in names if n not in _UNFINISHED and "-profile" not in n)
    reason = f"files a ucse run does not write ({', '.join(foreign[:5])})" if foreign else ""
    if not reason:
        try:
            from_yaml(RunFolder(run_dir).config)
        except ConfigError as err:
            reason = f"a config.yaml that is not a ucse run's ({str(err)[:120]})"
    if reason:
        raise ConfigError(
            f"Refusing to train into {run_dir}: it holds {reason}; nothing was changed. Choose another "
            "output_dir (or name)."
        )


def _check_resume(cfg: TrainConfig, run_dir: Path) -> None:
    """A resumed run needs the same task, backbone, head, loss, data and seed, and a readable checkpoint."""
    run = RunFolder(run_dir)
    if run.config.is_file():
        old = from_yaml(run.config)
        for key in _RESUME_KEYS:
            skip = _SCHEDULED if Recipe(cfg.recipe) is Recipe.auto else _MAY_GROW
            if _comparable(getattr(old, key), key, skip) != _comparable(getattr(cfg, key), key, skip):
                what = _diff(getattr(old, key), getattr(cfg, key), key, skip)
                raise ConfigError(
                    f"ckpt_path={cfg.ckpt_path} resumes the run in {run_dir}, but its config.yaml has "
                    f"another '{key}' ({what}); resume with the same settings, or pass overwrite=true "
                    "(without ckpt_path) to start the run afresh."
                )
    head = run.head
    if head.exists() and (not head.is_dir() or {p.name for p in head.iterdir()} - HEAD_FILES):
        raise ConfigError(f"{head} is not a saved head folder; move it away before resuming the run.")
    path = checkpoint_path(cfg, run_dir)
    if path is not None:
        read_checkpoint(path)


def _comparable(section: Any, key: str, skip: dict[str, tuple[str, ...]]) -> Any:
    """A config section with the fields that may differ on resume (``skip``) left out."""
    if not is_dataclass(section) or key not in skip:
        return section
    return {f.name: getattr(section, f.name) for f in fields(section) if f.name not in skip[key]}


def _diff(old: Any, new: Any, key: str, skip: dict[str, tuple[str, ...]]) -> str:
    """The first field that differs between two config sections, as ``key.field: old -> new``."""
    if is_dataclass(old) and is_dataclass(new):
        for f in fields(old):
            a, b = getattr(old, f.name), getattr(new, f.name)
            if a != b and f.name not in skip.get(key, ()):
                return (
                    f"{key}.{f.name}: {getattr(a, 'value', a)!r} in the run, {getattr(b, 'value', b)!r} now"
                )
    return f"{old!r} in the run, {new!r} now"


def checkpoint_path(cfg: TrainConfig, run_dir: Path) -> Path | None:
    """The checkpoint ``cfg.ckpt_path`` names (``last`` -> ``checkpoints/last.ckpt``), or None when absent."""
    if not cfg.ckpt_path:
        return None
    if cfg.ckpt_path == "last":
        path = RunFolder(run_dir).last_checkpoint
        return path if path.is_file() else None  # killed before the first checkpoint: start afresh
    path = Path(cfg.ckpt_path)
    if not path.is_file():
        raise ConfigError(
            f"ckpt_path={cfg.ckpt_path}: no such checkpoint file; use ckpt_path=last or a .ckpt file."
        )
    own = RunFolder(run_dir).checkpoints.resolve()
    if path.resolve().parent != own:  # another run's: its config.yaml, which resume checks, is not this one
        raise ConfigError(
            f"ckpt_path={cfg.ckpt_path} is not a checkpoint of the run in {run_dir} (its {own.name}/ "
            "folder); resume a run in its own output_dir with ckpt_path=last."
        )
    return path


def read_checkpoint(path: Path) -> dict:
    """Load a Lightning checkpoint with ``weights_only=True`` (no code runs); damage is a ConfigError."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises RuntimeError, UnpicklingError, EOFError...
        raise ConfigError(
            f"Checkpoint {path} is unreadable ({type(err).__name__}: {str(err).split('.')[0][:100]}); it "
            "was probably cut short by a kill. Delete it to resume from the start, or pass overwrite=true."
        ) from None
    # what a Lightning checkpoint holds; without epoch / global_step a resume silently trained on top
    state = checkpoint.get("state_dict") if isinstance(checkpoint, dict) else None
    missing = [
        k
        for k in ("epoch", "global_step", "loops")
        if not isinstance(checkpoint, dict) or k not in checkpoint
    ]
    counts = [k for k in ("epoch", "global_step") if k not in missing and not _is_count(checkpoint[k])]
    tensors = isinstance(state, dict) and all(isinstance(v, torch.Tensor) for v in state.values())
    problems = [f"no {', '.join(missing)}"] if missing else []
    problems += [f"{k} is not a count" for k in counts]
    problems += [] if tensors else ["a state_dict that is not a mapping of tensors"]
    if problems:
        raise ConfigError(
            f"Checkpoint {path} is not a training checkpoint of this program ({problems[0]}); delete it to "
            "resume from the start, or pass overwrite=true."
        )
    return checkpoint


def _is_count(value: object) -> bool:
    """A non-negative Python int (not a bool), as Lightning writes a checkpoint's epoch and step."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_checkpoint_fits(checkpoint: dict, module: torch.nn.Module, path: Path) -> None:
    """Refuse a checkpoint whose weights do not fit this head (e.g. resuming with another head)."""
    state = checkpoint.get("state_dict", {})
    expected = module.state_dict()
    bad = sorted(set(state) ^ set(expected)) or [
        k for k, v in expected.items() if tuple(state[k].shape) != tuple(v.shape)
    ]
    if bad:
        raise ConfigError(
            f"Checkpoint {path} does not fit this head (first differing tensor: {bad[0]}); it was trained "
            "with other head settings. Resume with the run's own config, or overwrite=true (no ckpt_path)."
        )


def check_same_data(checkpoint: dict, fingerprints: dict[str, str], path: Path) -> None:
    """Refuse to resume a checkpoint saved on other rows (an edited data file, another carve).

    The checkpoint holds the split fingerprints of the data it was trained on (:data:`DATA_KEY`); one saved
    before they were recorded is not checked.
    """
    saved = checkpoint.get(DATA_KEY)
    if not isinstance(saved, dict):
        return
    changed = [s for s in fingerprints if saved.get(s) != fingerprints[s]]
    if changed:
        raise ConfigError(
            f"Checkpoint {path} was trained on other {' and '.join(changed)} rows than the data give now "
            "(the data changed since, or were carved differently); resume on the same data, or pass "
            "overwrite=true (without ckpt_path) to train afresh."
        )


def check_best_on_disk(checkpoint: dict, checkpoints: Path) -> None:
    """Refuse, before any training, a resume whose recorded best checkpoint is gone from ``checkpoints``.

    The run would train its remaining epochs and only then find that the best epoch's weights, which it
    ships, are missing (it shipped the last epoch's before that was refused).
    """
    states = checkpoint.get("callbacks")
    recorded = [
        v.get("best_model_path")
        for v in (states.values() if isinstance(states, dict) else [])
        if isinstance(v, dict) and isinstance(v.get("best_model_path"), str)
    ]
    name = Path(recorded[0]).name if recorded and recorded[0] else ""
    if name and not (checkpoints / name).is_file():
        raise missing_best(name, checkpoints)


def missing_best(name: str, checkpoints: Path) -> ConfigError:
    """The error of a run whose recorded best checkpoint ``name`` is not in ``checkpoints``."""
    return ConfigError(
        f"The best checkpoint this run recorded ({name or 'none'}) is not in {checkpoints}; its weights "
        "cannot be shipped. Train the run again with overwrite=true."
    )


def tell_no_last_checkpoint(run_dir: Path) -> None:
    """Warn that ``ckpt_path=last`` found no checkpoint (a mistyped folder trained afresh, unsaid)."""
    log.warning(
        "ckpt_path=last: %s holds no last.ckpt (a new folder, or a run stopped before its first checkpoint): "
        "training from the start.",
        RunFolder(run_dir).checkpoints,
    )


def tell_nothing_resumed(run_dir: Path, step: int) -> None:
    """Warn that a resumed run had finished: allowed (a resume may add epochs), but it trained nothing."""
    log.warning(
        "ckpt_path=last: the run in %s had finished (step %d), so nothing was trained; its head and figures "
        "are written again from its best state (an eval.json or plots beside them are older).",
        run_dir,
        step,
    )
