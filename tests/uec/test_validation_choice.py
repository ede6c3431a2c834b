"""Member scales and the Laplace space chosen on the task family's validation split (validation_choice.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from scipy.stats import spearmanr

from ucse.config import TaskType
from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.config import EnsembleConfig, load_ensemble_config
from ucse.uec.convolution import convolve
from ucse.uec.ensemble_task import EnsembleTask
from ucse.uec.validation_choice import FixedMember, fit_validation_scales, uec_validation

from .test_evaluate import _run_sts, _write_sts


def _sts_task(n: int = 120, seed: int = 0) -> tuple[EnsembleTask, torch.Tensor, list[float]]:
    """An STS validation split of n pairs whose gold score is the angle between a good member's vectors."""
    g = torch.Generator().manual_seed(seed)
    task = EnsembleTask.__new__(EnsembleTask)  # the real validate(), without files or mteb
    task.type, task.has_validation = TaskType.sts, True
    task.val_a, task.val_b = [f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)]
    theta = torch.rand(n, generator=g, dtype=torch.float64) * math.pi / 2
    task.val_y = (5 * torch.cos(theta)).tolist()
    e1, e2 = torch.zeros(n, 6, dtype=torch.float64), torch.zeros(n, 6, dtype=torch.float64)
    e1[:, 0], e2[:, 1] = 1.0, 1.0
    good = torch.cat([e1, torch.cos(theta)[:, None] * e1 + torch.sin(theta)[:, None] * e2])  # (2n, 6)
    return task, good, task.val_y


def test_validation_scales_move_weight_to_the_member_the_validation_score_trusts():
    task, good, gold = _sts_task()
    g = torch.Generator().manual_seed(1)
    noise = torch.nn.functional.normalize(torch.randn(good.shape, generator=g, dtype=torch.float64), dim=1)
    var = torch.full(good.shape, 0.02, dtype=torch.float64)  # equal traces: UEC alone weighs them 50/50
    gauss = [GaussianEmbeddings(good.float(), var.float()), GaussianEmbeddings(noise.float(), var.float())]
    cfg = EnsembleConfig(beta_grid=[1e-3, 1.0])
    scales, record = fit_validation_scales(gauss, task, cfg, temperature=1.8)
    assert scales == [1.0, 16.0]  # the grid's largest: the noise member's variance up, its weight down
    # Independent references: Spearman of the plain 50/50 average vs the good member alone (scipy).
    half = torch.nn.functional.normalize(good + noise, dim=1)
    n = len(gold)
    ref_before = spearmanr((half[:n] * half[n:]).sum(1).numpy(), gold)[0]
    ref_good = spearmanr((good[:n] * good[n:]).sum(1).numpy(), gold)[0]
    assert record["validation_before"] == pytest.approx(ref_before, abs=0.02)  # probit of the uniform fuse
    assert record["validation_before"] < record["validation_after"] <= ref_good + 1e-9
    assert record["validation_after"] > ref_good - 0.02  # w_noise = 1 / (1 + 16^1.8) ~ 0.007
    # Scales multiply variances: FixedMember scales them, and a scale of 1 leaves the score unchanged.
    assert FixedMember(gauss[1], "n", 4.0).encode(["x"] * 2 * n).var[0, 0] == pytest.approx(0.08)
    with pytest.raises(ValueError, match="holds 240 validation rows, asked for 3"):
        FixedMember(gauss[1], "n").encode(["x"] * 3)
    same, _ = uec_validation(gauss, task, cfg, 1.8, [1.0, 1.0])
    assert same == record["validation_before"]


def test_temperature_zero_scores_the_plain_average():
    """T = 0 (equal weights, the ``equal_weights_fallback`` candidate) scores the members' plain average,
    whatever their traces: the Spearman of the normalised sum's cosines (scipy), beta ~ 0."""
    task, good, gold = _sts_task()
    g = torch.Generator().manual_seed(2)
    noise = torch.nn.functional.normalize(torch.randn(good.shape, generator=g, dtype=torch.float64), dim=1)
    gauss = [
        GaussianEmbeddings(good.float(), torch.full(good.shape, 0.01)),
        GaussianEmbeddings(noise.float(), torch.full(good.shape, 0.5)),  # 50x the trace: T = 1.8 ignores it
    ]
    score, _ = uec_validation(gauss, task, EnsembleConfig(beta=1e-9), temperature=0.0)
    half = torch.nn.functional.normalize(good + noise, dim=1)
    n = len(gold)
    assert score == pytest.approx(spearmanr((half[:n] * half[n:]).sum(1).numpy(), gold)[0], abs=1e-6)
    paper, _ = uec_validation(gauss, task, EnsembleConfig(beta=1e-9), temperature=1.8)
    assert paper > score  # the paper's weights follow the traces to the good member


def test_equal_members_keep_scales_at_one():
    task, good, _ = _sts_task()
    var = torch.full(good.shape, 0.02)
    gauss = [GaussianEmbeddings(good.float(), var), GaussianEmbeddings(good.float(), var)]
    scales, record = fit_validation_scales(gauss, task, EnsembleConfig(beta_grid=[1.0]), temperature=1.8)
    assert scales == [1.0, 1.0]  # every scale gives the same fuse: the tie goes to all-ones
    assert record["validation_after"] == record["validation_before"]


@pytest.mark.slow
def test_space_auto_and_validation_scales_end_to_end(tiny_bert_dir: Path, tmp_path: Path) -> None:
    _write_sts(tmp_path / "data")
    common = f"{{model: '{tiny_bert_dir}', max_length: 64, precision: fp32, batch_size: 16"
    fit = "{threshold: 2.5, batch_size: 8}"
    (tmp_path / "tiny.yaml").write_text(
        "name: tiny\nspace: auto\nmember_scales: validation\nbeta_grid: [0.01, 1.0]\n"
        "equal_weights_fallback: true\n"
        "variants: [uec, member]\nmembers:\n"
        f"  - {{id: mean, backbone: minilm-l6, overrides: {common}}}, fit: {fit}}}\n"
        f"  - {{id: cls, backbone: minilm-l6, overrides: {common}, pooling: cls}}, fit: {fit}}}\n"
    )
    report = _run_sts(tmp_path, "tiny.yaml")
    choice = report["choice"]
    by_space = choice["space_validation"]
    assert set(by_space) == {"scored", "raw"}
    assert choice["space"] == max(by_space, key=by_space.get)
    assert choice["scales"][0] == 1.0 and len(choice["scales"]) == 2
    assert choice["validation_after"] >= choice["validation_before"]
    # equal weights scored beside the paper's T on the same validation split; the better one is used
    equal = choice["equal_weights"]
    assert equal["uec_validation"] == choice["validation_after"]
    assert choice["temperature"] == (0.0 if equal["validation"] > equal["uec_validation"] else 1.8)
    assert report["temperature"] == choice["temperature"]
    signal = report["weight_signal"]  # the per-input diagnostic on the test pairs
    corr = signal["per_input_correlation"]  # undefined (None) for equal weights: they do not vary
    assert (corr is None) if choice["temperature"] == 0 else -1 <= corr <= 1
    assert sum(signal["mean_weights"]) == pytest.approx(1)
    assert 0 < signal["inputs"] <= 40 and 0 <= signal["weight_on_better"] <= 1
    # Independent recomputation of the reported UEC test score from members built in the chosen space.
    from ucse.uec.config import Space
    from ucse.uec.ensemble_members import build_member, fit_pairs
    from ucse.uec.ensemble_task import task_config

    task = task_config("STSBenchmark")
    members = []
    for m, s in zip(load_ensemble_config(str(tmp_path / "tiny.yaml")).members, choice["scales"]):
        pairs = fit_pairs(m.fit, task, tmp_path / "data", task_config)
        member = build_member(m, pairs, torch.device("cpu"), space=Space(choice["space"]))[0]
        member.variance_scale *= s
        members.append(member)
    test = [
        json.loads(x) for x in (tmp_path / "data" / "STSBenchmark" / "test.jsonl").read_text().splitlines()
    ]
    s1, s2 = [r["sentence1"] for r in test], [r["sentence2"] for r in test]
    gauss = [m.encode(s1 + s2) for m in members]
    # Both spaces report moments of one posterior: raw those of the map output y, scored those of y / ||y||.
    spec = load_ensemble_config(str(tmp_path / "tiny.yaml")).members[0]
    pairs = fit_pairs(spec.fit, task, tmp_path / "data", task_config)
    raw, scored = (
        build_member(spec, pairs, torch.device("cpu"), space=sp)[0] for sp in (Space.raw, Space.scored)
    )
    phi = raw.features(s1)
    g_raw, g_scored = raw.encode(s1), scored.encode(s1)
    torch.testing.assert_close(g_raw.mean, raw.laplace.predict_mean(phi))
    torch.testing.assert_close(g_raw.var, raw.laplace.predict_var(phi) * raw.variance_scale)
    torch.testing.assert_close(
        g_scored.mean, torch.nn.functional.normalize(g_raw.mean, dim=1), atol=1e-6, rtol=0
    )
    assert raw.cache_key() != scored.cache_key()
    fused = convolve(gauss, "inverse_trace", choice["temperature"]).fused.normalized()
    beta = report["results"]["uec"]["params"]["beta"]
    mu_s = (fused.mean[:40] * fused.mean[40:]).sum(1)
    var_s = (
        fused.mean[:40] ** 2 * fused.var[40:] + fused.var[:40] * (fused.mean[40:] ** 2 + fused.var[40:])
    ).sum(1)
    ref = spearmanr((mu_s / torch.sqrt(1 + math.pi / 8 * beta * var_s)).numpy(), [r["score"] for r in test])[
        0
    ]
    assert report["results"]["uec"]["scores"]["spearman"] == pytest.approx(ref, abs=1e-6)


@pytest.mark.slow
def test_rows_that_need_no_common_space_score_members_in_their_own(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    from tiny_models import build_tiny_bert

    from ucse.uec.ensemble_members import build_member, fit_pairs
    from ucse.uec.ensemble_task import task_config

    wide = build_tiny_bert(
        tmp_path / "wide", hidden=48
    )  # another width: aligned into the first by Procrustes
    _write_sts(tmp_path / "data", n=80)
    fit, fp32 = "fit: {threshold: 1.0, batch_size: 8}", "precision: fp32"
    (tmp_path / "mixed.yaml").write_text(
        "name: mixed\nbeta: 1.0\nvariants: [uec, member, concat]\nmembers:\n"
        f"  - {{id: narrow, backbone: minilm-l6, overrides: {{model: '{tiny_bert_dir}', {fp32}}}, {fit}}}\n"
        f"  - {{id: wide, backbone: minilm-l6, overrides: {{model: '{wide}', {fp32}}}, {fit}}}\n"
    )
    report = _run_sts(tmp_path, "mixed.yaml")
    assert report["members"][1]["alignment"]["texts"] >= 32  # the wide member was aligned for the UEC row
    task = task_config("STSBenchmark")
    own = []
    for m in load_ensemble_config(str(tmp_path / "mixed.yaml")).members:
        own.append(
            build_member(m, fit_pairs(m.fit, task, tmp_path / "data", task_config), torch.device("cpu"))[0]
        )
    assert own[1].dim == 48
    test = [
        json.loads(x) for x in (tmp_path / "data" / "STSBenchmark" / "test.jsonl").read_text().splitlines()
    ]
    s1, s2 = [r["sentence1"] for r in test], [r["sentence2"] for r in test]
    gold = [r["score"] for r in test]
    cos = []
    for m in own:  # each member's cosine in its own space (the 48-d one not projected to 32)
        a, b = m.encode(s1).mean, m.encode(s2).mean
        cos.append(torch.nn.functional.cosine_similarity(a, b, dim=1))
    rows = report["results"]
    assert rows["member:wide"]["scores"]["spearman"] == pytest.approx(spearmanr(cos[1], gold)[0], abs=1e-3)
    assert rows["concat"]["scores"]["spearman"] == pytest.approx(
        spearmanr((cos[0] + cos[1]) / 2, gold)[0], abs=1e-3
    )
