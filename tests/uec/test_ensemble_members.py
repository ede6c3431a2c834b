"""Member building: held-out groups, cached fits rebuilt when truncated, alignment wiring."""

from __future__ import annotations

import logging

import pytest
import torch
from tiny_models import sample_texts

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.alignment import AlignmentError
from ucse.uec.config import AlignMode, FitConfig, MemberConfig, MemberKind
from ucse.uec.ensemble_members import AlignedMember, FitPairs, align_members, build_member


def test_heldout_split_keeps_groups_whole():
    pairs = [(f"a{i}", f"b{i}") for i in range(10)]
    groups = [0, 0, 1, 2, 2, 3, 4, 5, 5, 6]
    split = FitPairs(pairs, groups, 0.3)
    held = {g for p, g in zip(pairs, groups) if p in split.heldout}
    assert held == {4, 5, 6}  # the last 30 % of the 7 groups, ceil -> 3
    assert len(split.fit) + len(split.heldout) == 10 and split.fit_groups == [0, 0, 1, 2, 2, 3]


def test_truncated_cached_posterior_is_rebuilt(tiny_bert_dir, caplog):
    texts = sample_texts(40, seed=2)
    pairs = FitPairs(list(zip(texts[:20], texts[20:])), list(range(20)), 0.25)
    member = MemberConfig(
        id="tiny",
        kind=MemberKind.laplace,
        backbone="minilm-l6",
        overrides={"model": str(tiny_bert_dir), "max_length": 32, "precision": "fp32"},
        fit=FitConfig(batch_size=5, refine_steps=5),
    )
    first, info = build_member(member, pairs, torch.device("cpu"))
    assert info["variance_scale"] > 0 and first.variance_scale == info["variance_scale"]
    again, _ = build_member(member, pairs, torch.device("cpu"))  # from the cache
    torch.testing.assert_close(again.encode(texts[:3]).var, first.encode(texts[:3]).var)
    from ucse.uec.digest import cache_root

    (folder,) = (cache_root() / "uec" / "laplace").glob("tiny-*")
    data = (folder / "laplace.safetensors").read_bytes()
    (folder / "laplace.safetensors").write_bytes(data[: len(data) // 3])
    with caplog.at_level(logging.WARNING):
        rebuilt, _ = build_member(member, pairs, torch.device("cpu"))
    assert "unusable" in caplog.text and "refitting" in caplog.text
    torch.testing.assert_close(rebuilt.encode(texts[:3]).var, first.encode(texts[:3]).var)
    # fit.json or member.json holding a list: refitted too (an AttributeError / a list record before)
    for name in ("fit.json", "member.json"):
        (folder,) = (cache_root() / "uec" / "laplace").glob("tiny-*")
        (folder / name).write_text("[1]")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            rebuilt, info = build_member(member, pairs, torch.device("cpu"))
        assert "unusable" in caplog.text and isinstance(info, dict)
        torch.testing.assert_close(rebuilt.encode(texts[:3]).var, first.encode(texts[:3]).var)


def test_calibrate_without_held_out_pairs_fails_before_the_fit(tiny_bert_dir):
    texts = sample_texts(40, seed=2)
    member = MemberConfig(
        id="tiny", kind=MemberKind.laplace, backbone="minilm-l6", fit=FitConfig(heldout_fraction=0)
    )
    for groups, fraction in ((list(range(20)), 0.0), ([0] * 20, 0.25)):  # no share held out; one group only
        pairs = FitPairs(list(zip(texts[:20], texts[20:])), groups, fraction)
        with pytest.raises(ValueError, match="member 'tiny': no held-out pairs to fit its variance scale"):
            build_member(member, pairs, torch.device("cpu"))


class _Fixed:
    def __init__(self, name, mean):
        self.member_id, self.mean = name, mean

    @property
    def dim(self):
        return self.mean.shape[1]

    def encode(self, texts):
        rows = self.mean[[int(t) for t in texts]]
        return GaussianEmbeddings(rows, torch.full_like(rows, 1e-3))


def test_align_members_maps_other_widths_and_refuses_none():
    g = torch.Generator().manual_seed(0)
    ref = torch.nn.functional.normalize(torch.randn(30, 4, generator=g), dim=1)
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=g))
    wide = _Fixed("wide", ref @ q[:4])  # the same space, isometrically in 6-d
    texts = [str(i) for i in range(30)]
    out, info = align_members([_Fixed("ref", ref), wide], AlignMode.auto, texts)
    assert isinstance(out[1], AlignedMember) and out[1].dim == 4 and info["wide"]["fit_residual"] < 1e-5
    torch.testing.assert_close(out[1].encode(texts[:5]).mean, ref[:5], rtol=0, atol=1e-5)
    with pytest.raises(AlignmentError, match="set align: auto or procrustes"):
        align_members([_Fixed("ref", ref), wide], AlignMode.none, texts)


def test_same_label_pairs_hold_out_rows_of_every_label_not_whole_labels():
    # held out by group, two labels held one out: every fit pair had one label, every in-batch negative was
    # masked as a known positive, and the Laplace fit's loss and gradient were exactly zero
    import datasets

    texts = [f"text {i}" for i in range(43)]
    labels = [i % 2 for i in range(40)] + [7] * 3  # too few rows to hold any out: fit pairs only
    ds = datasets.Dataset.from_dict({"text": texts, "label": labels})
    split = FitPairs.by_rows(ds, 0.25, seed=0, max_pairs=None)
    label = dict(zip(texts, labels))
    assert {label[a] for a, _ in split.fit} == {0, 1, 7}
    assert {label[a] for a, _ in split.heldout} == {0, 1}
    assert all(label[a] == label[b] for a, b in split.fit + split.heldout)  # same-label pairs
    held_texts = {t for pair in split.heldout for t in pair}
    assert not held_texts & {t for pair in split.fit for t in pair}  # no held-out text in a fit pair
    assert len(held_texts) == 10  # ceil(25 % of 20) rows of each label
    # group ids: one per label, the same in both parts, so same-label partners are excluded as positives
    ids = {0: 0, 1: 1, 7: 2}
    assert [ids[label[a]] for a, _ in split.fit] == split.fit_groups
    assert [ids[label[a]] for a, _ in split.heldout] == split.heldout_groups
    negatives, groups = split.negatives()
    assert [ids[label[t]] for t in negatives] == groups and len(set(negatives)) == len(negatives)
