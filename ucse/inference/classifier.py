"""A trained run as a scikit-learn-style text classifier that says how sure it is.

    from ucse import UcseClassifier
    clf = UcseClassifier.from_pretrained("runs/my-run")           # a run folder or its head/ folder
    clf.classes_                                                  # label names, in probability-column order
    clf.predict(["where is my card?"])                            # -> ["delivery"]
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
import math
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ucse.backbone.device import resolve_device
from ucse.config import Device
from ucse.export.encoder import EncodedBatch, UcseEncoder
from ucse.heads.io import resolve_head_dir
from ucse.uncertainty.profile import (
    UncertaintyOutput,
    UncertaintyProfile,
    load_uncertainty_profile,
    warn_if_uncertifiable,
)

PROGRESS_MIN = 1000
"""Inputs at least this long show a progress bar (when ``progress`` is on)."""
CHUNK = 1024
"""Texts per progress step; chunks are cut from the length-sorted order, so batching is unchanged."""


def as_texts(texts: str | list[str] | Any) -> list[str]:
    """A bare string is one text; any other iterable of strings is a list of texts."""
    return [texts] if isinstance(texts, str) else list(texts)


class UcseClassifier:
    """A saved head + its frozen backbone + its uncertainty profile, with a scikit-learn-like interface.

    Attributes:
        classes_: (C,) label names, in the order of ``predict_proba``'s columns.
        encoder: the :class:`UcseEncoder` (head + backbone).
        profile: the :class:`UncertaintyProfile` (``profile.fitted`` is False for the softmax fallback).
        head_dir: where the head was loaded from.
        uncertainty_score: name of the score reported as ``uncertainty`` (higher = less sure).
    """

    def __init__(self, encoder: UcseEncoder, profile: UncertaintyProfile, head_dir: Path) -> None:
        self.encoder = encoder
        self.profile = profile
        self.head_dir = head_dir
        names = encoder.label_names
        if not names:  # a head saved without label names: ids as names
            n = int(json.loads((head_dir / "config.json").read_text())["num_classes"])
            names = [str(i) for i in range(n)]
        self.classes_ = np.asarray(names, dtype=object)
        self.uncertainty_score = profile.score.value

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: Device | str = Device.auto,
        batch_size: int | None = None,
        trust_remote_code: bool = False,
    ) -> UcseClassifier:
        """Load a run folder (or its ``head/``), the backbone it names and its uncertainty profile.

        Args:
            path: a run folder written by ``ucse train`` / ``train.py``, or its ``head/`` folder.
            device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
            batch_size: texts per backbone forward; ``None`` keeps the run's backbone setting.
            trust_remote_code: let the backbone's own model code run (only from you: a run or head asking for
                it is ignored).

        Raises:
            FileNotFoundError: when ``path`` is not a run or head folder.
        """
        head_dir = resolve_head_dir(path)
        overrides = {} if batch_size is None else {"batch_size": batch_size}
        device = resolve_device(Device(device))
        encoder = UcseEncoder.from_dir(head_dir, device, overrides, trust_remote_code=trust_remote_code)
        profile = load_uncertainty_profile(head_dir, num_classes=len(encoder.label_names) or None)
        warn_if_uncertifiable(profile, head_dir)
        return cls(encoder, profile, head_dir)

    def encode_gaussian(self, texts: str | list[str], progress: bool = False) -> EncodedBatch:
        """Texts -> head outputs: mean (N, D), variance (N, D) or ``None``, logits (N, C), in input order.

        Texts are encoded in chunks of the length-sorted order (so a progress bar can move without changing
        the backbone's batching); a bare string is one text.
        """
        texts = as_texts(texts)
        n = len(texts)
        if n <= CHUNK:
            return self.encoder.run_texts(texts)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        parts: list[tuple[np.ndarray, EncodedBatch]] = []
        with tqdm(
            total=n, unit="text", desc="predict", disable=not progress or n < PROGRESS_MIN, leave=False
        ) as bar:
            for start in range(0, n, CHUNK):
                idx = order[start : start + CHUNK]
                parts.append((idx, self.encoder.run_texts([texts[i] for i in idx])))
                bar.update(len(idx))
        first = parts[0][1]
        mean = np.empty((n, first.mean.shape[1]), dtype=first.mean.dtype)
        logits = np.empty((n, first.logits.shape[1]), dtype=first.logits.dtype)
        var = None if first.var is None else np.empty((n, first.var.shape[1]), dtype=first.var.dtype)
        for idx, out in parts:
            mean[idx], logits[idx] = out.mean, out.logits
            if var is not None:
                var[idx] = out.var
        return EncodedBatch(mean=mean, var=var, logits=logits)

    def _decide(
        self, texts: str | list[str], sets: bool = False, progress: bool = False
    ) -> UncertaintyOutput:
        out = self.encode_gaussian(texts, progress=progress)
        return self.profile.apply(out.mean, out.var, out.logits, sets=sets)

    def predict_proba(self, texts: str | list[str]) -> np.ndarray:
        """(N, C) probabilities (calibrated when the head has a profile), columns in ``classes_`` order."""
        return self._decide(texts).probs

    def predict(self, texts: str | list[str]) -> list[str]:
        """The most probable label name of each text."""
        return [str(self.classes_[i]) for i in self._decide(texts).prediction]

    def predict_with_uncertainty(
        self,
        texts: str | list[str],
        top_k: int | None = None,
        sets: bool = True,
        progress: bool = False,
    ) -> list[dict[str, Any]]:
        """One row per text, in input order, with the label and how sure the head is of it.

        Each row holds ``text``; ``label`` (the predicted label name); ``confidence`` (the calibrated
        probability of ``label``; the softmax probability when no calibration was fitted); ``uncertainty``
        (the head's default uncertainty score, ``uncertainty_score``: higher = less sure, on that score's
        own scale: 1 - confidence for ``msp``, nats for the entropies, a squared distance for
        ``mahalanobis``...); ``abstain`` (True where ``uncertainty`` is above the threshold saved with the
        head; always False without one); ``probs`` (label name -> probability, most probable first, the
        ``top_k`` best when given); and ``set`` (the conformal prediction set as label names) when ``sets``
        and the head has a fitted conformal quantile.

        Args:
            texts: the texts (a bare string is one text).
            top_k: keep only the ``top_k`` most probable labels in ``probs``.
            sets: add ``set`` where a conformal quantile was fitted.
            progress: show a progress bar on long inputs.
        """
        texts = as_texts(texts)
        out = self._decide(texts, sets=sets, progress=progress)
        names = [str(c) for c in self.classes_]
        k = len(names) if top_k is None else min(top_k, len(names))
        top = np.argsort(-out.probs, axis=1, kind="stable")[:, :k]  # (N, k)
        set_labels = out.set_labels(names) if sets else None
        rows = []
        for i, text in enumerate(texts):
            row: dict[str, Any] = {
                "text": text,
                "label": names[int(out.prediction[i])],
                "confidence": float(out.confidence[i]),
                "uncertainty": _finite(out.uncertainty[i]),
                "abstain": bool(out.abstain[i]),
                "probs": {names[c]: float(out.probs[i, c]) for c in top[i]},
            }
            if set_labels is not None:
                row["set"] = set_labels[i]
            rows.append(row)
        return rows


def _finite(x: float) -> float | None:
    """A float for JSON, ``None`` for NaN/inf (strict JSON has neither)."""
    x = float(x)
    return x if math.isfinite(x) else None
