"""``label_review.csv``: the held-out rows ranked by their own label's probability, and what a run writes.

References: a brute-force sort, the csv module reading the file back, and a trained run whose mislabelled
rows were planted (the toy task's labels follow one cue word per label).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
from toy_tasks import own_rows, train_rows

from ucse.cli.main import main
from ucse.config import from_yaml
from ucse.data import load_classification
from ucse.summary import review_note, train_summary
from ucse.uncertainty.label_review import COLUMNS, DOUBT, review_order, write_label_review


def _read(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_the_order_is_the_given_labels_probability_ascending_ties_in_row_order():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=50)
    probs[10], probs[20] = probs[30], probs[30]  # three identical rows: a tie
    y = rng.integers(0, 4, size=50)
    y[10] = y[20] = y[30]
    order, p = review_order(probs, y)
    want = sorted(range(50), key=lambda i: (probs[i, y[i]], i))  # brute force
    assert order.tolist() == want
    np.testing.assert_array_equal(p, [probs[i, y[i]] for i in range(50)])


def test_the_file_reads_back_row_for_row_and_is_never_replaced(tmp_path):
    rng = np.random.default_rng(1)
    names = ["refund", "late, again", 'say "hi"']  # names and texts that need quoting
    texts = [f'text {i}, with "quotes"\nand a second line' for i in range(30)]
    probs = rng.dirichlet(np.ones(3) * 0.5, size=30)
    y = rng.integers(0, 3, size=30)
    path = tmp_path / "label_review.csv"
    record = write_label_review(path, texts, y, probs, names)
    rows = _read(path)
    assert list(rows[0]) == list(COLUMNS) and len(rows) == 30
    order, p = review_order(probs, y)
    for rank, (row, i) in enumerate(zip(rows, order), start=1):
        s = max((c for c in range(3) if c != y[i]), key=lambda c: probs[i, c])  # the best other label
        assert row == {
            "rank": str(rank),
            "text": texts[i],
            "label": names[y[i]],
            "p_label": f"{p[i]:.4f}",
            "suggested": names[s],
            "p_suggested": f"{probs[i, s]:.4f}",
            "cut": "",
        }
    best_other = [max(probs[i, c] for c in range(3) if c != y[i]) for i in range(30)]
    doubted = sum(p[i] < DOUBT and p[i] < best_other[i] for i in range(30))
    assert record == {"rows": 30, "doubted": doubted, "below": DOUBT, "doubted_cut": 0} and doubted > 0
    # texts the backbone read only in part are marked, and counted among the doubted
    cut = np.arange(30) % 2 == 0
    record = write_label_review(tmp_path / "cut.csv", texts, y, probs, names, cut)
    assert [r["cut"] for r in _read(tmp_path / "cut.csv")] == ["yes" if cut[i] else "" for i in order]
    assert record["doubted_cut"] == sum(p[i] < DOUBT and p[i] < best_other[i] and cut[i] for i in range(30))
    with pytest.raises(ValueError, match="30 texts and"):
        write_label_review(tmp_path / "short.csv", texts, y, probs, names, cut[:3])
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        write_label_review(path, texts[:1], y[:1], probs[:1], names)
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="2 texts, 3 labels"):
        write_label_review(tmp_path / "other.csv", texts[:2], y[:3], probs[:3], names)


def test_near_uniform_probabilities_doubt_no_row_whose_own_label_leads(tmp_path):
    # 12 labels x 2 rows: every probability ~1/12 < 10 %, and every row was counted as doubted, its own label
    # "suggested" in place of itself
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(12), 2)
    probs = np.full((24, 12), 1 / 12) + rng.normal(0, 1e-4, (24, 12))
    probs[np.arange(24), y] += 1e-3  # each row's own label leads, barely
    probs /= probs.sum(1, keepdims=True)
    names = [f"l{c}" for c in range(12)]
    record = write_label_review(tmp_path / "r.csv", [f"t{i}" for i in range(24)], y, probs, names)
    assert record["doubted"] == 0
    assert all(r["suggested"] != r["label"] for r in _read(tmp_path / "r.csv"))


def test_the_summary_note_asks_for_a_check_only_when_a_text_is_doubted():
    some = review_note({"doubted": 3, "rows": 48, "below": 0.1})
    assert some == "3 of 48 held-out texts get under 10.00 % for their own label: check those labels first"
    cut = review_note({"doubted": 3, "rows": 48, "below": 0.1, "doubted_cut": 2})
    assert cut == some + "; 2 of them read only up to the token limit (column 'cut')"
    assert review_note({"doubted": 3, "rows": 48, "below": 0.1, "doubted_cut": 0}) == some
    none = review_note({"doubted": 0, "rows": 48, "below": 0.1})
    assert none == "none of 48 held-out texts gets under 10.00 % for its own label"


def test_a_run_ranks_its_planted_mislabelled_rows_first(tmp_path, tiny_bert_dir):
    # head=auto on 240 rows cross-validates every labelled row: the review holds all of them, each scored by
    # the fold models that did not train on it. Six rows keep their cue word but get another label.
    rows = own_rows(240, seed=3)
    names = sorted({r["label"] for r in rows})
    planted = {}
    for i in range(0, 240, 40):
        other = names[(names.index(rows[i]["label"]) + 1) % len(names)]
        planted[rows[i]["text"]] = rows[i]["label"]
        rows[i] = {**rows[i], "label": other}
    result, profile = train_rows(tmp_path, tiny_bert_dir, rows)
    run = tmp_path / "run"
    review = _read(run / "label_review.csv")
    cfg = from_yaml(run / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    held = data.texts("train") + data.texts("validation") + data.texts("test")
    # every labelled row once: the carved test slice too, once scored (data.refit_test)
    assert sorted(r["text"] for r in review) == sorted(held)
    # The planted rows lead the file: each within its top 10 %, their ranks' AUROC >= 0.9 (a random order
    # gives 0.5; the tiny random BERT's fold models reach ~86 % cross-validated accuracy, so a few correctly
    # labelled rows they get wrong sit among them), and their true label is the suggestion.
    ranks = [i for i, r in enumerate(review) if r["text"] in planted]
    assert len(ranks) == len(planted) and max(ranks) < 0.1 * len(review)
    auroc = np.mean([[a < b for b in range(len(review)) if b not in ranks] for a in ranks])
    assert auroc >= 0.9
    assert all(review[i]["suggested"] == planted[review[i]["text"]] for i in ranks)
    info = profile.info["label_review"]
    # the file's probabilities are rounded to 4 digits: a tie there may go either way
    low = [float(r["p_label"]) for r in review if float(r["p_label"]) < DOUBT]
    strict = sum(float(r["p_label"]) < float(r["p_suggested"]) for r in review if float(r["p_label"]) < DOUBT)
    loose = sum(float(r["p_label"]) <= float(r["p_suggested"]) for r in review if float(r["p_label"]) < DOUBT)
    assert info["rows"] == len(held) and strict <= info["doubted"] <= loose <= len(low)
    files = train_summary(run, result.metrics, profile).splitlines()[-2]
    assert files.startswith("files: ") and files.endswith(
        f"label_review.csv ({info['doubted']} of {len(held)} held-out texts get under 10.00 % for their own "
        "label: check those labels first)"
    )
    # ucse calibrate refits the profile and leaves the review alone (a user may be editing it).
    (run / "label_review.csv").write_text("mine\n")
    assert main(["calibrate", f"run={run}", "uncertainty.conformal.alpha=0.2"]) == 0
    assert (run / "label_review.csv").read_text() == "mine\n"


def test_a_single_heads_review_is_its_validation_rows_at_predicts_probabilities(
    tmp_path, tiny_bert_dir, caplog
):
    from transformers import AutoTokenizer

    from ucse.inference.classifier import UcseClassifier

    # 10 tokens: some texts are cut there, and the file says which (a tokenizer's count as the reference)
    with caplog.at_level("WARNING", logger="ucse.backbone.encoder"):
        train_rows(
            tmp_path,
            tiny_bert_dir,
            own_rows(300, seed=11),
            "head=logreg",
            "data.refit=false",
            "backbone.max_length=10",
        )
    # said once: the review's re-read of the texts it marks does not repeat the warning
    assert sum("reach the 10-token limit" in r.getMessage() for r in caplog.records) == 1
    run = tmp_path / "run"
    review = _read(run / "label_review.csv")
    cfg = from_yaml(run / "config.yaml")
    data = load_classification(cfg.task, cfg.data, cfg.seed)
    assert sorted(r["text"] for r in review) == sorted(data.texts("validation"))
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    want = ["yes" if len(tok(r["text"])["input_ids"]) >= 10 else "" for r in review]
    assert [r["cut"] for r in review] == want and 0 < want.count("yes") < len(want)
    clf = UcseClassifier.from_pretrained(run, device="cpu")
    probs = clf.predict_proba([r["text"] for r in review])
    given = [list(clf.classes_).index(r["label"]) for r in review]
    # The review read the fp16 hidden-state cache, predict a fresh fp32 pass: probabilities agree to ~1e-3.
    np.testing.assert_allclose(
        [float(r["p_label"]) for r in review], probs[np.arange(len(review)), given], atol=5e-3
    )
    shutil.rmtree(run)
