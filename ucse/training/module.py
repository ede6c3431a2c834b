"""The LightningModule: composes the head and the pure loss functions, logs every term."""

from __future__ import annotations

import logging
import random
from typing import Any

import lightning as L
import numpy as np
import torch
from torchmetrics import MetricCollection, SumMetric
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix, MulticlassF1Score
from transformers import get_linear_schedule_with_warmup

from ucse.config import ContrastiveType, LossConfig, OptimConfig
from ucse.heads.base import Head, HeadOutput
from ucse.losses import (
    cross_entropy,
    cross_entropy_rows,
    gaussian_kl,
    label_wise_contrastive,
    simcse,
    supcon,
    total_loss,
)
from ucse.training.datamodule import LENT
from ucse.training.run_folder import DATA_KEY

log = logging.getLogger(__name__)


class NonFiniteLossError(ValueError):
    """Training produced a NaN or infinite loss; the message names the step and the likely cause."""


RNG_KEY = "ucse_rng_state"

TRAIN_TERMS = ("loss", "ce", "contrastive", "kl", "acc", "sigma")
"""Terms logged per epoch as ``train/<term>_epoch`` (``sigma``: mean predicted std; variance heads only)."""


def rng_state() -> dict[str, Any]:
    """Torch, CUDA, numpy and Python RNG states as tensors and plain values (``weights_only``-loadable)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, next_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "python": [int(version), list(internal), next_gauss],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states saved by :func:`rng_state` (CUDA only when the device count matches)."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["gauss"]))
    version, internal, next_gauss = state["python"]
    random.setstate((version, tuple(internal), next_gauss))


class UcseModule(L.LightningModule):
    """Trains a head on frozen token states with (1 - l_lcl) * CE + l_lcl * contrastive + l_kl * KL (Eq. 6).

    The backbone is not part of this module: batches are already token states, so checkpoints hold
    only the head and the optimiser state.

    Args:
        head: the trainable head.
        num_classes: number of labels C.
        loss: loss weights and contrastive choice.
        optim: AdamW + warmup/decay settings.
    """

    finite_check_every: int = 0
    """Steps between reads of the non-finite-loss record; 0 = every step on CPU, 50 on an accelerator."""

    def __init__(self, head: Head, num_classes: int, loss: LossConfig, optim: OptimConfig) -> None:
        super().__init__()
        self.head = head
        self.loss_cfg = loss
        self.optim_cfg = optim
        metrics = MetricCollection(
            {
                # LENT: a distributed run's evaluation copy of a text (training/datamodule.py), not counted
                "acc": MulticlassAccuracy(num_classes, average="micro", ignore_index=LENT),
                "f1_macro": MulticlassF1Score(num_classes, average="macro", ignore_index=LENT),
            }
        )
        self.val_metrics = metrics.clone(prefix="val/")
        self.test_metrics = metrics.clone(prefix="test/")
        # per-label figures of the test split (metrics.json's test_per_label): counted on the device
        self.test_confusion = MulticlassConfusionMatrix(num_classes, ignore_index=LENT)
        # The validation NLL per text (lent copies weigh 0), as a sum and a count: MeanMetric's default
        # nan_strategy drops NaN rows (a broken epoch would read as finite) and reads the host every step,
        # and its "disable" drops the weights (torchmetrics issue 3434).
        self.val_ce = SumMetric(nan_strategy="disable")
        self.val_rows = SumMetric(nan_strategy="disable")
        self.test_confusion_counts: np.ndarray | None = None  # (C, C) after a test pass
        self._finite_record: torch.Tensor | None = None  # (7,) first non-finite step, on the device
        self._epoch_sums: torch.Tensor | None = None  # (6,) batch-weighted sums of TRAIN_TERMS this epoch
        self._epoch_rows = 0
        self._has_var = False
        self._compiled: Any = None  # optim.compile_step: the compiled _terms, or False once it failed
        self.data_fingerprints: dict[str, str] | None = None  # saved with each checkpoint (DATA_KEY)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> HeadOutput:
        """Run the head on (B, T, H) states and a (B, T) mask."""
        return self.head(hidden, mask)

    def _contrastive(
        self, out: HeadOutput, hidden: torch.Tensor, mask: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        kind, tau = self.loss_cfg.contrastive, self.loss_cfg.temperature
        if kind == ContrastiveType.lcl:
            return label_wise_contrastive(out.z, y, tau)
        if kind == ContrastiveType.supcon:
            return supcon(out.z, y, tau)
        if kind == ContrastiveType.simcse:
            # Second view: the same states through the head again; dropout (and sampling) differ.
            return simcse(out.z, self.head(hidden, mask).z, tau)
        return out.z.new_zeros(())

    def _terms(
        self, hidden: torch.Tensor, mask: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The head forward and the loss terms: (loss, ce, contrastive, kl, logits (B, C), var (B, D) | None).

        Tensors in, tensors out (no host reads): what ``optim.compile_step`` hands to ``torch.compile``.
        """
        out = self.head(hidden, mask)
        ce = cross_entropy(out.logits, y)
        con = self._contrastive(out, hidden, mask, y)
        kl = gaussian_kl(out.mean, out.log_var) if out.var is not None else ce.new_zeros(())
        # With no contrastive term its weight is 0, so CE keeps full weight instead of (1 - l_lcl).
        lcl_w = self.loss_cfg.lcl_weight if self.loss_cfg.contrastive != ContrastiveType.none else 0.0
        kl_w = self.loss_cfg.kl_weight if out.var is not None else 0.0
        return total_loss(ce, con, kl, lcl_weight=lcl_w, kl_weight=kl_w), ce, con, kl, out.logits, out.var

    def _step_terms(self, hidden: torch.Tensor, mask: torch.Tensor, y: torch.Tensor) -> tuple:
        """:meth:`_terms`, through ``torch.compile`` when ``optim.compile_step`` and until it fails once."""
        if self.optim_cfg.compile_step and self._compiled is not False:
            # imported here: torch._dynamo adds ~1 s to every import of this module that never compiles
            import torch._dynamo.exc

            if self._compiled is None:  # dynamic shapes: every length-sorted batch has its own T
                self._compiled = torch.compile(self._terms, dynamic=True)
            try:
                return self._compiled(hidden, mask, y)
            # The compiler's failures derive from TorchDynamoException (no public base class); the head's
            # own errors are not caught and surface as they would eagerly.
            except torch._dynamo.exc.TorchDynamoException as err:
                reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
                log.warning("torch.compile of the training step failed (%s); training it eagerly.", reason)
                self._compiled = False
        return self._terms(hidden, mask, y)

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        """One optimisation step on a (hidden, mask, labels) batch."""
        hidden, mask, y = batch  # (B, T, H), (B, T), (B,)
        loss, ce, con, kl, logits, var = self._step_terms(hidden, mask, y)
        self._watch_finite(loss, ce, con, kl, hidden)
        bs = y.shape[0]
        sigma = var.sqrt().mean() if var is not None else ce.new_zeros(())
        acc = (logits.argmax(-1) == y).float().mean()
        # (6,) batch-weighted sums, accumulated on the device: seven self.log calls a step became one a log
        # interval (Lightning's per-call bookkeeping), and no value leaves the device until the epoch ends.
        terms = torch.stack([loss, ce, con, kl, acc, sigma]).detach().float() * bs
        self._epoch_sums = terms if self._epoch_sums is None else self._epoch_sums + terms
        self._epoch_rows += bs
        self._has_var = var is not None
        if self._logs_this_step():
            self.log("train/loss_step", loss, on_step=True, on_epoch=False, prog_bar=True, batch_size=bs)
        return loss

    def _logs_this_step(self) -> bool:
        """Whether the loggers write this step: a step value logged on any other step is never read.

        Lightning writes step values every ``log_every_n_steps`` optimiser steps and drops the rest; each
        ``self.log`` call costs its bookkeeping all the same (497 calls took 0.47 s of a Banking77 fit under
        cProfile, 116 calls 0.11 s). No gradient accumulation here, so optimiser steps are batches.
        """
        if self._trainer is None:
            return True
        every = max(1, int(self.trainer.log_every_n_steps))
        return (self.trainer.global_step + 1) % every == 0

    def on_train_epoch_start(self) -> None:
        """Start this epoch's sums of the training terms afresh."""
        self._epoch_sums, self._epoch_rows = None, 0

    def on_train_epoch_end(self) -> None:
        """Log the epoch means of every training term (``train/<term>_epoch``): one host read per epoch."""
        if self._epoch_sums is None or not self._epoch_rows:
            return
        means = self._epoch_sums / self._epoch_rows
        names = TRAIN_TERMS if self._has_var else TRAIN_TERMS[:-1]
        self.log_dict({f"train/{k}_epoch": means[i] for i, k in enumerate(names)}, on_epoch=True)

    def _finite_every(self) -> int:
        """Steps between host reads of the non-finite record: every step on CPU, where a read is free."""
        if self.finite_check_every:
            return self.finite_check_every
        return 1 if self.device.type == "cpu" else 50

    def _watch_finite(
        self, loss: torch.Tensor, ce: torch.Tensor, con: torch.Tensor, kl: torch.Tensor, hidden: torch.Tensor
    ) -> None:
        """Stop training on a NaN/inf loss instead of exporting a head of NaN weights.

        Lightning 2.x has no built-in stop on a non-finite loss (``terminate_on_nan`` was removed), hence this
        check. Reading the flag is a device-to-host sync, which cost +5.5 % of the fit on an H100
        (docs/RESULTS.md section 6), so on an accelerator the first bad step is recorded on the device,
        without a sync, and read every ``_finite_every()`` steps and at the end of each epoch: the error still
        names the exact step and its loss terms; training runs on at most that many steps before it stops.
        """
        if self._finite_every() == 1:
            self._check_finite(loss, ce, con, kl, hidden)
            return
        step = self.trainer.global_step if self._trainer else 0
        new = torch.stack(
            [
                loss.new_ones((), dtype=torch.float32),
                loss.new_full((), float(step), dtype=torch.float32),  # exact up to 2^24 steps
                loss.new_full((), float(self.current_epoch), dtype=torch.float32),
                *(t.detach().float() for t in (ce, con, kl)),
                torch.isfinite(hidden).all().float(),
            ]
        )
        if self._finite_record is None or self._finite_record.device != new.device:
            self._finite_record = torch.zeros_like(new)
        first_bad = (self._finite_record[0] == 0) & ~torch.isfinite(loss)
        self._finite_record = torch.where(first_bad, new, self._finite_record)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Read the device-side non-finite record every few steps and at the epoch's last batch."""
        every = self._finite_every()
        last = self._trainer is not None and batch_idx + 1 >= self.trainer.num_training_batches
        if self._finite_record is None or every == 1 or not ((batch_idx + 1) % every == 0 or last):
            return
        self._read_finite_record()

    def on_train_end(self) -> None:
        """Read the record once more: a run that stops at a step budget mid-epoch reaches no epoch end."""
        if self._finite_record is not None:
            self._read_finite_record()

    def _read_finite_record(self) -> None:
        flag, step, epoch, ce, con, kl, hidden_ok = self._finite_record.tolist()  # the one host sync
        if flag:
            self._raise_non_finite(
                int(step), int(epoch), {"ce": ce, "contrastive": con, "kl": kl}, bool(hidden_ok)
            )

    def _check_finite(
        self, loss: torch.Tensor, ce: torch.Tensor, con: torch.Tensor, kl: torch.Tensor, hidden: torch.Tensor
    ) -> None:
        """The per-step check: one scalar read per step."""
        if bool(torch.isfinite(loss)):
            return
        step = self.trainer.global_step if self._trainer else 0
        terms = {"ce": float(ce.detach()), "contrastive": float(con.detach()), "kl": float(kl.detach())}
        self._raise_non_finite(step, self.current_epoch, terms, bool(torch.isfinite(hidden).all()))

    def _raise_non_finite(self, step: int, epoch: int, values: dict[str, float], hidden_ok: bool) -> None:
        terms = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
        if not hidden_ok:
            cause = (
                "the input token states hold NaN/inf: delete the hidden-state cache entry (cache.dir) "
                "or check the backbone's precision"
            )
        elif not all(bool(torch.isfinite(p).all()) for p in self.head.parameters()):
            cause = f"the head's weights diverged: lower optim.lr (now {self.optim_cfg.lr:g})"
        else:
            cause = (
                f"the loss overflowed: lower optim.lr (now {self.optim_cfg.lr:g}) or raise loss.temperature "
                f"(now {self.loss_cfg.temperature:g})"
            )
        raise NonFiniteLossError(
            f"Training stopped: non-finite loss at step {step} (epoch {epoch}; {terms}); likely cause: "
            f"{cause}. No head was written."
        )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Store every RNG state, so a resumed run draws the same dropout, sampling noise and shuffles."""
        checkpoint[RNG_KEY] = rng_state()
        if self.data_fingerprints is not None:
            checkpoint[DATA_KEY] = dict(self.data_fingerprints)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore the RNG states saved with the checkpoint (older checkpoints without them load as is)."""
        if RNG_KEY in checkpoint:
            set_rng_state(checkpoint[RNG_KEY])

    def validation_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        """Deterministic (mu-based) validation metrics."""
        hidden, mask, y = batch
        logits = self.head(hidden, mask).logits
        self.val_metrics.update(logits, y)
        kept = y != LENT  # (B,) no host read: the copies are weighed 0, not dropped
        ce = cross_entropy_rows(logits, y.clamp(min=0))  # (B,)
        w = kept.to(ce.dtype)
        self.val_ce.update((ce * w).sum())
        self.val_rows.update(w.sum())

    def val_nll(self) -> torch.Tensor:
        """The validation NLL per text so far (NaN where a row's was: a broken epoch is never kept)."""
        return self.val_ce.compute() / self.val_rows.compute()

    def on_validation_epoch_end(self) -> None:
        """Log and reset validation metrics (``val/acc`` selects the best checkpoint)."""
        # compute() already reduced over ranks; sync_dist marks the values as global (no-op on one process).
        scores = self.val_metrics.compute() | {"val/ce": self.val_nll()}
        self.log_dict(scores, prog_bar=True, sync_dist=True)
        self.val_metrics.reset()
        self.val_ce.reset()
        self.val_rows.reset()

    def test_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        """Deterministic (mu-based) test metrics."""
        hidden, mask, y = batch
        logits = self.head(hidden, mask).logits
        self.test_metrics.update(logits, y)
        self.test_confusion.update(logits, y)

    def on_test_epoch_end(self) -> None:
        """Log and reset test metrics; keep the test confusion matrix (reduced over ranks) on the host."""
        self.log_dict(self.test_metrics.compute(), sync_dist=True)
        self.test_metrics.reset()
        self.test_confusion_counts = self.test_confusion.compute().cpu().numpy().astype(np.int64)
        self.test_confusion.reset()

    def configure_optimizers(self) -> dict:
        """AdamW over the head, linear warmup then linear decay to 0, stepped per batch."""
        # fused: one kernel per step instead of a Python loop over parameter tensors (~0.5 s/epoch on CPU).
        opt = torch.optim.AdamW(
            self.head.parameters(), lr=self.optim_cfg.lr, weight_decay=self.optim_cfg.weight_decay, fused=True
        )
        total = int(self.trainer.estimated_stepping_batches)
        warmup = int(round(self.optim_cfg.warmup_ratio * total))
        sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=warmup, num_training_steps=total)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
