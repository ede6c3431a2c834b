"""Training: the LightningModule, the DataModule over cached states, and the run orchestration."""

from ucse.training.run import RunResult, resolve_device, run_dir_for, train

__all__ = ["RunResult", "resolve_device", "run_dir_for", "train"]
