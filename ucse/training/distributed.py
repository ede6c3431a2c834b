"""Training on several devices (``devices=N``, ``strategy=``) with Lightning: checks, ranks and lazy states.

Lightning starts the extra processes inside ``Trainer.fit`` (``ddp`` re-runs the command once per rank,
``ddp_spawn`` spawns workers), so anything every rank must do together, such as encoding its share of the
texts into the cache, happens in ``LightningDataModule.setup``, after the process group exists.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import lightning as L
import torch
from lightning.fabric.utilities.rank_zero import rank_zero_only

from ucse.backbone.cache import Dist, HiddenStateCache, TokenStates
from ucse.backbone.encoder import FrozenBackbone
from ucse.interrupt import before_stop


def is_rank_zero() -> bool:
    """Whether this process writes the run folder (global rank 0).

    Lightning reads the rank from the environment its launcher sets for the re-run command, so this holds
    before ``Trainer.fit`` too.
    """
    return int(getattr(rank_zero_only, "rank", 0)) == 0


@contextmanager
def stops_end_every_rank(trainer: L.Trainer) -> Iterator[None]:
    """While ``trainer`` runs, ucse's own stop handling holds: a stop ends the rank processes first.

    Lightning's SIGTERM handler is left out: it broadcasts from inside the signal handler (Lightning
    #20806 / #20825), which deadlocks when another rank is in another collective operation at that moment
    (``kill`` of a 2-process CPU run's main process hung in 2 of 3 tries, waiting in that broadcast). ucse's
    handler (:func:`ucse.interrupt.stop_on_sigterm`, ``interrupt_as_error``) raises ``TerminatedError``
    instead, and before it does, the process that launched the other ranks ends them (SIGKILL, what Lightning
    does after Ctrl-C, which ``TerminatedError`` bypasses), so none is left waiting in a collective for it.
    One process, or a rank that launched none: nothing to end.
    """
    # Private: Lightning has no switch for its SIGTERM handler (SLURMEnvironment(auto_requeue=False) only
    # drops the requeue part). Registration happens at every fit / validate / test; the instance keeps this.
    trainer._signal_connector.register_signal_handlers = lambda: None  # noqa: SLF001
    stopped = False

    def end_ranks() -> None:
        nonlocal stopped
        stopped = True
        launcher = trainer.strategy.launcher
        if launcher is not None:
            launcher.kill(signal.SIGKILL)  # the processes it launched; already ended ones are skipped

    try:
        with before_stop(end_ranks):
            yield
    finally:
        if stopped:
            release_process_group()


def release_process_group() -> None:
    """Destroys this process's process group, if it has one, while the interpreter is still whole.

    After a stop, a collective the ended ranks were in can still be in the backend's worker threads; left to
    interpreter shutdown, the thread that finishes it takes the GIL of a finalizing interpreter and the
    process aborts ("terminate called without an active exception", exit 134 instead of 130 after Ctrl-C of
    a 2-process CPU run, once in CI). Lightning destroys the group at exit for NCCL only. The other ranks on
    this machine are ended first, so their side of any collective is closed and the wait here is short.
    Errors are ignored: the stop goes on.
    """
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        with suppress(Exception):
            dist.destroy_process_group()


class LazyStates:
    """Builds the token states inside ``StatesDataModule.setup`` on every rank (picklable for ``ddp_spawn``).

    Args:
        build: ``build(backbone=..., dist=...) -> (states, cache)``, e.g. ``ucse.training.run.build_states``
            bound to the config and data (``functools.partial(build_states, cfg, data=data)``).
        backbone: the backbone as loaded before training (on the CPU for a distributed run); on a GPU rank it
            is reloaded onto that rank's device.

    Attributes:
        cache: the cache the states came from (``None`` before the build or with the cache off).
        seconds: wall time of the build on this rank.
    """

    def __init__(
        self,
        build: Callable[
            [FrozenBackbone, Dist | None], tuple[dict[str, TokenStates], HiddenStateCache | None]
        ],
        backbone: FrozenBackbone,
    ) -> None:
        self.build = build
        self.backbone = backbone
        self.cache: HiddenStateCache | None = None
        self.seconds = 0.0
        self.on_built: Callable[[dict[str, TokenStates]], None] | None = None

    def __call__(self, strategy: object | None) -> dict[str, TokenStates]:
        """Build this rank's states (``strategy``: the trainer's, ``None`` on one device)."""
        t0 = time.perf_counter()
        backbone = self.backbone
        root = getattr(strategy, "root_device", None)
        if root is not None and torch.device(root) != backbone.device:
            backbone = FrozenBackbone(backbone.cfg, root, instruction=backbone.instruction)
        states, self.cache = self.build(backbone=backbone, dist=strategy)  # type: ignore[call-arg]
        if self.on_built is not None:
            self.on_built(states)
        self.seconds = time.perf_counter() - t0
        return states
