import pytest
import torch
from torch import nn

from ucse.evaluation.efficiency import batch_size_of, count_parameters, measure_throughput


def test_count_parameters_total_trainable_and_tied() -> None:
    head = nn.Linear(3, 4)  # 16
    frozen = nn.Linear(4, 2)  # 10
    frozen.requires_grad_(False)
    model = nn.Sequential(head, frozen)
    assert count_parameters(model) == 26
    assert count_parameters(model, trainable_only=True) == 16
    emb = nn.Embedding(10, 4)
    out = nn.Linear(4, 10, bias=False)
    out.weight = emb.weight  # tied: counted once
    assert count_parameters(nn.ModuleList([emb, out])) == 40


def test_batch_size_of() -> None:
    assert batch_size_of(torch.zeros(7, 3)) == 7
    assert batch_size_of({"input_ids": torch.zeros(5, 9), "attention_mask": torch.ones(5, 9)}) == 5
    assert batch_size_of(["a", "b", "c"]) == 3


class FakeClock:
    """A clock that only advances when a fake workload 'runs'."""

    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[str] = []

    def __call__(self) -> float:
        return self.now

    def workload(self, name: str, seconds_per_sample: float):
        def run(batch: torch.Tensor) -> None:
            self.log.append(name)
            self.now += seconds_per_sample * batch.shape[0]

        return run


def test_exact_numbers_with_fake_clock_and_interleaving() -> None:
    clock = FakeClock()
    batches = [torch.zeros(4, 2), torch.zeros(6, 2)]
    res = measure_throughput(
        clock.workload("B", 0.002),
        clock.workload("F", 0.003),
        batches,
        warmup=1,
        repeats=3,
        synchronize=lambda: None,
        clock=clock,
    )
    assert res["n_samples"] == 10
    assert res["repeats"] == 3
    assert res["backbone_latency_ms"] == pytest.approx(2.0)
    assert res["full_latency_ms"] == pytest.approx(3.0)
    assert res["backbone_latency_ms_median"] == pytest.approx(2.0)
    assert res["backbone_throughput"] == pytest.approx(500.0)
    assert res["full_throughput"] == pytest.approx(1000 / 3)
    assert res["overhead_ratio"] == pytest.approx(1.5)
    assert res["overhead_ratio_median"] == pytest.approx(1.5)
    assert res["latency_overhead_ms"] == pytest.approx(1.0)
    # Per pass, one call per batch; warmup B F, then repeats alternate B F / F B / B F.
    assert clock.log[0::2] == clock.log[1::2]  # both batches of a pass run the same workload
    assert clock.log[0::2] == ["B", "F", "B", "F", "F", "B", "B", "F"]


def test_best_of_ignores_one_disturbed_repeat() -> None:
    clock = FakeClock()
    calls = {"n": 0}

    def jittery(batch: torch.Tensor) -> None:
        calls["n"] += 1
        clock.now += 0.001 * batch.shape[0] + (1.0 if calls["n"] == 3 else 0.0)

    res = measure_throughput(
        jittery,
        clock.workload("F", 0.002),
        [torch.zeros(10)],
        warmup=1,
        repeats=3,
        synchronize=lambda: None,
        clock=clock,
    )
    assert res["backbone_latency_ms"] == pytest.approx(1.0)
    assert res["backbone_latency_ms_median"] == pytest.approx(1.0)
    assert res["overhead_ratio"] == pytest.approx(2.0)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        measure_throughput(lambda b: b, lambda b: b, [], warmup=0, repeats=1)
    with pytest.raises(ValueError):
        measure_throughput(lambda b: b, lambda b: b, [torch.zeros(1)], warmup=0, repeats=0)
