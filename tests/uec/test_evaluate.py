"""The UEC mteb encoder, local mteb tasks and ``run_ensemble`` end to end on tiny local data (offline)."""

from __future__ import annotations

import json
import math
import random
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from ucse.config import Device
from ucse.core.gaussian import GaussianEmbeddings
from ucse.evaluation import mteb_eval  # local_*_task, evaluate_task
from ucse.evaluation.config import EvalConfig
from ucse.uec.config import load_ensemble_config
from ucse.uec.convolution import convolve
from ucse.uec.ensemble import UecEnsemble
from ucse.uec.evaluate import ndcg_at_10, run_ensemble
from ucse.uec.mteb_encoder import UecMtebEncoder
from ucse.uec.similarity import probit_similarity


class RandomMember:
    """Deterministic pseudo-random Gaussians per text (CRC32-seeded, so distinct texts differ), no model."""

    def __init__(self, member_id: str, dim: int, scale: float) -> None:
        self.member_id, self._dim, self.scale = member_id, dim, scale

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: list[str]) -> GaussianEmbeddings:
        rows = []
        for t in texts:
            g = torch.Generator().manual_seed(zlib.crc32((self.member_id + "|" + t).encode()))
            rows.append(
                (torch.randn(self._dim, generator=g), torch.rand(self._dim, generator=g) * self.scale)
            )
        return GaussianEmbeddings(torch.stack([m for m, _ in rows]), torch.stack([v for _, v in rows]))


def _loader(texts: list[str], batch: int = 3) -> list[dict]:
    return [{"text": texts[i : i + batch]} for i in range(0, len(texts), batch)]


def test_encoder_hooks_return_probit_matrix_and_classification_gets_means():
    members = [RandomMember("a", 6, 0.3), RandomMember("b", 6, 0.9)]
    ens = UecEnsemble(members, temperature=1.5, beta=0.1)
    enc = UecMtebEncoder(members, ens.scorer("uec"))
    texts = [f"q{i}" for i in range(4)] + [f"d{i}" for i in range(7)]
    sts = SimpleNamespace(type="Retrieval")
    packed = enc.encode(_loader(texts), task_metadata=sts, hf_split="test", hf_subset="default")
    assert packed.shape == (11, 6)  # the fused unit mean: what mteb's own cosine metrics see
    fused = convolve([m.encode(texts) for m in members], "inverse_trace", 1.5).fused.normalized()
    np.testing.assert_allclose(packed, fused.mean.numpy(), rtol=1e-5, atol=1e-6)
    q = GaussianEmbeddings(fused.mean[:4], fused.var[:4])
    c = GaussianEmbeddings(fused.mean[4:], fused.var[4:])
    expected = probit_similarity(q, c, beta=0.1)
    torch.testing.assert_close(enc.similarity(packed[:4], packed[4:]), expected, rtol=1e-5, atol=1e-6)
    # The hooks find each row's variance by its bytes, whichever container mteb passes.
    pair = enc.similarity_pairwise(torch.from_numpy(packed[:4]), packed[4:8])
    torch.testing.assert_close(pair, expected[:, :4].diagonal(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="did not return"):
        enc.similarity(packed[:1] + 1.0, packed[4:])
    cls = enc.encode(
        _loader(texts), task_metadata=SimpleNamespace(type="Classification"), hf_split="t", hf_subset="d"
    )
    np.testing.assert_allclose(cls, fused.mean.numpy(), rtol=1e-5, atol=1e-6)


def test_mteb_retrieval_ndcg_uses_probit_scores():
    members = [RandomMember("a", 8, 0.5), RandomMember("b", 8, 2.0)]
    ens = UecEnsemble(members, beta=1.0)
    scorer = ens.scorer("uec")
    corpus = {f"d{i}": {"title": "", "text": f"doc {i}"} for i in range(30)}
    queries = {f"q{i}": f"query {i}" for i in range(12)}
    qrels = {f"q{i}": {f"d{(3 * i) % 30}": 1, f"d{(3 * i + 1) % 30}": 2} for i in range(12)}
    task = mteb_eval.local_retrieval_task("SciFact", corpus, queries, qrels)
    scores = mteb_eval.evaluate_task(UecMtebEncoder(members, scorer), task, batch_size=8)
    gauss = [m.encode(list(queries.values()) + [d["text"] for d in corpus.values()]) for m in members]
    packed = scorer.pack(gauss)
    var = scorer.gaussian(gauss).var
    sim = scorer.similarity(packed[:12], packed[12:], var[:12], var[12:])
    rel = [{int(d[1:]): r for d, r in qrels[q].items()} for q in queries]
    assert scores["ndcg_at_10"] == pytest.approx(ndcg_at_10(sim, rel), abs=1e-4)
    cosine = ens.scorer("uniform")
    cos_scores = mteb_eval.evaluate_task(UecMtebEncoder(members, cosine), task, batch_size=8)
    assert cos_scores["ndcg_at_10"] != pytest.approx(
        scores["ndcg_at_10"], abs=1e-6
    )  # the hook changes rankings


def test_ndcg_at_10_by_hand():
    scores = torch.tensor([[0.9, 0.1, 0.5, 0.3], [0.0, 1.0, 0.2, 0.4]])
    rel = [{2: 1, 3: 2}, {0: 1}]
    # q0 ranks 0,2,3,1: DCG = 1/log2(3) + 2/log2(4); ideal = 2 + 1/log2(3). q1 ranks 1,3,2,0: 1/log2(5).
    q0 = (1 / math.log2(3) + 2 / 2) / (2 + 1 / math.log2(3))
    assert ndcg_at_10(scores, rel) == pytest.approx((q0 + 1 / math.log2(5)) / 2)


def _write_sts(root: Path, n: int = 40) -> None:
    words = "a man woman dog cat is eating riding playing food bread horse guitar book".split()
    folder = root / "STSBenchmark"
    folder.mkdir(parents=True)
    for split, seed in (("train", 0), ("validation", 1), ("test", 2)):
        rng = random.Random(seed)
        with (folder / f"{split}.jsonl").open("w") as fh:
            for _ in range(n):
                a = [rng.choice(words) for _ in range(rng.randint(3, 8))]
                b = a[: rng.randint(1, len(a))] + [rng.choice(words) for _ in range(rng.randint(0, 3))]
                score = round(5 * len(set(a) & set(b)) / len(set(a) | set(b)), 2)
                fh.write(
                    json.dumps({"sentence1": " ".join(a), "sentence2": " ".join(b), "score": score}) + "\n"
                )


def _run_sts(tmp_path: Path, config: str) -> dict:
    """Run the ensemble ``tmp_path/config`` on the tiny STS data in ``tmp_path/data``; its report."""
    cfg = EvalConfig(
        ensemble=str(tmp_path / config),
        task="STSBenchmark",
        data_root=str(tmp_path / "data"),
        out=str(tmp_path / "out"),
        accelerator=Device.cpu,
        batch_size=16,
    )
    run_ensemble(cfg)
    return json.loads((tmp_path / "out" / "ensemble.json").read_text())


def test_run_ensemble_end_to_end_on_tiny_sts(tiny_bert_dir, tmp_path):
    _write_sts(tmp_path / "data")
    common = f"{{model: '{tiny_bert_dir}', max_length: 64, precision: fp32, batch_size: 16"
    fit = "{threshold: 2.5, batch_size: 8}"
    (tmp_path / "tiny.yaml").write_text(
        "name: tiny\nmembers:\n"
        f"  - {{id: mean, backbone: minilm-l6, overrides: {common}}}, fit: {fit}}}\n"
        f"  - {{id: cls, backbone: minilm-l6, overrides: {common}, pooling: cls}}, fit: {fit}}}\n"
    )
    report = _run_sts(tmp_path, "tiny.yaml")
    assert (tmp_path / "out" / "ensemble.md").is_file() and (tmp_path / "out" / "weights.png").is_file()
    # out= given: nothing is written beside it (the per-task weight summary went to its parent folder)
    assert not (tmp_path / "weights_by_task.png").exists()
    rows = report["results"]
    expected_rows = {
        "uec",
        "uec_no_sim",
        "uec_no_weights",
        "uniform",
        "weighted",
        "member:mean",
        "member:cls",
        "member_probit:mean",
        "member_probit:cls",
    }
    assert set(rows) == expected_rows | {"concat", "weighted_concat"}  # borda / rrf are retrieval-only
    # ... and said so, in the report and its table (they were dropped without a word)
    assert {k: v for k, v in report["skipped"].items() if k in ("borda", "rrf")} == {
        "borda": "rank fusion is for retrieval",
        "rrf": "rank fusion is for retrieval",
    }
    md = (tmp_path / "out" / "ensemble.md").read_text()
    assert "Not run here: borda (rank fusion is for retrieval); rrf (rank fusion is for retrieval)" in md
    assert "`cosine_spearman` = cosine of the returned embedding" in md  # the STS footnote, on STS
    # Independent recomputation of the UEC row: probit of the convolution of the cached members' Gaussians.
    from ucse.uec.ensemble_members import build_member, fit_pairs
    from ucse.uec.ensemble_task import task_config

    task = task_config("STSBenchmark")
    members = [
        build_member(m, fit_pairs(m.fit, task, tmp_path / "data", task_config), torch.device("cpu"))[0]
        for m in load_ensemble_config(str(tmp_path / "tiny.yaml")).members
    ]
    assert all(m.variance_scale != 1.0 for m in members)  # fitted on the held-out pairs, saved with them
    assert report["temperature"] == 1.8 and report["temperature_mode"] == "sharpen"  # the paper's MTEB T
    test = [
        json.loads(line)
        for line in (tmp_path / "data" / "STSBenchmark" / "test.jsonl").read_text().splitlines()
    ]
    s1, s2 = [r["sentence1"] for r in test], [r["sentence2"] for r in test]
    fused = convolve([m.encode(s1 + s2) for m in members], "inverse_trace", 1.8).fused.normalized()
    beta = rows["uec"]["params"]["beta"]
    mu_s = (fused.mean[:40] * fused.mean[40:]).sum(1)
    var_s = (
        fused.mean[:40] ** 2 * fused.var[40:] + fused.var[:40] * (fused.mean[40:] ** 2 + fused.var[40:])
    ).sum(1)
    probit = mu_s / torch.sqrt(1 + math.pi / 8 * beta * var_s)
    ref = spearmanr(probit.numpy(), [r["score"] for r in test])[0]
    assert rows["uec"]["scores"]["spearman"] == pytest.approx(ref, abs=1e-6)
    member = rows["member:mean"]["scores"]
    # A plain cosine member: its hook score is the cosine (float32 round-off may swap near-ties).
    assert member["spearman"] == pytest.approx(member["cosine_spearman"], abs=1e-3)
    # mteb's own cosine metric of the UEC row is that of the fused mean. The tiny model's cosines are
    # near-ties (float32 order of mteb's cosine vs ours may swap a few of 40 ranks), hence the tolerance;
    # the exact row-level equality is tested on the encoder itself above.
    ref_cos = spearmanr(mu_s.numpy(), [r["score"] for r in test])[0]
    assert rows["uec"]["scores"]["cosine_spearman"] == pytest.approx(ref_cos, abs=0.02)
    # Concatenation scores the mean of the members' cosines.
    cos = [(m.encode(s1).mean * m.encode(s2).mean).sum(1) for m in members]
    ref_cat = spearmanr(((cos[0] + cos[1]) / 2).numpy(), [r["score"] for r in test])[0]
    assert rows["concat"]["scores"]["spearman"] == pytest.approx(ref_cat, abs=1e-3)
    assert abs(sum(report["members"][k]["mean_weight"] for k in range(2)) - 1) < 1e-5


def test_weight_summary_aggregates_tasks_and_refuses_mixed_members(tmp_path):
    import json as _json

    import matplotlib.image as mpimg

    from ucse.uec.evaluate import write_weight_summary

    assert write_weight_summary(tmp_path) is None
    for task, rows in {"A": {"A sentences": [0.6, 0.4]}, "B": {"B queries": [0.8, 0.2]}}.items():
        (tmp_path / task).mkdir()
        report = {"members": [{"id": "m1"}, {"id": "m2"}], "weights_per_row": rows}
        (tmp_path / task / "ensemble.json").write_text(_json.dumps(report))
    png = write_weight_summary(tmp_path)
    assert png == tmp_path / "weights_by_task.png" and mpimg.imread(png).ndim == 3
    (tmp_path / "C").mkdir()
    bad = {"members": [{"id": "m1"}, {"id": "other"}], "weights_per_row": {"C": [0.5, 0.5]}}
    (tmp_path / "C" / "ensemble.json").write_text(_json.dumps(bad))
    with pytest.raises(ValueError, match="has members"):
        write_weight_summary(tmp_path)
    # A report of another ensemble beside them (a user's out= folder) is left out, not refused.
    bad["ensemble"] = "other"
    (tmp_path / "C" / "ensemble.json").write_text(_json.dumps(bad))
    for task in ("A", "B"):
        report = _json.loads((tmp_path / task / "ensemble.json").read_text())
        (tmp_path / task / "ensemble.json").write_text(_json.dumps({**report, "ensemble": "mine"}))
    assert write_weight_summary(tmp_path, "mine") == png
    # Files of the same name that are no reports (a list; an object without the weights) are left out too:
    # before, an AttributeError / KeyError escaped the "never fail the finished evaluation" guard.
    for task, text in {"D": "[1, 2]", "E": '{"members": [{"id": "m1"}]}', "F": "{"}.items():
        (tmp_path / task).mkdir()
        (tmp_path / task / "ensemble.json").write_text(text)
    assert write_weight_summary(tmp_path, "mine") == png
    assert write_weight_summary(tmp_path / "D") is None


def _write_own_retrieval(folder: Path) -> None:
    """A BEIR-layout folder under a name mteb does not know: 30 docs, 12 train + 8 test queries."""
    words = "a man woman dog cat is eating riding playing food bread horse guitar book".split()
    rng = random.Random(5)
    (folder / "qrels").mkdir(parents=True)
    docs = {f"d{i}": " ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) for i in range(30)}
    with (folder / "corpus.jsonl").open("w") as fh:
        for did, text in docs.items():
            fh.write(json.dumps({"_id": did, "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as fh:
        for q in range(20):
            fh.write(json.dumps({"_id": f"q{q}", "text": " ".join(docs[f"d{q}"].split()[:3])}) + "\n")
    for split, qs in (("train", range(12)), ("test", range(12, 20))):
        rows = ["query-id\tcorpus-id\tscore"] + [f"q{q}\td{q}\t1" for q in qs] + ["q1\td25\t1"]
        (folder / "qrels" / f"{split}.tsv").write_text("\n".join(rows) + "\n")


def test_ensemble_on_own_retrieval_data_end_to_end(tiny_bert_dir, tmp_path):
    """A task mteb does not know runs through mteb's retrieval evaluator on a task built from its data."""
    _write_own_retrieval(tmp_path / "data" / "MyDocs")
    common = f"{{model: '{tiny_bert_dir}', max_length: 64, precision: fp32, batch_size: 16"
    fit = "{batch_size: 4, refine_steps: 10}"
    (tmp_path / "cfgs").mkdir()
    (tmp_path / "cfgs" / "own.yaml").write_text(
        "name: own\nmembers:\n"
        f"  - {{id: mean, backbone: minilm-l6, overrides: {common}}}, fit: {fit}}}\n"
        f"  - {{id: cls, backbone: minilm-l6, overrides: {common}, pooling: cls}}, fit: {fit}}}\n"
        "variants: [uec, concat, member, rrf]\nmerges: [uniform]\nmerge_retrieval: true\n"
    )
    cfg = EvalConfig(
        ensemble=str(tmp_path / "cfgs" / "own.yaml"),
        task="MyDocs",
        data_root=str(tmp_path / "data"),
        out=str(tmp_path / "out"),
        accelerator=Device.cpu,
        batch_size=16,
    )
    out = run_ensemble(cfg)
    report = json.loads((tmp_path / "out" / "ensemble.json").read_text())
    assert report["task"] == "MyDocs" and "ndcg_at_10" in out["ranked_by"]
    assert set(report["results"]) == {"uec", "concat", "member:mean", "member:cls", "rrf", "merge_uniform"}
    for row in report["results"].values():
        assert 0.0 <= row["scores"]["ndcg_at_10"] <= 1.0
    # Held-out groups (the query with two relevant docs stays in one group) gave every member a scale.
    assert all(m["variance_scale"] > 0 and m["heldout_pairs"] >= 1 for m in report["members"])


def test_unknown_task_fails_in_one_line(tmp_path):
    from ucse.data.tasks import DataError

    (tmp_path / "data").mkdir()
    cfg = EvalConfig(ensemble="minilm-pair", task="NoSuchTask", data_root=str(tmp_path / "data"))
    with pytest.raises(DataError, match="neither a configs/task file nor a data folder") as err:
        run_ensemble(cfg)
    assert "\n" not in str(err.value)
    # a typo of a task name: the name, not an own-data folder, is the fix (train says so too)
    with pytest.raises(DataError, match="Did you mean 'STSBenchmark'"):
        run_ensemble(EvalConfig(ensemble="minilm-pair", task="STSBenchmrk", data_root=str(tmp_path / "data")))
    (tmp_path / "data" / "Odd").mkdir()
    (tmp_path / "data" / "Odd" / "test.jsonl").write_text('{"question": "x"}\n')
    with pytest.raises(DataError, match=r"line 1 has keys \['question'\]"):
        run_ensemble(EvalConfig(ensemble="minilm-pair", task="Odd", data_root=str(tmp_path / "data")))
    # a first row that is not an object, or not JSON: one DataError (a TypeError / traceback before)
    for text, match in (
        ("5\n", "first row is not a JSON object"),
        ("{oops\n", "first row is not valid JSON"),
    ):
        (tmp_path / "data" / "Odd" / "test.jsonl").write_text(text)
        with pytest.raises(DataError, match=match):
            run_ensemble(EvalConfig(ensemble="minilm-pair", task="Odd", data_root=str(tmp_path / "data")))


def test_trained_heads_ensemble_reads_run_caches_and_resolves_task_paths(tiny_run_cfg, tmp_path, monkeypatch):
    """Heads of two runs on one task: {task} in head_dir, Procrustes alignment, no backbone pass at all."""
    from ucse.backbone.encoder import FrozenBackbone
    from ucse.training import train

    task = "Banking77Classification"  # the tiny cue task is written under this name
    for seed in (0, 1):
        train(tiny_run_cfg(f"seed={seed}", f"output_dir={tmp_path}/runs/{task}/tiny/textcnn-seed{seed}"))
    (tmp_path / "cfgs").mkdir()
    (tmp_path / "cfgs" / "heads.yaml").write_text(
        "name: heads\nmembers:\n"
        "  - id: s0\n    kind: head\n    head_dir: ../runs/{task}/tiny/textcnn-seed0/head\n"
        "  - id: s1\n    kind: head\n    head_dir: ../runs/{task}/tiny/textcnn-seed1/head\n"
        "    fit: {scale: contrastive}\n"
        "align: procrustes\nvariants: [uec, uniform, concat, member]\nmember_scales: labels\n"
        "equal_weights_fallback: true\n"
    )
    calls = []
    forward = FrozenBackbone._forward
    monkeypatch.setattr(
        FrozenBackbone, "_forward", lambda self, *a, **k: calls.append(1) or forward(self, *a, **k)
    )
    cfg = EvalConfig(
        ensemble=str(tmp_path / "cfgs" / "heads.yaml"),
        task=task,
        data_root=str(tiny_run_cfg().data.root),
        out=str(tmp_path / "out"),
        accelerator=Device.cpu,
        batch_size=16,
    )
    run_ensemble(cfg)
    assert not calls  # every text of the task came from the runs' hidden-state caches
    report = json.loads((tmp_path / "out" / "ensemble.json").read_text())
    assert set(report["results"]) == {"uec", "uniform", "concat", "member:s0", "member:s1"}
    members = {m["id"]: m for m in report["members"]}
    assert all(m["states"] == "run cache" for m in members.values())
    assert members["s0"]["scale_fit"] == "pairs" and members["s1"]["scale_fit"] == "contrastive"
    # The contrastive fit can only raise the held-out retrieval likelihood over the raw variances.
    s1 = members["s1"]
    assert s1["heldout_retrieval_loglik_scaled"] >= s1["heldout_retrieval_loglik_raw"] - 1e-9
    # member_scales: labels: relative scales on the runs' validation split, the first member fixed at 1; the
    # chosen grid point can only lower the fused validation NLL against all-ones.
    assert members["s0"]["label_scale"] == 1.0 and members["s1"]["label_scale"] > 0
    assert members["s1"]["validation_nll_after"] <= members["s1"]["validation_nll_before"] + 1e-12
    assert "alignment" in members["s1"] and "alignment" not in members["s0"]
    # equal_weights_fallback on heads: equal weights scored by the same fused validation NLL as the chosen
    # scales (the scaled members re-encoded give the NLL the scale fit reported), the lower one used
    equal = report["choice"]["equal_weights"]
    assert equal["uec_validation_nll"] == pytest.approx(s1["validation_nll_after"], rel=1e-6)
    lower = equal["validation_nll"] < equal["uec_validation_nll"] - 1e-12
    assert report["choice"]["temperature"] == report["temperature"] == (0.0 if lower else 1.8)
    weights = [m["mean_weight"] for m in members.values()]
    assert sum(weights) == pytest.approx(1.0, abs=1e-5)
    if lower:
        assert weights == pytest.approx([0.5, 0.5])
    for row in report["results"].values():
        assert 0.0 <= row["scores"]["accuracy"] <= 1.0


def test_ucse_ensemble_command_on_own_classification_data(tiny_bert_dir, tmp_path, capsys, recwarn):
    """`ucse ensemble` on a task folder mteb does not know: heads trained on it, states from their caches."""
    from conftest import tiny_overrides
    from toy_tasks import own_rows

    import ucse
    from ucse.cli.evaluate import main

    folder = tmp_path / "data" / "MyTickets"
    folder.mkdir(parents=True)
    rows = own_rows(150)
    for split, part in (("train", rows[:110]), ("test", rows[110:])):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    for seed in (0, 1):
        out = tmp_path / "runs" / "MyTickets" / "tiny" / f"textcnn-seed{seed}"
        ucse.train(str(folder), seed=seed, **tiny_overrides(tiny_bert_dir, out))
    (tmp_path / "heads.yaml").write_text(
        "name: heads\nmembers:\n"
        "  - id: s0\n    kind: head\n    head_dir: runs/{task}/tiny/textcnn-seed0/head\n"
        "  - id: s1\n    kind: head\n    head_dir: runs/{task}/tiny/textcnn-seed1/head\n"
        "align: none\nvariants: [uec, concat, member]\n"
    )
    args = [
        f"ensemble={tmp_path / 'heads.yaml'}",
        f"data_root={tmp_path / 'data'}",
        f"out={tmp_path / 'out'}",
    ]
    assert main([*args, "task=MyTickets", "batch_size=16"], command="ensemble") == 0
    report = json.loads((tmp_path / "out" / "ensemble.json").read_text())
    assert set(report["results"]) == {"uec", "concat", "member:s0", "member:s1"}
    assert [m["states"] for m in report["members"]] == ["run cache", "run cache"]
    # The template task's successor (Banking77Classification.v2) is not the user's: mteb must not warn so.
    assert not [w for w in recwarn if "superseded" in str(w.message)]
    capsys.readouterr()
    assert main([*args, "task=NoSuchTickets"], command="ensemble") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NoSuchTickets" in err[0] and "data folder" in err[0]
