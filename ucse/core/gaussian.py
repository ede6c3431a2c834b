"""Gaussian embeddings on disk: per-row mean and diagonal variance plus provenance metadata.

One member of a UEC ensemble (or any probabilistic embedder) is exported as a folder holding
``embeddings.safetensors`` (tensors ``mean`` and ``var``, both (N, D) float32) and ``meta.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ucse import atomic, json_read

TENSOR_FILE = "embeddings.safetensors"
META_FILE = "meta.json"


def _check_tensor(name: str, value: torch.Tensor, where: str, *, nonneg: bool) -> torch.Tensor:
    """Return ``value`` as contiguous float32 after checking rank 2, finiteness and (optionally) >= 0."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"GaussianEmbeddings.{name}{where} must be a torch.Tensor, got {type(value).__name__}"
        )
    if value.ndim != 2:
        raise ValueError(
            f"GaussianEmbeddings.{name}{where} must be 2-D (N, D), got shape {tuple(value.shape)}; "
            "reshape a single vector with .unsqueeze(0)"
        )
    if not (value.is_floating_point() or value.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"GaussianEmbeddings.{name}{where} has non-numeric dtype {value.dtype}")
    value = value.detach().to(dtype=torch.float32).contiguous()
    bad = ~torch.isfinite(value)
    if bad.any():
        row = int(bad.any(dim=1).nonzero()[0])
        raise ValueError(
            f"GaussianEmbeddings.{name}{where} has a non-finite value (NaN/inf) in row {row}: "
            f"{value[row][bad[row]][:4].tolist()}; fix the producer of this embedding"
        )
    if nonneg:
        neg = value < 0
        if neg.any():
            row = int(neg.any(dim=1).nonzero()[0])
            raise ValueError(
                f"GaussianEmbeddings.{name}{where} must be >= 0 (a variance) but row {row} has "
                f"{value[row][neg[row]][:4].tolist()}; variances come from squares / inverse precisions"
            )
    return value


@dataclass
class GaussianEmbeddings:
    """N diagonal Gaussians N(mean_i, diag(var_i)) in D dimensions.

    Attributes:
        mean: (N, D) float32 means (converted to float32 on construction).
        var: (N, D) float32 per-dimension variances, >= 0.
        meta: provenance: ``member`` id, ``backbone``, ``revision``, ``pooling``, ``dim``,
            ``normalisation``, ``task``/``split`` or ``input_file``, ``count``. Free-form keys are kept.
    """

    mean: torch.Tensor
    var: torch.Tensor
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._validate(where="")

    def _validate(self, where: str) -> None:
        self.mean = _check_tensor("mean", self.mean, where, nonneg=False)
        self.var = _check_tensor("var", self.var, where, nonneg=True)
        if self.mean.shape != self.var.shape:
            raise ValueError(
                f"GaussianEmbeddings{where}: mean has shape {tuple(self.mean.shape)} but var has "
                f"{tuple(self.var.shape)}; both must be (N, D)"
            )
        if not isinstance(self.meta, dict):
            raise TypeError(f"GaussianEmbeddings.meta{where} must be a dict, got {type(self.meta).__name__}")
        odd = [k for k in self.meta if not isinstance(k, str)]
        if odd:  # save() writes meta.json with sorted keys: a non-string key failed there, after the work
            raise TypeError(f"GaussianEmbeddings.meta{where} keys must be strings, got {odd[:3]}")

    @property
    def n(self) -> int:
        """Number of rows N."""
        return int(self.mean.shape[0])

    @property
    def dim(self) -> int:
        """Embedding dimension D."""
        return int(self.mean.shape[1])

    @property
    def member(self) -> str:
        """The member id from ``meta`` (``"?"`` when absent), used in error messages."""
        return str(self.meta.get("member", "?"))

    def __len__(self) -> int:
        return self.n

    def normalized(self, eps: float = 1e-12) -> GaussianEmbeddings:
        """Return a copy with unit-norm means and variances rescaled by 1/||mu||^2.

        Dividing z ~ N(mu, diag(var)) by the scalar ||mu|| gives N(mu/||mu||, diag(var/||mu||^2)): the
        paper's per-member normalisation (Sec. 3.2/3.3) applied consistently to both moments.

        Raises:
            ValueError: if a row has a zero mean (its direction is undefined).
        """
        sq = (self.mean.double() ** 2).sum(dim=1, keepdim=True)  # (N, 1)
        zero = sq.squeeze(1) <= eps
        if zero.any():
            row = int(zero.nonzero()[0])
            raise ValueError(
                f"GaussianEmbeddings[{self.member}]: row {row} has a zero mean vector and cannot be "
                "L2-normalised; drop it or fix its producer"
            )
        mean = (self.mean.double() / sq.sqrt()).float()
        var = (self.var.double() / sq).float()
        meta = {**self.meta, "normalisation": "l2_mean_var_rescaled"}
        return GaussianEmbeddings(mean, var, meta)

    def save(self, directory: str | os.PathLike[str], replace: bool = True) -> Path:
        """Write ``embeddings.safetensors`` + ``meta.json`` into ``directory`` atomically.

        Files are written to a sibling temporary folder which is then renamed into place, so a reader
        never sees a half-written export. An existing ``directory`` is replaced; with ``replace=False``
        only a missing or empty one (else ``FileExistsError``, nothing changed).

        Returns:
            The directory path.
        """
        target = Path(directory)
        meta = {**self.meta, "count": self.n, "dim": self.dim}
        with atomic.atomic_dir(target, replace=replace) as tmp:
            save_file({"mean": self.mean, "var": self.var}, str(tmp / TENSOR_FILE))
            atomic.write_json(tmp / META_FILE, meta, sort_keys=True, default=str)
        return target

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> GaussianEmbeddings:
        """Read and validate an export written by :meth:`save`.

        Raises:
            FileNotFoundError: if a file is missing.
            ValueError: on a corrupt file, missing tensors, bad shapes/values, or meta count/dim that
                disagree with the tensors; the message names the file and field.
        """
        folder = Path(directory)
        tensor_path, meta_path = folder / TENSOR_FILE, folder / META_FILE
        for path in (tensor_path, meta_path):
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing; expected a GaussianEmbeddings export folder")
        try:
            tensors = load_file(str(tensor_path))
        except (SafetensorError, OSError, ValueError) as err:
            raise ValueError(
                f"{tensor_path} is not a readable safetensors file ({err}); re-export it"
            ) from err
        try:
            meta = json_read.loads(meta_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{meta_path} is not valid JSON ({err}); re-export it") from err
        if not isinstance(meta, dict):
            raise ValueError(f"{meta_path} must hold a JSON object, got {type(meta).__name__}")
        missing = {"mean", "var"} - tensors.keys()
        if missing:
            raise ValueError(f"{tensor_path} lacks tensor(s) {sorted(missing)}; found {sorted(tensors)}")
        for name in ("mean", "var"):
            if tensors[name].dtype != torch.float32:
                raise ValueError(
                    f"{tensor_path}: tensor '{name}' has dtype {tensors[name].dtype}, expected float32"
                )
        obj = cls.__new__(cls)
        obj.mean, obj.var, obj.meta = tensors["mean"], tensors["var"], meta
        obj._validate(where=f" (in {tensor_path})")
        for key, actual in (("count", obj.n), ("dim", obj.dim)):
            if key in meta and (type(meta[key]) is not int or meta[key] != actual):  # not 2.9, "abc" or true
                raise ValueError(
                    f"{meta_path}: field '{key}' = {meta[key]} but the tensors in {tensor_path} have "
                    f"{key} {actual}; the export is inconsistent, re-export it"
                )
        return obj
