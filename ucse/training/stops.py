"""A stop by signal that Python swallowed is raised again at the next batch boundary.

A Ctrl-C (or SIGTERM) raises ``TerminatedError`` wherever the main thread is (``ucse.interrupt``). Where
that is a finalizer, e.g. a DataLoader iterator's ``__del__`` shutting its workers down at an epoch's
start, Python prints "Exception ignored in ..." and goes on: the run trained on, or failed a moment later
on what the same Ctrl-C had ended (the workers), with a message about that instead of the stop.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback

from ucse.interrupt import stop_mark, stops_since


class StopWhenSignalled(Callback):
    """At every training, validation and test batch's start, raises a stop recorded since construction."""

    def __init__(self) -> None:
        self.mark = stop_mark()

    def _check(self) -> None:
        stop = stops_since(self.mark)
        if stop is not None:
            raise stop

    def on_train_batch_start(self, *args: Any) -> None:
        """Before a training step."""
        self._check()

    def on_validation_batch_start(self, *args: Any) -> None:
        """Before a validation step."""
        self._check()

    def on_test_batch_start(self, *args: Any) -> None:
        """Before a test step."""
        self._check()
