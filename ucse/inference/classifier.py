"""A trained run as a scikit-learn-style text classifier that says how sure it is.

    from ucse import UcseClassifier
    clf = UcseClassifier.from_pretrained("runs/my-run")           # a run folder or its head/ folder
    clf.classes_, clf.predict(["where is my card?"])              # labels in column order; ["delivery"]
    clf.predict_proba(texts)                                      # (N, C) calibrated probabilities
    clf.predict_with_uncertainty(texts)                           # rows: label, confidence, uncertainty, ...

The backbone is loaded once; texts go through it in length-sorted batches straight into the head
(``UcseEncoder.run_texts``), bf16 where the backbone runs bf16. The uncertainty profile saved with the head
(``head/calibration.json``, fitted by ``ucse train``) turns the head's outputs into calibrated
probabilities, the default uncertainty score, the abstention decision and conformal sets; a head without
one falls back to the plain softmax, MSP, no abstention and no sets.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted
from tqdm.auto import tqdm

from ucse.backbone.device import resolve_device
from ucse.config import Device, Precision
from ucse.config.run_layout import RunFolder, read_run_metrics, resolve_head_dir, run_of_head
from ucse.core.encoder import EncodedBatch, UcseEncoder
from ucse.heads.io import copy_head, refuse_overlap
from ucse.heads.meta import label_values
from ucse.inference.head_files import private_folder, read_head_files, write_head_files
from ucse.inference.rows import uncertainty_rows
from ucse.inference.texts import as_labels, as_texts
from ucse.uncertainty.abstain_rule import warn_if_uncertifiable
from ucse.uncertainty.inert_parts import warn_if_inert, warn_if_unfitted
from ucse.uncertainty.profile import UncertaintyOutput, load_uncertainty_profile

PROGRESS_MIN = 1000
"""Inputs at least this long show a progress bar (when ``progress`` is on)."""
CHUNK = 1024
"""Texts per progress step; chunks are cut from the length-sorted order, so batching is unchanged."""
_UNPICKLED = ("encoder_", "profile_", "_cleanup")
"""Attributes rebuilt on unpickling rather than pickled (the backbone's weights, a finalizer)."""


class UcseClassifier(ClassifierMixin, BaseEstimator):
    """A frozen backbone + a trained head + its uncertainty profile, as a scikit-learn classifier.

    ``__init__`` only stores the parameters (scikit-learn's contract: ``clone``, ``get_params``,
    ``GridSearchCV`` over any of them); ``fit`` runs the one training pipeline (:mod:`ucse.pipeline`) into
    ``output_dir`` (a private temporary folder when ``None``, removed with the estimator) and loads the
    result; ``from_pretrained`` loads a run someone already trained. The head's files are read into memory
    when it is loaded: pickling and ``save_pretrained`` write those (kilobytes to a few MB), whatever happens
    to the folder later, never the backbone's weights (unpickled, it reloads the backbone its head names).
    Neither leaves the caller's random generators or warning filters changed.

    Args:
        backbone: a ``configs/backbone`` name (``minilm-l6``...) or a ``.yaml`` path; ``None`` = the default.
        head: a ``configs/head`` name: ``auto`` (default), ``logreg``, ``textcnn``, ``blend``...
        recipe: ``auto`` (step budget, model selection) or ``paper`` (the paper's fixed schedule).
        seed: seed of the carved validation slice, the head's initialisation and the CV folds.
        overrides: any other train config fields, nested (``{"optim": {"lr": 1e-3}}``) or dotted
            (``{"optim.lr": 1e-3}``), as ``ucse.train`` takes them.
        output_dir: where ``fit`` writes the run folder (kept); ``None`` = a temporary folder.
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        batch_size: texts per backbone forward at prediction time; ``None`` keeps the run's setting.
        trust_remote_code: let the backbone's own model code run (only from you: a saved run's is ignored).
        compile_head: run the head through ``torch.compile`` at prediction time (compiled on first use, 1-6 s;
            falls back to eager with a warning where compilation fails; :mod:`ucse.heads.compiled`).

    Attributes:
        classes_: (C,) the labels, in the order of ``predict_proba``'s columns (``fit``: the sorted unique
            values of ``y``, with their own type; ``from_pretrained``: the saved label names).
        encoder_: the :class:`UcseEncoder` (head + backbone).
        profile_: the :class:`UncertaintyProfile` (``profile_.fitted`` is False for the softmax fallback).
        head_dir_: where the head was loaded from.
        run_dir_: the run folder ``fit`` wrote (``None`` after ``from_pretrained`` of a bare head folder, and
            in an unpickled copy of a fit into a temporary folder, gone with the estimator that wrote it).
        metrics_: that run's ``metrics.json`` (validation figures, the head ``auto`` chose...), or ``{}``.
        uncertainty_score_: name of the score reported as ``uncertainty`` (higher = less sure).
    """

    def __init__(
        self,
        backbone: str | None = None,
        head: str = "auto",
        recipe: str = "auto",
        seed: int = 0,
        overrides: dict[str, Any] | None = None,
        output_dir: str | None = None,
        device: str = "auto",
        batch_size: int | None = None,
        trust_remote_code: bool = False,
        compile_head: bool = False,
    ) -> None:
        self.backbone = backbone
        self.head = head
        self.recipe = recipe
        self.seed = seed
        self.overrides = overrides
        self.output_dir = output_dir
        self.device = device
        self.batch_size = batch_size
        self.trust_remote_code = trust_remote_code
        self.compile_head = compile_head

    # -- fitting -----------------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any) -> UcseClassifier:  # noqa: N803 (scikit-learn's name)
        """Train on texts ``X`` with labels ``y`` (any hashable values; strings or integers), return ``self``.

        A seeded, stratified ``data.val_fraction`` of the rows is held out for model selection and the
        uncertainty profile (``head=auto`` on a small set cross-validates over all rows instead); no test
        slice is carved: score the estimator on data it did not see (``score``, ``cross_val_score``).

        Raises:
            ValueError: bad texts or labels (naming the row), a bad parameter (naming it).
        """
        if isinstance(X, str):  # as_texts reads a bare string as one text, as predict does
            raise ValueError("X is one string; fit needs a list of texts, one per label in y.")
        texts = as_texts(X)
        if not texts:
            raise ValueError("X holds no texts; fit needs labelled texts of two labels or more.")
        given, y, classes = as_labels(y, len(texts))
        names = [str(c) for c in classes]
        run_dir, cleanup = self._fit_folder()
        try:
            result = self._train(run_dir, texts, given, y)
        except BaseException:
            if cleanup is not None:
                cleanup()
            raise
        if self.__dict__.get("_cleanup") is not None:
            self._cleanup()  # the previous fit's temporary folder (its head is in memory no more)
        self._cleanup = cleanup
        saved = [str(c) for c in self.classes_]
        if sorted(saved) != sorted(names):
            raise RuntimeError(f"the run saved labels {saved}, expected {names}")  # an internal error
        # The saved head numbers its labels in its own order (names sorted as text); classes_ keep y's.
        self.columns_ = np.asarray([saved.index(n) for n in names])
        self.classes_ = np.asarray(classes, dtype=given.dtype if given.dtype.kind in "iufb" else object)
        self.run_dir_, self.metrics_ = result.run_dir, result.metrics
        return self

    def _train(self, run_dir: Path, texts: list[str], given: np.ndarray, y: np.ndarray) -> Any:
        """Train into ``run_dir`` and load the result; the :class:`RunResult`."""
        from ucse.config import build_config
        from ucse.pipeline import quiet_lightning, run_training
        from ucse.training.run_folder import holds_results

        cfg = build_config(self._tokens(run_dir), own_data=True, source="the estimator's parameters")
        if self.output_dir is not None and not (cfg.overwrite or cfg.ckpt_path) and holds_results(run_dir):
            # run_training's refusal names command-line settings; a refit (cross_val_score, GridSearchCV)
            # into one output_dir meets it on its second fit
            raise ValueError(
                f"output_dir={self.output_dir} already holds a run; nothing was changed. Pass "
                "overrides={'overwrite': True} to replace it at every fit, another output_dir, or leave "
                "output_dir=None (a temporary folder per fit, as cross_val_score and GridSearchCV need)."
            )
        ints = given.dtype.kind in "iu"  # ids: meta.label_type=int, from_pretrained gives ints
        with quiet_lightning():
            result, _ = run_training(cfg, (texts, given.tolist() if ints else [str(v) for v in y]))
        self._load(resolve_head_dir(result.run_dir), self.batch_size, warn=False)  # the fit warned already
        warn_if_inert(self.profile_, self.head_dir_)  # but not of these (the command's summary says them)
        return result

    def _tokens(self, run_dir: Path) -> list[str]:
        from ucse.pipeline import overrides_to_tokens

        tokens = [] if self.backbone is None else [f"backbone={self.backbone}"]
        tokens += [
            f"head={self.head}",
            f"recipe={self.recipe}",
            f"seed={self.seed}",
            f"accelerator={self.device}",
        ]
        tokens += overrides_to_tokens(self.overrides or {})
        tokens += [f"output_dir={run_dir}", "progress_bar=false", "data.test_fraction=0"]
        if self.trust_remote_code:
            tokens.append("backbone.trust_remote_code=true")
        return tokens

    def _fit_folder(self) -> tuple[Path, Any]:
        """``output_dir``, or a fresh temporary folder that goes when this estimator does (or refits).

        Returns:
            The run folder, and the temporary folder's finalizer (``None`` for ``output_dir``).
        """
        if self.output_dir is not None:
            return Path(self.output_dir), None
        tmp, cleanup = private_folder(self, RunFolder.SCRATCH_PREFIX)
        return tmp / "run", cleanup

    # -- loading ------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: Device | str = Device.auto,
        batch_size: int | None = None,
        trust_remote_code: bool = False,
        compile_head: bool = False,
        warn: bool = True,
        precision: str | None = None,
    ) -> UcseClassifier:
        """Load a run folder (or its ``head/``), the backbone it names and its uncertainty profile.

        Args:
            path: a run folder written by ``ucse train`` / ``train.py`` / ``fit``, or its ``head/`` folder.
            device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
            batch_size: texts per backbone forward; ``None`` keeps the run's backbone setting.
            trust_remote_code: let the backbone's own model code run (only from you: a run or head asking for
                it is ignored).
            compile_head: run the head through ``torch.compile`` (see the class's parameters).
            warn: warn when the saved abstention rule certified no threshold (predict's summary says it).
            precision: ``fp32``, ``bf16`` or ``auto`` for the backbone and head; ``None`` keeps the run's.
                ``fp32`` makes a text's probabilities independent of the texts batched with it.

        Training parameters stay the defaults (``get_params``): ``clone``/``fit`` train a default model.

        Raises:
            FileNotFoundError: when ``path`` is not a run or head folder.
        """
        clf = cls(
            device=Device(device).value,
            batch_size=batch_size,
            trust_remote_code=trust_remote_code,
            compile_head=compile_head,
        )
        head_dir = resolve_head_dir(path, name="UcseClassifier.from_pretrained: ")
        if precision is not None:  # a load-time choice, kept through pickling
            clf._precision = Precision(precision).value
        clf._load(head_dir, batch_size, warn)
        clf.run_dir_ = run_of_head(head_dir)
        without = "the run's recorded figures (metrics_) are left empty"
        clf.metrics_ = read_run_metrics(clf.run_dir_, without) if clf.run_dir_ is not None else {}
        return clf

    def save_pretrained(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the fitted classifier as one folder that ``from_pretrained(path)`` loads; returns ``path``.

        The loaded head folder, file for file (``ucse.heads.io.copy_head``, whose errors it raises): weights,
        config, uncertainty profile, label names, the backbone's config and fingerprint, the ucse version, the
        SHA-256 manifest; not the backbone's weights (loading refuses a backbone whose fingerprint differs).
        ``path`` must be missing or empty unless ``overwrite``; written to a temporary sibling, then renamed.
        """
        check_is_fitted(self, "head_dir_")
        refuse_overlap(self.head_dir_, Path(path))  # the folder it was loaded from is not written over
        # the files as loaded, not what the folder holds now
        with tempfile.TemporaryDirectory(prefix="ucse-save-") as tmp:
            return copy_head(write_head_files(self._head_files, Path(tmp)), path, overwrite)

    def _load(self, head_dir: Path, batch_size: int | None, warn: bool = True) -> None:
        overrides = {} if batch_size is None else {"batch_size": batch_size}
        if getattr(self, "_precision", None) is not None:
            overrides["precision"] = self._precision
        device = resolve_device(Device(self.device))
        self._head_files = read_head_files(head_dir)  # what pickling and save_pretrained write
        # building the modules draws their initial weights from torch's generator before the saved ones load
        with torch.random.fork_rng(devices=[]):
            self.encoder_ = UcseEncoder.from_dir(
                head_dir,
                device,
                overrides,
                trust_remote_code=self.trust_remote_code,
                compile_head=self.compile_head,
            )
        n = len(self.encoder_.label_names) or None
        self.profile_ = load_uncertainty_profile(head_dir, num_classes=n, device=device)
        if warn:
            warn_if_uncertifiable(self.profile_, head_dir)
            warn_if_inert(self.profile_, head_dir)
            warn_if_unfitted(self.profile_, head_dir)
        self.head_dir_ = head_dir
        names = label_values(self.encoder_.meta)  # integer ids in the data come back as ints
        if not names:  # a head saved without label names: ids as names
            n = int(json.loads((head_dir / "config.json").read_text())["num_classes"])
            names = [str(i) for i in range(n)]
        self.classes_ = np.asarray(names, dtype=np.int64 if isinstance(names[0], int) else object)
        self.columns_ = np.arange(len(names))

    @property
    def uncertainty_score_(self) -> str:
        """Name of the score reported as ``uncertainty`` (higher = less sure): the profile's default."""
        return self.profile_.score.value

    # -- pickling: the head folder travels, the backbone is reloaded ---------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in _UNPICKLED}  # _head_files travel
        if "head_dir_" in self.__dict__:
            state["head_dir_"] = None
            run = self.__dict__.get("run_dir_")
            if run is not None and RunFolder(Path(run)).scratch:
                state["run_dir_"] = None  # a temporary folder: gone with this estimator
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        files = state.pop("_head_files", None)
        self.__dict__.update(state)
        if files is None:
            return
        tmp, self._cleanup = private_folder(self, "ucse-head-")
        classes, columns = self.classes_, self.columns_
        self._load(write_head_files(files, tmp), self.batch_size, warn=False)
        self.classes_, self.columns_ = classes, columns

    def __sklearn_tags__(self) -> Any:
        """Texts in, not numeric tables (scikit-learn's ``check_estimator`` then knows what to feed)."""
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        return tags

    def encode_gaussian(self, texts: str | list[str], progress: bool = False) -> EncodedBatch:
        """Texts -> head outputs: mean (N, D), variance (N, D) or ``None``, logits (N, C), in input order.

        Texts are encoded in chunks of the length-sorted order (so a progress bar can move without changing
        the backbone's batching); a bare string is one text.
        """
        check_is_fitted(self, "encoder_")  # before the input's own checks, as scikit-learn's estimators
        texts = as_texts(texts)
        n = len(texts)
        if n <= CHUNK and not (progress and n >= PROGRESS_MIN):  # 1,000-1,024 texts had no bar
            return self.encoder_.run_texts(texts)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        parts: list[tuple[np.ndarray, EncodedBatch]] = []
        with tqdm(
            total=n, unit="text", desc="predict", disable=not progress or n < PROGRESS_MIN, leave=False
        ) as bar:
            for start in range(0, n, CHUNK):
                idx = order[start : start + CHUNK]
                parts.append((idx, self.encoder_.run_texts([texts[i] for i in idx])))
                bar.update(len(idx))
        first = parts[0][1]
        mean = np.empty((n, first.mean.shape[1]), dtype=first.mean.dtype)
        logits = np.empty((n, first.logits.shape[1]), dtype=first.logits.dtype)
        var = None if first.var is None else np.empty((n, first.var.shape[1]), dtype=first.var.dtype)
        pooled = np.empty((n, first.pooled.shape[1]), dtype=first.pooled.dtype)
        for idx, out in parts:
            mean[idx], logits[idx], pooled[idx] = out.mean, out.logits, out.pooled
            if var is not None:
                var[idx] = out.var
        return EncodedBatch(mean=mean, var=var, logits=logits, pooled=pooled)

    def _decide(
        self, texts: str | list[str], sets: bool = False, progress: bool = False
    ) -> UncertaintyOutput:
        out = self.encode_gaussian(texts, progress=progress)
        return self.profile_.apply(out.mean, out.var, out.logits, sets=sets, pooled=out.pooled)

    def predict_proba(self, X: str | list[str]) -> np.ndarray:  # noqa: N803
        """(N, C) probabilities (calibrated when the head has a profile), columns in ``classes_`` order."""
        return self._decide(X).probs[:, self.columns_]

    def predict(self, X: str | list[str]) -> np.ndarray:  # noqa: N803
        """(N,) each text's label (``classes_``): the most probable, or ``uncertainty.decision``'s."""
        prediction = self._decide(X).prediction  # (N,) head columns
        return self.classes_[np.argsort(self.columns_)[prediction]]  # head column -> its class

    def predict_with_uncertainty(
        self,
        texts: str | list[str],
        top_k: int | None = None,
        sets: bool = True,
        progress: bool = False,
    ) -> list[dict[str, Any]]:
        """One row per text, in input order, with the label and how sure the head is of it.

        Each row holds ``text``; ``label`` (the predicted label's name; an integer for integer labels);
        ``confidence`` (the calibrated probability of ``label``; the softmax probability when no calibration
        was fitted); ``uncertainty``
        (the head's default uncertainty score, ``uncertainty_score``: higher = less sure, on that score's
        own scale: 1 - confidence for ``msp``, nats for the entropies, a squared distance for
        ``mahalanobis``...); ``abstain`` (True where ``uncertainty`` is above the threshold saved with the
        head; always False without one); ``probs`` (label name -> probability, most probable first, the
        ``top_k`` best when given); ``ood`` (True where the text looks like none of the labels: its
        ``ood_score`` is above the out-of-scope threshold saved with the head, which keeps
        ``uncertainty.ood.tpr`` of in-scope texts; ``None`` for a head without one) and ``ood_score``
        (higher = more likely out of scope); and ``set`` (the conformal prediction set as label names) when
        ``sets`` and the head has a fitted conformal quantile.

        Args:
            texts: the texts (a bare string is one text).
            top_k: keep only the ``top_k`` most probable labels in ``probs``.
            sets: add ``set`` where a conformal quantile was fitted.
            progress: show a progress bar on long inputs.
        """
        check_is_fitted(self, "encoder_")
        texts = as_texts(texts)
        out = self._decide(texts, sets=sets, progress=progress)
        ordered = self.classes_[np.argsort(self.columns_)]  # in head column order
        return uncertainty_rows(texts, out, ordered, top_k, sets)
