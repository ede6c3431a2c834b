import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import make_tiny_bert_cfg, sample_texts

from ucse.backbone import (
    CachedStates,
    CacheError,
    FrozenBackbone,
    HiddenStateCache,
    OnTheFlyStates,
    SubsetStates,
    TokenStates,
    right_pad,
)
from ucse.config import CacheDtype

TEXTS = sample_texts(11, seed=5, min_words=1, max_words=15)
FP16_TOL = {"atol": 3e-3, "rtol": 2e-3}  # fp16 keeps 11 significant bits


def _visible_entries(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if not p.name.startswith(".tmp-")]


def test_second_call_runs_no_forward_and_matches_uncached(tiny_bert_dir, tmp_path):
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    cache = HiddenStateCache(tmp_path)
    first = cache.get_or_build(fb, TEXTS, "Toy", "train")
    calls = fb.forward_calls
    assert calls == 3 and cache.builds == 1  # ceil(11 / 4) batches, once
    again = HiddenStateCache(tmp_path).get_or_build(fb, TEXTS, "Toy", "train")  # a fresh process-like object
    assert fb.forward_calls == calls
    assert again.path == first.path
    reference = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir)).token_states(TEXTS)
    assert again.lengths.tolist() == [t.shape[0] for t in reference]
    for i, ref in enumerate(reference):
        torch.testing.assert_close(again.states(i), ref, **FP16_TOL)
    hidden, mask = again.batch([7, 0, 3])
    assert hidden.dtype == torch.float32 and mask.dtype == torch.long
    assert hidden.shape == (3, max(reference[i].shape[0] for i in (7, 0, 3)), 32)
    for b, i in enumerate((7, 0, 3)):
        n = reference[i].shape[0]
        assert mask[b].tolist() == [1] * n + [0] * (mask.shape[1] - n)  # right-padded
        torch.testing.assert_close(hidden[b, :n], reference[i], **FP16_TOL)
        assert (hidden[b, n:] == 0).all()
    assert isinstance(again, TokenStates)


def test_a_build_tokenises_the_texts_once(tiny_bert_dir, tmp_path, monkeypatch):
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    calls = []
    encode = fb._encode  # noqa: SLF001 - counting what the build asks of the tokenizer
    monkeypatch.setattr(fb, "_encode", lambda texts: calls.append(len(texts)) or encode(texts))
    entry = HiddenStateCache(tmp_path).get_or_build(fb, TEXTS, "Toy", "train")
    assert calls == [len(TEXTS)]  # the file's sizes and the pass read one tokenisation
    reference = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir)).token_states(TEXTS)
    for i, ref in enumerate(reference):
        torch.testing.assert_close(entry.states(i), ref, **FP16_TOL)


def test_on_disk_layout_and_no_temp_left(tiny_bert_backbone, tmp_path):
    cache = HiddenStateCache(tmp_path, CacheDtype.fp16)
    entry = cache.get_or_build(tiny_bert_backbone, TEXTS, "Toy", "test")
    assert [p.name for p in tmp_path.iterdir()] == [entry.path.name]  # no .tmp-* folder
    assert entry.path.name == cache.key(tiny_bert_backbone, TEXTS, "Toy", "test")
    states = np.load(entry.path / "states.npy", mmap_mode="r")
    offsets = np.load(entry.path / "offsets.npy")
    meta = json.loads((entry.path / "meta.json").read_text())
    lengths = tiny_bert_backbone.token_lengths(TEXTS)
    assert states.dtype == np.float16 and states.shape == (lengths.sum(), 32)
    assert offsets.tolist() == [0] + np.cumsum(lengths).tolist()
    assert meta["n"] == len(TEXTS) and meta["hidden_size"] == 32 and meta["dtype"] == "fp16"
    assert meta["parts"]["task"] == "Toy" and meta["parts"]["split"] == "test"
    assert cache.size_bytes() == sum(p.stat().st_size for p in entry.path.iterdir())


def test_bf16_storage(tiny_bert_backbone, tmp_path):
    entry = HiddenStateCache(tmp_path, "bf16").get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    assert np.load(entry.path / "states.npy", mmap_mode="r").dtype == np.uint16
    reference = tiny_bert_backbone.token_states(TEXTS)
    for i, ref in enumerate(reference):
        got = entry.states(i)
        torch.testing.assert_close(got, ref.to(torch.bfloat16).float())  # exactly bf16 rounding
        assert not torch.equal(got, ref)


def test_changed_key_parts_make_new_entries(tiny_bert_dir, tiny_qwen3_backbone, tmp_path):
    cache = HiddenStateCache(tmp_path)
    base = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    variants = [
        (base, TEXTS, "Toy", "train"),
        (base, TEXTS, "Toy", "test"),
        (base, TEXTS, "Other", "train"),
        (base, TEXTS[:-1] + ["something else"], "Toy", "train"),
        (base.with_instruction("classify"), TEXTS, "Toy", "train"),
        (FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, prompt="query: {text}")), TEXTS, "Toy", "train"),
        (FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir, max_length=6)), TEXTS, "Toy", "train"),
        (tiny_qwen3_backbone, TEXTS, "Toy", "train"),
    ]
    keys = [cache.key(*v) for v in variants]
    assert len(set(keys)) == len(keys)
    assert HiddenStateCache(tmp_path, "bf16").key(*variants[0]) != keys[0]
    for v in variants:
        cache.get_or_build(*v)
    assert cache.builds == len(variants)
    assert len(_visible_entries(tmp_path)) == len(variants)
    cache.get_or_build(*variants[0])
    assert cache.builds == len(variants)
    # a shorter max_length really changes what is stored
    truncated = cache.get_or_build(*variants[6])
    assert truncated.lengths.max() == 6


@pytest.mark.parametrize(
    "damage",
    # checksums_text, n_negative, n_infinite: an AttributeError / IndexError / OverflowError that crashed the
    # run before
    [
        "meta_garbage",
        "offsets_wrong",
        "states_truncated",
        "meta_other_parts",
        "checksums_text",
        "n_negative",
        "n_infinite",
    ],
)
def test_corrupt_entry_is_detected_and_rebuilt(tiny_bert_backbone, tmp_path, damage):
    cache = HiddenStateCache(tmp_path)
    entry = cache.get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    folder = entry.path
    del entry  # release the memory map before damaging the files
    if damage == "meta_garbage":
        (folder / "meta.json").write_text("{not json")
    elif damage == "offsets_wrong":
        np.save(folder / "offsets.npy", np.arange(len(TEXTS) + 1))
    elif damage == "states_truncated":
        data = (folder / "states.npy").read_bytes()
        (folder / "states.npy").write_bytes(data[: len(data) // 2])
    elif damage == "checksums_text":
        meta = json.loads((folder / "meta.json").read_text())
        (folder / "meta.json").write_text(json.dumps({**meta, "checksums": "xxh3_128:0"}))
    elif damage == "n_negative":
        meta = json.loads((folder / "meta.json").read_text())
        (folder / "meta.json").write_text(json.dumps({**meta, "n": -1}))
        np.save(folder / "offsets.npy", np.zeros(0, dtype=np.int64))
    elif damage == "n_infinite":  # Python's json writes and reads Infinity
        meta = json.loads((folder / "meta.json").read_text())
        (folder / "meta.json").write_text(json.dumps({**meta, "n": float("inf")}))
    else:
        meta = json.loads((folder / "meta.json").read_text())
        meta["parts"]["prompt"] = "other {text}"
        (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CacheError, match=str(folder.name)):
        CachedStates(folder, expected_parts=cache.key_parts(tiny_bert_backbone, TEXTS, "Toy", "train"))
    calls = tiny_bert_backbone.forward_calls
    rebuilt = cache.get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    assert cache.builds == 2 and tiny_bert_backbone.forward_calls > calls
    assert rebuilt.path == folder
    torch.testing.assert_close(rebuilt.states(0), tiny_bert_backbone.token_states(TEXTS[:1])[0], **FP16_TOL)
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_a_bad_entry_another_process_replaced_or_moved_is_left_alone(tiny_bert_backbone, tmp_path):
    # Two processes find one bad entry. The first moves it away and may publish a rebuilt one before the
    # second discards: the second's rename failed ("Cannot use the hidden-state cache folder") or deleted
    # the fresh entry.
    from ucse.backbone.cache_folder import discard

    cache = HiddenStateCache(tmp_path)
    folder = cache.get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train").path
    key = folder.name
    seen_bad = folder.stat().st_ino
    moved = tmp_path / "elsewhere"
    folder.rename(moved)
    discard(tmp_path, folder, key, seen_bad)  # already gone: nothing to do, no error
    shutil.copytree(moved, folder)  # "rebuilt" by the other process: another folder (inode) at that name
    discard(tmp_path, folder, key, seen_bad)
    assert len(CachedStates(folder)) == len(TEXTS)  # the other process's entry, still there and whole
    discard(tmp_path, folder, key, folder.stat().st_ino)  # the one found bad: moved away and deleted
    assert not folder.exists() and not list(tmp_path.glob(".tmp-*"))


def test_failed_build_leaves_nothing_and_stale_temp_is_cleaned(tiny_bert_dir, tmp_path):
    fb = FrozenBackbone(make_tiny_bert_cfg(tiny_bert_dir))
    cache = HiddenStateCache(tmp_path)
    key = cache.key(fb, TEXTS, "Toy", "train")
    stale = tmp_path / f".tmp-{key}-999999999-deadbeef"  # a crashed builder's half-written folder
    stale.mkdir()
    (stale / "states.npy").write_bytes(b"partial")

    original = fb.iter_states

    def crash_after_one_batch(texts, batch_size=None, tokenized=None):
        for n, item in enumerate(original(texts, batch_size, tokenized)):
            if n == 1:
                raise RuntimeError("simulated crash")
            yield item

    fb.iter_states = crash_after_one_batch
    with pytest.raises(RuntimeError, match="simulated crash"):
        cache.get_or_build(fb, TEXTS, "Toy", "train")
    assert list(tmp_path.iterdir()) == []  # neither the stale nor the failed temp folder, nor an entry
    fb.iter_states = original
    entry = cache.get_or_build(fb, TEXTS, "Toy", "train")
    assert [p.name for p in tmp_path.iterdir()] == [key] and len(entry) == len(TEXTS)


def test_on_the_fly_equals_cached(tiny_qwen3_backbone, tmp_path):
    cached = HiddenStateCache(tmp_path).get_or_build(tiny_qwen3_backbone, TEXTS, "Toy", "train")
    fly = OnTheFlyStates(tiny_qwen3_backbone, TEXTS)
    assert isinstance(fly, TokenStates)
    assert len(fly) == len(cached) and fly.hidden_size == cached.hidden_size
    assert fly.lengths.tolist() == cached.lengths.tolist()
    calls = tiny_qwen3_backbone.forward_calls
    for indices in ([0, 1, 2], [10, 4], [5]):
        h_fly, m_fly = fly.batch(indices)
        h_cached, m_cached = cached.batch(indices)
        assert torch.equal(m_fly, m_cached)
        torch.testing.assert_close(h_fly, h_cached, **FP16_TOL)
    assert tiny_qwen3_backbone.forward_calls > calls  # on the fly really ran the model


def test_default_root_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("UCSE_CACHE_DIR", str(tmp_path / "env"))
    assert HiddenStateCache().root == tmp_path / "env"


def test_subset_states_is_a_view_in_order(tiny_bert_backbone, tmp_path):
    entry = HiddenStateCache(tmp_path).get_or_build(tiny_bert_backbone, TEXTS, "Toy", "pool")
    view = SubsetStates(entry, [4, 0, 2])
    assert len(view) == 3 and list(view.lengths) == [entry.lengths[4], entry.lengths[0], entry.lengths[2]]
    h_view, m_view = view.batch([2, 0])
    h_base, m_base = entry.batch([2, 4])
    assert torch.equal(h_view, h_base) and torch.equal(m_view, m_base)
    with pytest.raises(IndexError, match="out of range"):
        SubsetStates(entry, [len(TEXTS)])


def test_bad_indices(tiny_bert_backbone, tmp_path):
    entry = HiddenStateCache(tmp_path).get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    with pytest.raises(IndexError, match="out of range"):
        entry.batch([0, len(TEXTS)])
    with pytest.raises(IndexError):
        entry.batch([])


def test_copy_reopens_the_memory_map(tiny_bert_backbone, tmp_path):
    entry = HiddenStateCache(tmp_path).get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    clone = copy.deepcopy(entry)  # goes through __reduce__, as DataLoader workers do
    assert clone.path == entry.path and clone._states is not entry._states
    assert isinstance(clone._states, np.memmap)
    assert torch.equal(clone.batch([1, 2])[0], entry.batch([1, 2])[0])


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_gathered_batches_equal_row_by_row_assembly(tiny_qwen3_backbone, tmp_path, dtype):
    """The vectorised memory-map gather and the device-resident copy serve exactly the stored rows."""
    from ucse.backbone.cache import DeviceStates

    entry = HiddenStateCache(tmp_path, dtype).get_or_build(tiny_qwen3_backbone, TEXTS, "Toy", "train")
    on_device = entry.to_device("cpu")
    assert isinstance(on_device, DeviceStates) and isinstance(on_device, TokenStates)
    assert on_device.lengths.tolist() == entry.lengths.tolist() and len(on_device) == len(entry)
    for idx in ([7, 0, 3], [10], list(range(11))[::-1]):
        ref_hidden, ref_mask = right_pad([entry.states(i) for i in idx], entry.hidden_size)
        for got_hidden, got_mask in (entry.batch(idx), on_device.batch(idx)):
            assert torch.equal(got_mask, ref_mask)
            assert torch.equal(got_hidden, ref_hidden)


def test_nan_in_a_same_size_states_file_is_caught_by_the_checksum_and_rebuilt(
    tiny_bert_backbone, tmp_path, caplog
):
    cache = HiddenStateCache(tmp_path)
    entry = cache.get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    folder, size = entry.path, (entry.path / "states.npy").stat().st_size
    del entry
    states = np.load(folder / "states.npy", mmap_mode="r+")
    states[3, :5] = np.nan  # same shape, dtype and size: only the checksum can tell
    states.flush()
    del states
    assert (folder / "states.npy").stat().st_size == size
    with pytest.raises(CacheError, match=r"states\.npy checksum .*Delete that folder"):
        CachedStates(folder)
    with caplog.at_level("WARNING"):
        rebuilt = cache.get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    assert "Rebuilding corrupt cache entry" in caplog.text and cache.builds == 2
    hidden, _ = rebuilt.batch(list(range(len(TEXTS))))
    assert torch.isfinite(hidden).all()
    meta = json.loads((folder / "meta.json").read_text())
    assert set(meta["checksums"]) == {"states.npy", "offsets.npy"}


def test_cache_dir_that_is_a_file_fails_with_one_line(tmp_path, monkeypatch):
    file = tmp_path / "not-a-folder"
    file.write_text("x")
    monkeypatch.setenv("UCSE_CACHE_DIR", str(file))
    with pytest.raises(CacheError, match="from UCSE_CACHE_DIR.* is a file, not a folder") as err:
        HiddenStateCache()
    assert "\n" not in str(err.value)
    with pytest.raises(CacheError, match="from cache.dir"):
        HiddenStateCache(file)


class ThreadDist:
    """``Dist`` for ranks that are threads of one process (an independent stand-in for torch.distributed)."""

    def __init__(self, rank, world, barrier, board):
        self.global_rank, self.world_size = rank, world
        self._barrier, self._board = barrier, board

    def barrier(self, name=None):
        self._barrier.wait(timeout=60)

    def broadcast(self, obj, src=0):
        if self.global_rank == src:
            self._board["obj"] = obj
        self._barrier.wait(timeout=60)
        out = self._board["obj"]
        self._barrier.wait(timeout=60)
        return out


@pytest.mark.parametrize("world", [2, 3])
def test_sharded_build_equals_the_single_process_entry(tiny_qwen3_dir, tmp_path, world):
    import threading

    from tiny_models import make_tiny_qwen3_cfg

    single = HiddenStateCache(tmp_path / "one").get_or_build(
        FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir)), TEXTS, "Toy", "pool"
    )
    barrier, board, out, errors = threading.Barrier(world), {}, {}, []
    backbones = [FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir)) for _ in range(world)]

    def rank_main(rank):
        try:
            cache = HiddenStateCache(tmp_path / "sharded")
            out[rank] = cache.get_or_build(
                backbones[rank], TEXTS, "Toy", "pool", dist=ThreadDist(rank, world, barrier, board)
            )
        except Exception as err:  # surfaced below
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # Each rank encoded only its slice rank::world, in one shard.
    assert [b.forward_calls for b in backbones] == [
        -(-len(TEXTS[r::world]) // 4) for r in range(world)
    ]  # tiny config: 4 texts per forward
    assert len({e.path for e in out.values()}) == 1 and out[0].path.name == single.path.name
    assert [p.name for p in (tmp_path / "sharded").iterdir()] == [single.path.name]  # shards removed
    assert np.array_equal(out[0].offsets, single.offsets)
    full = list(range(len(TEXTS)))
    h_sharded, m_sharded = out[1].batch(full)
    h_single, m_single = single.batch(full)
    assert torch.equal(m_sharded, m_single)
    torch.testing.assert_close(h_sharded, h_single, **FP16_TOL)
    # A second sharded call is a hit on every rank: no forward.
    hits = []
    barrier2, board2 = threading.Barrier(world), {}

    def again(rank):
        c = HiddenStateCache(tmp_path / "sharded")
        c.get_or_build(backbones[rank], TEXTS, "Toy", "pool", dist=ThreadDist(rank, world, barrier2, board2))
        hits.append(c.builds)

    threads = [threading.Thread(target=again, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert hits == [0] * world


def test_progress_is_silent_for_a_short_pass_and_logs_rate_and_eta_for_a_long_one(
    tiny_bert_backbone, tmp_path, caplog, monkeypatch
):
    from ucse.backbone import progress

    with caplog.at_level("INFO", logger="ucse.backbone.progress"):
        HiddenStateCache(tmp_path / "a").get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    assert caplog.text == ""  # not a terminal and shorter than LOG_EVERY_S: nothing
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)  # every batch counts as "long"
    with caplog.at_level("INFO", logger="ucse.backbone.progress"):
        HiddenStateCache(tmp_path / "b").get_or_build(tiny_bert_backbone, TEXTS, "Toy", "train")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3  # one per batch of 4 texts
    assert lines[-1].startswith(f"backbone pass (Toy, {len(TEXTS)} texts): {len(TEXTS)}/{len(TEXTS)} texts")
    assert "texts/s, ETA 0m00s" in lines[-1]
    caplog.clear()
    with caplog.at_level("INFO", logger="ucse.backbone.progress"):
        HiddenStateCache(tmp_path / "c", progress=False).get_or_build(tiny_bert_backbone, TEXTS, "Toy", "t")
    assert caplog.text == ""


def test_skip_prompt_prefix_drops_the_rows_every_text_shares_in_a_causal_decoder(tiny_qwen3_dir, tmp_path):
    from tiny_models import make_tiny_qwen3_cfg

    prompt = "a the man {text}"  # three in-vocabulary words before the text
    full = FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir, prompt=prompt))
    skip = FrozenBackbone(make_tiny_qwen3_cfg(tiny_qwen3_dir, prompt=prompt, skip_prompt_prefix=True))
    rows_full, rows_skip = full.token_states(TEXTS), skip.token_states(TEXTS)
    # Causal attention: the three prefix states are the same for every text (so they carry nothing)...
    for r in rows_full[1:]:
        torch.testing.assert_close(r[:3], rows_full[0][:3], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(rows_full[0][3], rows_full[1][3])
    # ...and skipping them leaves exactly the text's own rows, computed with the prompt in context.
    assert skip.token_lengths(TEXTS).tolist() == (full.token_lengths(TEXTS) - 3).tolist()
    for a, b in zip(rows_full, rows_skip):
        torch.testing.assert_close(b, a[3:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        skip.pooled(TEXTS), full.pooled(TEXTS), atol=1e-5, rtol=1e-5
    )  # last token kept
    cache = HiddenStateCache(tmp_path)
    entry = cache.get_or_build(skip, TEXTS, "Toy", "pool")
    assert entry.lengths.tolist() == skip.token_lengths(TEXTS).tolist()
    assert cache.key(skip, TEXTS, "Toy", "pool") != cache.key(full, TEXTS, "Toy", "pool")
    assert "skip_prompt_prefix" not in cache.key_parts(full, TEXTS, "Toy", "pool")  # old keys unchanged
