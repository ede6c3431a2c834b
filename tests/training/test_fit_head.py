"""``fit_head`` (head=auto's in-memory training): a step budget that ends mid-epoch.

The budget is set in optimiser steps; Lightning validates, and the deferred non-finite check reads its
record, only at epoch ends, so the steps after the last whole epoch escaped both.
"""

from __future__ import annotations

import pytest
import torch

from ucse.backbone.encoder import FrozenBackbone
from ucse.data import load_classification
from ucse.training import fit_head as fit_head_mod
from ucse.training.fit_head import fit_head
from ucse.training.module import UcseModule
from ucse.training.run import build_states

BUDGET = 10  # the tiny task's 108 training rows in batches of 16: 7 steps an epoch, so 3 steps past epoch 1


@pytest.fixture
def rows(tiny_run_cfg, monkeypatch):
    cfg = tiny_run_cfg("head=textcnn", "head_precision=fp32")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    states, _ = build_states(cfg, FrozenBackbone(cfg.backbone, torch.device("cpu")), data)
    monkeypatch.setattr(fit_head_mod, "step_budget", lambda n, bs: BUDGET)
    train = (states["train"], data.labels("train"))
    return cfg, train, (states["validation"], data.labels("validation")), data.num_classes


def test_the_last_steps_of_a_budget_that_ends_mid_epoch_are_validated(rows, monkeypatch):
    cfg, train, val, c = rows
    seen = []  # (global step, val NLL, head state) at every validation
    real_end = fit_head_mod.KeepBest.on_validation_end

    def record(self, trainer, module):
        state = {k: v.detach().clone() for k, v in module.head.state_dict().items()}
        seen.append((trainer.global_step, float(trainer.callback_metrics["val/ce"]), state))
        real_end(self, trainer, module)

    monkeypatch.setattr(fit_head_mod.KeepBest, "on_validation_end", record)
    fit = fit_head(cfg, cfg.head, train, val, c, torch.device("cpu"))
    assert fit.steps == BUDGET and len(train[1]) // 16 + 1 < BUDGET  # the premise: it ends mid-epoch
    assert [s for s, _, _ in seen] == [7, BUDGET]  # the epoch end, then the budget's end
    best = min(range(len(seen)), key=lambda i: seen[i][1])
    assert fit.best_step == seen[best][0] and fit.best_val_nll == seen[best][1]
    shipped = fit.head.state_dict()
    assert all(torch.equal(shipped[k], v.float()) for k, v in seen[best][2].items())


def test_a_non_finite_step_after_the_last_epoch_end_is_reported(rows, monkeypatch):
    # On an accelerator the record is read every 50 steps and at epoch ends; the last partial epoch reached
    # neither, and without validation rows (cross-validation folds, the refit) its NaN weights were returned.
    cfg, train, _, c = rows
    monkeypatch.setattr(UcseModule, "finite_check_every", 50)
    real = UcseModule._terms

    def nan_at_step_8(self, hidden, mask, y):
        out = list(real(self, hidden, mask, y))
        if self.trainer.global_step == 8:
            out[0] = out[0] * float("nan")
        return tuple(out)

    monkeypatch.setattr(UcseModule, "_terms", nan_at_step_8)
    with pytest.raises(ValueError, match=r"non-finite loss at step 8 \(epoch 1"):
        fit_head(cfg, cfg.head, train, None, c, torch.device("cpu"))
