import json

import pytest
import torch

from ucse.core.gaussian import GaussianEmbeddings

META = {
    "member": "e5",
    "backbone": "intfloat/e5-small-v2",
    "revision": "abc",
    "pooling": "mean",
    "task": "SciFact",
}


def _emb(n=4, d=3):
    g = torch.Generator().manual_seed(0)
    return GaussianEmbeddings(
        torch.randn(n, d, generator=g, dtype=torch.float64), torch.rand(n, d, generator=g), META
    )


def test_validation_converts_and_names_bad_rows():
    e = _emb()
    assert e.mean.dtype == torch.float32 and e.var.dtype == torch.float32
    bad = torch.rand(4, 3)
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"var has a non-finite value.*row 2"):
        GaussianEmbeddings(torch.zeros(4, 3), bad)
    neg = torch.rand(4, 3)
    neg[3, 0] = -1e-3
    with pytest.raises(ValueError, match=r"var must be >= 0.*row 3"):
        GaussianEmbeddings(torch.zeros(4, 3), neg)
    with pytest.raises(ValueError, match="mean has shape"):
        GaussianEmbeddings(torch.zeros(4, 3), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="2-D"):
        GaussianEmbeddings(torch.zeros(3), torch.zeros(3))


def test_normalized_rescales_variance_consistently():
    e = GaussianEmbeddings(torch.tensor([[3.0, 4.0]]), torch.tensor([[25.0, 50.0]]))
    n = e.normalized()
    torch.testing.assert_close(n.mean, torch.tensor([[0.6, 0.8]]))
    torch.testing.assert_close(n.var, torch.tensor([[1.0, 2.0]]))
    # Same as the moments of z / ||mu|| under sampling.
    g = torch.Generator().manual_seed(1)
    z = e.mean + e.var.sqrt() * torch.randn(200_000, 2, generator=g)
    torch.testing.assert_close((z / 5.0).var(0, keepdim=True), n.var, rtol=0.02, atol=0)
    with pytest.raises(ValueError, match="row 0 has a zero mean"):
        GaussianEmbeddings(torch.zeros(1, 2), torch.zeros(1, 2)).normalized()


def test_save_load_roundtrip_and_atomic_replace(tmp_path):
    e = _emb()
    out = e.save(tmp_path / "member")
    assert sorted(p.name for p in out.iterdir()) == ["embeddings.safetensors", "meta.json"]
    back = GaussianEmbeddings.load(out)
    assert torch.equal(back.mean, e.mean) and torch.equal(back.var, e.var)
    assert back.meta["count"] == 4 and back.meta["dim"] == 3 and back.meta["backbone"] == META["backbone"]
    _emb(n=2).save(out)  # replacing an existing export leaves no temp folders behind
    assert GaussianEmbeddings.load(out).n == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["member"]


def test_load_reports_file_and_field(tmp_path):
    out = _emb().save(tmp_path / "m")
    meta = json.loads((out / "meta.json").read_text())
    meta["count"] = 7
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"meta.json: field 'count' = 7"):
        GaussianEmbeddings.load(out)
    # not a count: int() failed naming neither file nor field, or took 4.9 as 4 and true as 1
    for value in ("abc", 4.9, None, True):
        (out / "meta.json").write_text(json.dumps({**meta, "count": value}))
        with pytest.raises(ValueError, match=r"meta.json: field 'count' = "):
            GaussianEmbeddings.load(out)
    (out / "meta.json").write_text(json.dumps({**meta, "count": 4}))
    assert GaussianEmbeddings.load(out).n == 4
    with pytest.raises(TypeError, match=r"keys must be strings, got \[1\]"):  # save() failed on sorting them
        GaussianEmbeddings(torch.zeros(2, 3), torch.ones(2, 3), {1: "a"})
    (out / "embeddings.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(ValueError, match=r"embeddings.safetensors is not a readable safetensors"):
        GaussianEmbeddings.load(out)
    from safetensors.torch import save_file

    save_file({"mean": torch.zeros(2, 3), "var": -torch.ones(2, 3)}, str(out / "embeddings.safetensors"))
    (out / "meta.json").write_text("{}")
    with pytest.raises(ValueError, match=r"var \(in .*embeddings.safetensors\) must be >= 0.*row 0"):
        GaussianEmbeddings.load(out)
    save_file(
        {"mean": torch.zeros(2, 3, dtype=torch.float16), "var": torch.ones(2, 3)},
        str(out / "embeddings.safetensors"),
    )
    with pytest.raises(ValueError, match="'mean' has dtype torch.float16"):
        GaussianEmbeddings.load(out)
    with pytest.raises(FileNotFoundError, match="is missing"):
        GaussianEmbeddings.load(tmp_path / "nowhere")
