"""Post-hoc diagonal last-layer Laplace approximation for an embedding model (paper Sec. 3.1), by hand.

The last layer is linear, ``y = W phi + b`` with pooled features phi (F) and embedding y (D). Its MAP is the
pretrained (W, b); the likelihood is the in-batch contrastive one the embedders were trained with: in a
batch of B positive pairs (a_i, b_i), query i must pick passage i among the B passages,

    L_ij = sim(W phi_a_i + b, W phi_b_j + b) / tau,      loss = sum_i CE(softmax(L_i), i).

The posterior is N(theta_map, diag(1 / (diag_H + delta))) with delta the prior precision, chosen by the
Laplace marginal likelihood on a log grid (or by held-out loss), and the embedding variance of an input is
var(x)_d = sum_f phi_f^2 var(W_df) + var(b_d).

The paper fits laplace-redux on a binary relevance classifier (App. B.3.1); we fit the contrastive
likelihood directly because it is the one the *embedding* layer was trained with (the brief's choice).
"""

from __future__ import annotations

import json
import math
import os
from enum import Enum
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from safetensors.torch import load_file, save
from torch.func import grad, vmap

from ucse import atomic
from ucse.uec.similarity import similarity_moments


class HessianType(str, Enum):
    """Curvature used for the posterior precision."""

    GGN = "ggn"  # diagonal generalised Gauss-Newton J^T Lambda J, Lambda = softmax Hessian
    EF = "ef"  # diagonal empirical Fisher: sum over queries of squared per-query gradients


class PriorSelection(str, Enum):
    """How the isotropic prior precision delta is chosen on the grid."""

    MARGLIK = "marglik"  # maximise the Laplace log marginal likelihood (MacKay evidence)
    VAL_LOSS = "val_loss"  # minimise the probit-corrected in-batch InfoNCE loss on held-out pairs


class PairSimilarity(str, Enum):
    """Similarity inside the InfoNCE logits."""

    COSINE = "cosine"
    DOT = "dot"


def _enum(cls: type[Enum], value: object, name: str) -> Enum:
    try:
        return cls(value)
    except ValueError:
        options = [m.value for m in cls]  # type: ignore[attr-defined]
        raise ValueError(f"{name}={value!r} is not valid; choose one of {options}") from None


def _pair_logit(a: torch.Tensor, b: torch.Tensor, cosine: bool, temperature: float) -> torch.Tensor:
    """Scalar logit sim(a, b) / tau of one (query, passage) pair of (D,) embeddings."""
    if cosine:
        return (a @ b) / (a.norm() * b.norm() * temperature)
    return (a @ b) / temperature


def contrastive_logits(ya: torch.Tensor, yb: torch.Tensor, cosine: bool, temperature: float) -> torch.Tensor:
    """In-batch logits (B, B) between query embeddings ya (B, D) and passage embeddings yb (B, D)."""
    if cosine:
        ya, yb = F.normalize(ya, dim=-1), F.normalize(yb, dim=-1)
    return ya @ yb.T / temperature


class DiagonalLaplace:
    """Diagonal Laplace posterior over a linear last layer (W (D, F), b (D,)) under in-batch InfoNCE.

    Args:
        hessian: ``"ggn"`` or ``"ef"``.
        prior: ``"marglik"`` (default) or ``"val_loss"`` (needs held-out pairs in :meth:`fit`).
        temperature: InfoNCE temperature tau of the logits (the embedders' training value, ~0.01-0.05).
        similarity: ``"cosine"`` (default) or ``"dot"`` inside the logits.
        prior_grid: candidate prior precisions; default 10^-4 ... 10^4 (41 log-spaced points).
        batch_size: pairs per in-batch-negatives group; pairs are grouped contiguously in the given order.
        dtype: compute dtype (float64 keeps the log-determinants of the evidence accurate).
    """

    def __init__(
        self,
        hessian: HessianType | str = HessianType.GGN,
        prior: PriorSelection | str = PriorSelection.MARGLIK,
        temperature: float = 0.05,
        similarity: PairSimilarity | str = PairSimilarity.COSINE,
        prior_grid: torch.Tensor | None = None,
        batch_size: int = 32,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.hessian = _enum(HessianType, hessian, "hessian")
        self.prior = _enum(PriorSelection, prior, "prior")
        self.similarity = _enum(PairSimilarity, similarity, "similarity")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 (in-batch negatives), got {batch_size}")
        grid = torch.logspace(-4, 4, 41) if prior_grid is None else torch.as_tensor(prior_grid).flatten()
        if grid.numel() == 0 or not bool((grid > 0).all()):
            raise ValueError(f"prior_grid must be non-empty and positive, got {grid.tolist()}")
        self.temperature = float(temperature)
        self.prior_grid = grid.to(torch.float64)
        self.batch_size = int(batch_size)
        self.dtype = dtype
        self.weight: torch.Tensor | None = None  # (D, F)
        self.bias: torch.Tensor | None = None  # (D,)
        self.h_weight: torch.Tensor | None = None  # (D, F) diagonal curvature of W
        self.h_bias: torch.Tensor | None = None  # (D,)
        self.log_lik: float = float("nan")
        self.prior_precision: float = float("nan")
        self.grid_scores: torch.Tensor | None = None  # (G,) evidence or validation loss per grid point

    # ------------------------------------------------------------------ curvature
    def _batch_terms(
        self, pa: torch.Tensor, pb: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Loss and diagonal curvature (W part (D, F), b part (D,)) of one batch of B pairs."""
        cosine = self.similarity is PairSimilarity.COSINE
        ya, yb = pa @ weight.T + bias, pb @ weight.T + bias  # (B, D)
        logits = contrastive_logits(ya, yb, cosine, self.temperature)  # (B, B)
        target = torch.arange(len(pa))
        loss = F.cross_entropy(logits, target, reduction="sum")
        # u_ij = dL_ij/dya_i, v_ij = dL_ij/dyb_j: logit ij touches theta only through ya_i and yb_j, so
        # dL_ij/dW_df = u_ijd pa_if + v_ijd pb_jf and dL_ij/db_d = u_ijd + v_ijd (chain rule, no loops).
        pair_grad = grad(_pair_logit, argnums=(0, 1))
        u, v = vmap(vmap(pair_grad, in_dims=(None, 0, None, None)), in_dims=(0, None, None, None))(
            ya, yb, cosine, self.temperature
        )  # (B, B, D) each
        probs = logits.softmax(dim=1)  # (B, B)

        def weighted_sum(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            """sum_j w_ij J_ij for every query i: W part (B, D, F), b part (B, D)."""
            wu, wv = (w[..., None] * u).sum(1), w[..., None] * v  # (B, D), (B, B, D)
            gw = wu[:, :, None] * pa[:, None, :] + torch.einsum("ijd,jf->idf", wv, pb)  # (B, D, F)
            return gw, wu + wv.sum(1)

        if self.hessian is HessianType.EF:
            resid = probs - F.one_hot(target, len(pa)).to(probs.dtype)  # (B, B) dCE_i/dL_ij
            gw, gb = weighted_sum(resid)  # per-query gradients
            return loss, (gw**2).sum(0), (gb**2).sum(0)
        # GGN row i: sum_j p_ij J_ij^2 - (sum_j p_ij J_ij)^2  (diag of J^T (diag p - p p^T) J).
        pu2 = torch.einsum("ij,ijd->id", probs, u**2)  # (B, D)
        puv = (probs[..., None] * u * v).reshape(-1, u.shape[-1])  # (B*B, D)
        outer = (pa[:, None, :] * pb[None, :, :]).reshape(-1, pa.shape[-1])  # (B*B, F) pa_i * pb_j
        pv2 = torch.einsum("ij,ijd->jd", probs, v**2)  # (B, D) summed over queries i
        second = pu2.T @ pa**2 + 2 * puv.T @ outer + pv2.T @ pb**2  # (D, F)
        mw, mb = weighted_sum(probs)
        hb = (probs[..., None] * (u + v) ** 2).sum((0, 1)) - (mb**2).sum(0)  # (D,)
        return loss, second - (mw**2).sum(0), hb

    def fit(
        self,
        phi_a: torch.Tensor,
        phi_b: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        val_phi_a: torch.Tensor | None = None,
        val_phi_b: torch.Tensor | None = None,
    ) -> DiagonalLaplace:
        """Accumulate the diagonal curvature at the pretrained (MAP) weights and pick the prior precision.

        Args:
            phi_a: (N, F) pooled features of the queries / first sentences.
            phi_b: (N, F) pooled features of their positives.
            weight: (D, F) last-layer weight (the MAP).
            bias: (D,) last-layer bias, or ``None`` for a bias-free layer (treated as a fixed zero).
            val_phi_a: (M, F) held-out queries, required when ``prior="val_loss"``.
            val_phi_b: (M, F) held-out positives.

        Returns:
            self, fitted.
        """
        weight = torch.as_tensor(weight).detach().to(self.dtype)
        if weight.ndim != 2:
            raise ValueError(f"weight must be (D, F), got shape {tuple(weight.shape)}")
        dim, feat = weight.shape
        bias = torch.zeros(dim, dtype=self.dtype) if bias is None else torch.as_tensor(bias).to(self.dtype)
        if bias.shape != (dim,):
            raise ValueError(
                f"bias must be (D,) = ({dim},) to match weight {tuple(weight.shape)}, got {tuple(bias.shape)}"
            )
        pa, pb = self._features(phi_a, feat, "phi_a"), self._features(phi_b, feat, "phi_b")
        if pa.shape != pb.shape:
            raise ValueError(f"phi_a {tuple(pa.shape)} and phi_b {tuple(pb.shape)} must both be (N, F) pairs")
        if self.prior is PriorSelection.VAL_LOSS and (val_phi_a is None or val_phi_b is None):
            raise ValueError(
                "prior='val_loss' needs val_phi_a and val_phi_b (held-out pairs); or use prior='marglik'"
            )
        self.weight, self.bias = weight, bias
        h_w, h_b, loss = torch.zeros_like(weight), torch.zeros_like(bias), 0.0
        for start in range(0, len(pa), self.batch_size):  # loop over batches only: all else is vectorised
            sl = slice(start, start + self.batch_size)
            batch_loss, bw, bb = self._batch_terms(pa[sl], pb[sl], weight, bias)
            loss, h_w, h_b = loss + float(batch_loss), h_w + bw, h_b + bb
        # The GGN/EF are PSD sums; clamp tiny negative round-off so the precision stays >= delta.
        self.h_weight, self.h_bias, self.log_lik = h_w.clamp_min(0), h_b.clamp_min(0), -loss
        if self.prior is PriorSelection.MARGLIK:
            self.grid_scores = torch.stack([self.log_marginal_likelihood(d) for d in self.prior_grid])
            self.prior_precision = float(self.prior_grid[int(self.grid_scores.argmax())])
        else:
            va, vb = (
                self._features(val_phi_a, feat, "val_phi_a"),
                self._features(val_phi_b, feat, "val_phi_b"),
            )
            self.grid_scores = torch.stack([self._val_loss(va, vb, float(d)) for d in self.prior_grid])
            self.prior_precision = float(self.prior_grid[int(self.grid_scores.argmin())])
        return self

    def _features(self, phi: torch.Tensor | None, feat: int, name: str) -> torch.Tensor:
        phi = torch.as_tensor(phi).detach().to(self.dtype)
        if phi.ndim != 2 or phi.shape[1] != feat:
            raise ValueError(f"{name} must be (N, F={feat}) to match weight (D, F), got {tuple(phi.shape)}")
        if not bool(torch.isfinite(phi).all()):
            raise ValueError(
                f"{name} has non-finite values (row {int((~torch.isfinite(phi)).any(1).nonzero()[0])})"
            )
        return phi

    def _require_fit(self) -> None:
        if self.h_weight is None:
            raise RuntimeError("DiagonalLaplace is not fitted: call fit() first (or DiagonalLaplace.load())")

    # ------------------------------------------------------------------ evidence and posterior
    def log_marginal_likelihood(self, prior_precision: float | torch.Tensor) -> torch.Tensor:
        """Laplace evidence log p(D | delta) at the MAP, up to a delta-independent constant.

        log p(D|delta) ~= log p(D|theta) - delta/2 ||theta||^2 + P/2 log delta - 1/2 sum_p log(h_p + delta),
        i.e. log-likelihood + log-prior - 1/2 log det(posterior precision / 2pi) with the 2pi terms cancelled.
        """
        self._require_fit()
        delta = torch.as_tensor(prior_precision, dtype=torch.float64)
        h = torch.cat([self.h_weight.flatten(), self.h_bias]).double()  # (P,)
        sq = float((self.weight.double() ** 2).sum() + (self.bias.double() ** 2).sum())
        n_params = h.numel()
        return self.log_lik - 0.5 * delta * sq + 0.5 * n_params * delta.log() - 0.5 * (h + delta).log().sum()

    def _val_loss(self, va: torch.Tensor, vb: torch.Tensor, delta: float) -> torch.Tensor:
        """Held-out in-batch InfoNCE with probit-corrected logits (the paper's Eq. 6 at logit scale)."""
        var_w, var_b = 1.0 / (self.h_weight + delta), 1.0 / (self.h_bias + delta)
        total = torch.zeros((), dtype=torch.float64)
        for start in range(0, len(va), self.batch_size):
            sl = slice(start, start + self.batch_size)
            moments = []
            for phi in (va[sl], vb[sl]):
                mean, var = phi @ self.weight.T + self.bias, phi**2 @ var_w.T + var_b  # (B, D)
                if self.similarity is PairSimilarity.COSINE:
                    sq = (mean**2).sum(1, keepdim=True)
                    mean, var = mean / sq.sqrt(), var / sq
                moments.append((mean, var))
            mu_s, var_s = similarity_moments(moments[0][0], moments[0][1], moments[1][0], moments[1][1])
            tau = self.temperature
            logits = (mu_s / tau) / torch.sqrt(1 + math.pi / 8 * var_s / tau**2)  # (B, B)
            total = total + F.cross_entropy(logits, torch.arange(len(logits)), reduction="sum").double()
        return total

    @property
    def posterior_var_weight(self) -> torch.Tensor:
        """(D, F) posterior variance of W: 1 / (diag_H + delta)."""
        self._require_fit()
        return 1.0 / (self.h_weight + self.prior_precision)

    @property
    def posterior_var_bias(self) -> torch.Tensor:
        """(D,) posterior variance of b."""
        self._require_fit()
        return 1.0 / (self.h_bias + self.prior_precision)

    def predict_mean(self, phi: torch.Tensor) -> torch.Tensor:
        """(M, D) float32 embedding means W phi + b for features phi (M, F)."""
        self._require_fit()
        phi = self._features(phi, self.weight.shape[1], "phi")
        return (phi @ self.weight.T + self.bias).float()

    def predict_var(self, phi: torch.Tensor) -> torch.Tensor:
        """(M, D) float32 embedding variances phi^2 . var(W) + var(b) for features phi (M, F)."""
        self._require_fit()
        phi = self._features(phi, self.weight.shape[1], "phi")
        return (phi**2 @ self.posterior_var_weight.T + self.posterior_var_bias).float()  # (M, D)

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``laplace.safetensors`` (MAP and curvature) and ``laplace.json`` (config, delta, grid)."""
        self._require_fit()
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {"weight": self.weight, "bias": self.bias, "h_weight": self.h_weight, "h_bias": self.h_bias}
        # Each file is written atomically; the folder may also hold a caller's files (a member's member.json).
        with atomic.atomic_file(folder / "laplace.safetensors", "wb") as fh:
            fh.write(save({k: t.contiguous() for k, t in tensors.items()}))
        config = {
            "hessian": self.hessian.value,
            "prior": self.prior.value,
            "similarity": self.similarity.value,
            "temperature": self.temperature,
            "batch_size": self.batch_size,
            "prior_grid": self.prior_grid.tolist(),
            "grid_scores": self.grid_scores.tolist(),
            "prior_precision": self.prior_precision,
            "log_lik": self.log_lik,
        }
        atomic.write_json(folder / "laplace.json", config)
        return folder

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> DiagonalLaplace:
        """Read a posterior written by :meth:`save`."""
        folder = Path(directory)
        config = json.loads((folder / "laplace.json").read_text())
        tensors = load_file(str(folder / "laplace.safetensors"))
        obj = cls(
            hessian=config["hessian"],
            prior=config["prior"],
            temperature=config["temperature"],
            similarity=config["similarity"],
            prior_grid=torch.tensor(config["prior_grid"]),
            batch_size=config["batch_size"],
            dtype=tensors["weight"].dtype,
        )
        obj.weight, obj.bias = tensors["weight"], tensors["bias"]
        obj.h_weight, obj.h_bias = tensors["h_weight"], tensors["h_bias"]
        obj.grid_scores = torch.tensor(config["grid_scores"], dtype=torch.float64)
        obj.prior_precision, obj.log_lik = float(config["prior_precision"]), float(config["log_lik"])
        return obj
