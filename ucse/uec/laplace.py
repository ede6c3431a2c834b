"""Post-hoc diagonal Laplace approximation of an affine map on the scored embedding (paper Sec. 3.1).

The map is y = W phi + b. A :class:`~ucse.uec.members.LaplaceMember` places it *after* everything the
similarity sees: phi is the model's final pooled, L2-normalised sentence embedding and (W, b) starts at
(I, 0), so the posterior's predictive variance lives in the space that is scored (the normalisation of y
is linearised with its exact Jacobian, :func:`~ucse.uec.laplace_curvature.normalised_moments`).

Likelihood: the in-batch InfoNCE the embedders were trained with (``ucse/uec/laplace_curvature.py``),
known positives masked out of the negatives. Prior: N(theta_0, 1/delta) centred on the pretrained map.
The pretrained map is not a stationary point of that likelihood, so the MAP is *refined*: L-BFGS on
NLL + delta/2 ||theta - theta_0||^2, alternated with choosing delta by the Laplace evidence at the current
MAP (MacKay's evidence iteration) until delta repeats. The curvature (diagonal GGN or EF) is taken at the
refined MAP, so the Gaussian is a genuine Laplace approximation around a mode of the posterior.

The paper fits laplace-redux on a binary relevance classifier (App. B.3.1); we fit the contrastive
likelihood the embedding was trained with.
"""

from __future__ import annotations

import time
from enum import Enum

import torch

from ucse.config import parse_enum
from ucse.uec.laplace_curvature import batch_curvature, batch_loss, normalised_moments, probit_val_loss


class HessianType(str, Enum):
    """Curvature used for the posterior precision."""

    ggn = "ggn"  # diagonal generalised Gauss-Newton J^T Lambda J, Lambda = softmax Hessian
    ef = "ef"  # diagonal empirical Fisher: sum over queries of squared per-query gradients


class PriorSelection(str, Enum):
    """How the isotropic prior precision delta is chosen on the grid."""

    marglik = "marglik"  # maximise the Laplace log marginal likelihood (MacKay evidence)
    val_loss = "val_loss"  # minimise the probit-corrected in-batch InfoNCE loss on held-out pairs


class PairSimilarity(str, Enum):
    """Similarity inside the InfoNCE logits."""

    cosine = "cosine"
    dot = "dot"


class DiagonalLaplace:
    """Diagonal Laplace posterior over an affine map (W (D, F), b (D,)) under in-batch InfoNCE.

    Args:
        hessian: ``"ggn"`` or ``"ef"``.
        prior: ``"marglik"`` (default) or ``"val_loss"`` (needs held-out pairs in :meth:`fit`).
        temperature: InfoNCE temperature tau of the logits (the embedders' training value, ~0.01-0.05).
        similarity: ``"cosine"`` (default) or ``"dot"`` inside the logits.
        prior_grid: candidate prior precisions; default 10^-4 ... 10^4 (41 log-spaced points).
        batch_size: pairs per in-batch-negatives group; pairs are grouped contiguously in the given order.
        refine_steps: L-BFGS iterations per MAP refinement; 0 keeps the given weights as the MAP.
        evidence_rounds: at most this many (refine, pick delta) rounds.
        dtype: compute dtype (float64 keeps the log-determinants of the evidence accurate).
    """

    def __init__(
        self,
        hessian: HessianType | str = HessianType.ggn,
        prior: PriorSelection | str = PriorSelection.marglik,
        temperature: float = 0.05,
        similarity: PairSimilarity | str = PairSimilarity.cosine,
        prior_grid: torch.Tensor | None = None,
        batch_size: int = 32,
        refine_steps: int = 300,
        evidence_rounds: int = 10,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.hessian = parse_enum(HessianType, hessian, "hessian")
        self.prior = parse_enum(PriorSelection, prior, "prior")
        self.similarity = parse_enum(PairSimilarity, similarity, "similarity")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 (in-batch negatives), got {batch_size}")
        if refine_steps < 0 or evidence_rounds < 1:
            raise ValueError(
                f"refine_steps must be >= 0 and evidence_rounds >= 1, got {refine_steps}, {evidence_rounds}"
            )
        grid = torch.logspace(-4, 4, 41) if prior_grid is None else torch.as_tensor(prior_grid).flatten()
        if grid.numel() == 0 or not bool((grid > 0).all()):
            raise ValueError(f"prior_grid must be non-empty and positive, got {grid.tolist()}")
        self.temperature = float(temperature)
        self.prior_grid = grid.to(torch.float64)
        self.batch_size = int(batch_size)
        self.refine_steps, self.evidence_rounds = int(refine_steps), int(evidence_rounds)
        self.dtype = dtype
        self.weight: torch.Tensor | None = None  # (D, F) the MAP
        self.bias: torch.Tensor | None = None  # (D,)
        self.prior_weight: torch.Tensor | None = None  # (D, F) prior mean theta_0 (the pretrained map)
        self.prior_bias: torch.Tensor | None = None  # (D,)
        self.h_weight: torch.Tensor | None = None  # (D, F) diagonal curvature of W at the MAP
        self.h_bias: torch.Tensor | None = None  # (D,)
        self.log_lik: float = float("nan")
        self.prior_precision: float = float("nan")
        self.grid_scores: torch.Tensor | None = None  # (G,) evidence or validation loss per grid point
        self.diagnostics: dict[str, float | list[float]] = {}  # refinement record (losses, grad norms)

    @property
    def cosine(self) -> bool:
        """Whether the logits (and the scored embedding) are cosine / L2-normalised."""
        return self.similarity is PairSimilarity.cosine

    # ------------------------------------------------------------------ likelihood
    def _batches(self, n: int) -> list[slice]:
        return [slice(s, s + self.batch_size) for s in range(0, n, self.batch_size)]

    def _same(self, groups: torch.Tensor | None, sl: slice) -> torch.Tensor | None:
        if groups is None:
            return None
        g = groups[sl]
        return g[:, None] == g[None, :]  # (B, B) known positives

    def nll(
        self, pa: torch.Tensor, pb: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, groups=None
    ) -> torch.Tensor:
        """Summed in-batch InfoNCE over all batches (differentiable in weight and bias)."""
        total = torch.zeros((), dtype=weight.dtype)
        for sl in self._batches(len(pa)):
            total = total + batch_loss(
                pa[sl], pb[sl], weight, bias, self.cosine, self.temperature, self._same(groups, sl)
            )
        return total

    def objective_grad_norm(self, pa, pb, groups=None, delta: float | None = None) -> tuple[float, float]:
        """(||grad of NLL + delta/2 ||theta - theta_0||^2||, ||theta||) at the fitted MAP."""
        self._require_fit()
        delta = self.prior_precision if delta is None else delta
        w = self.weight.clone().requires_grad_(True)
        b = self.bias.clone().requires_grad_(True)
        obj = self.nll(self._as(pa), self._as(pb), w, b, groups) + 0.5 * delta * self._sq_dev(w, b)
        gw, gb = torch.autograd.grad(obj, (w, b))
        return float(torch.cat([gw.flatten(), gb]).norm()), float(
            torch.cat([w.detach().flatten(), b.detach()]).norm()
        )

    def _sq_dev(self, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ((w - self.prior_weight) ** 2).sum() + ((b - self.prior_bias) ** 2).sum()

    def _refine(self, pa, pb, groups, delta: float) -> None:
        """L-BFGS from the current MAP on NLL + delta/2 ||theta - theta_0||^2 (full batch)."""
        if self.refine_steps == 0:
            return
        w = self.weight.clone().requires_grad_(True)
        b = self.bias.clone().requires_grad_(True)
        opt = torch.optim.LBFGS(
            [w, b],
            lr=1.0,
            max_iter=self.refine_steps,
            tolerance_grad=1e-8,
            tolerance_change=1e-14,
            history_size=20,
            line_search_fn="strong_wolfe",
        )

        def closure() -> torch.Tensor:
            opt.zero_grad()
            obj = self.nll(pa, pb, w, b, groups) + 0.5 * delta * self._sq_dev(w, b)
            obj.backward()
            return obj

        opt.step(closure)
        self.weight, self.bias = w.detach(), b.detach()

    def _curvature(self, pa, pb, groups) -> None:
        h_w, h_b, loss = torch.zeros_like(self.weight), torch.zeros_like(self.bias), 0.0
        for sl in self._batches(len(pa)):  # loop over batches only: all else is vectorised
            batch_nll, bw, bb = batch_curvature(
                pa[sl],
                pb[sl],
                self.weight,
                self.bias,
                self.cosine,
                self.temperature,
                self.hessian is HessianType.ef,
                self._same(groups, sl),
            )
            loss, h_w, h_b = loss + float(batch_nll), h_w + bw, h_b + bb
        # The GGN/EF are PSD sums; clamp tiny negative round-off so the precision stays >= delta.
        self.h_weight, self.h_bias, self.log_lik = h_w.clamp_min(0), h_b.clamp_min(0), -loss

    def fit(
        self,
        phi_a: torch.Tensor,
        phi_b: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        val_phi_a: torch.Tensor | None = None,
        val_phi_b: torch.Tensor | None = None,
        groups: torch.Tensor | None = None,
    ) -> DiagonalLaplace:
        """Refine the MAP from the pretrained map, take the curvature there and pick the prior precision.

        Args:
            phi_a: (N, F) features of the queries / first sentences.
            phi_b: (N, F) features of their positives.
            weight: (D, F) pretrained map: the refinement's start and the prior mean.
            bias: (D,) pretrained bias, or ``None`` for a zero bias (still fitted).
            val_phi_a: (M, F) held-out queries, required when ``prior="val_loss"``.
            val_phi_b: (M, F) held-out positives.
            groups: (N,) ints; pairs of one group are known positives of each other and are masked out
                of each other's in-batch negatives.

        Returns:
            self, fitted.
        """
        weight = torch.as_tensor(weight).detach().to(self.dtype)
        if weight.ndim != 2:
            raise ValueError(f"weight must be (D, F), got shape {tuple(weight.shape)}")
        dim, feat = weight.shape
        bias = (
            torch.zeros(dim, dtype=self.dtype)
            if bias is None
            else torch.as_tensor(bias).detach().to(self.dtype)
        )
        if bias.shape != (dim,):
            raise ValueError(
                f"bias must be (D,) = ({dim},) to match weight {tuple(weight.shape)}, got {tuple(bias.shape)}"
            )
        pa, pb = self._features(phi_a, feat, "phi_a"), self._features(phi_b, feat, "phi_b")
        if pa.shape != pb.shape:
            raise ValueError(f"phi_a {tuple(pa.shape)} and phi_b {tuple(pb.shape)} must both be (N, F) pairs")
        if groups is not None:
            groups = torch.as_tensor(groups).flatten()
            if groups.shape != (len(pa),):
                raise ValueError(f"groups must be (N,) = ({len(pa)},), got {tuple(groups.shape)}")
        if self.prior is PriorSelection.val_loss and (val_phi_a is None or val_phi_b is None):
            raise ValueError(
                "prior='val_loss' needs val_phi_a and val_phi_b (held-out pairs); or use prior='marglik'"
            )
        self.prior_weight, self.prior_bias = weight, bias
        self.weight, self.bias = weight.clone(), bias.clone()
        # Small (B x D) ops: one thread is as fast on an idle CPU and ~50x faster on a contended one
        # (OpenMP workers spin-wait for descheduled siblings), so the fit runs single-threaded.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            self._fit_map(pa, pb, groups, val_phi_a, val_phi_b, feat, weight, bias)
        finally:
            torch.set_num_threads(threads)
        return self

    def _fit_map(self, pa, pb, groups, val_phi_a, val_phi_b, feat: int, weight, bias) -> None:  # noqa: ANN001
        start = time.perf_counter()
        with torch.no_grad():
            init_nll = float(self.nll(pa, pb, weight, bias, groups))
        delta, history = 1.0, []
        for _ in range(self.evidence_rounds if self.refine_steps else 1):
            self._refine(pa, pb, groups, delta)
            self._curvature(pa, pb, groups)
            self._select_prior(pa, pb, val_phi_a, val_phi_b, feat)
            history.append(self.prior_precision)
            if self.prior_precision == delta:
                break
            delta = self.prior_precision
        else:
            # The rounds ran out with the last one moving delta: the MAP and curvature are still those of the
            # previous delta, so refine once more at the chosen one (the posterior is then around its mode).
            if self.refine_steps:
                self._refine(pa, pb, groups, self.prior_precision)
                self._curvature(pa, pb, groups)
        grad_map, norm_map = self.objective_grad_norm(pa, pb, groups)
        map_w, map_b = self.weight, self.bias
        self.weight, self.bias = weight, bias  # the same objective at the pretrained map
        grad_pre, norm_pre = self.objective_grad_norm(pa, pb, groups)
        self.weight, self.bias = map_w, map_b
        self.diagnostics = {
            "grad_norm_pretrained": grad_pre,
            "weight_norm_pretrained": norm_pre,
            "grad_norm_map": grad_map,
            "weight_norm_map": norm_map,
            "nll_pretrained": init_nll,
            "nll_map": -self.log_lik,
            "delta_history": history,
            "sq_dev": float(self._sq_dev(self.weight, self.bias)),
            "refine_seconds": time.perf_counter() - start,
            "pairs": len(pa),
        }

    def _select_prior(self, pa, pb, val_phi_a, val_phi_b, feat: int) -> None:
        if self.prior is PriorSelection.marglik:
            self.grid_scores = torch.stack([self.log_marginal_likelihood(d) for d in self.prior_grid])
            self.prior_precision = float(self.prior_grid[int(self.grid_scores.argmax())])
            return
        va, vb = self._features(val_phi_a, feat, "val_phi_a"), self._features(val_phi_b, feat, "val_phi_b")
        self.grid_scores = torch.stack([self._val_loss(va, vb, float(d)) for d in self.prior_grid])
        self.prior_precision = float(self.prior_grid[int(self.grid_scores.argmin())])

    def _as(self, phi: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(phi).detach().to(self.dtype)

    def _features(self, phi: torch.Tensor | None, feat: int, name: str) -> torch.Tensor:
        phi = self._as(phi)
        if phi.ndim != 2 or phi.shape[1] != feat:
            raise ValueError(f"{name} must be (N, F={feat}) to match weight (D, F), got {tuple(phi.shape)}")
        if not bool(torch.isfinite(phi).all()):
            raise ValueError(
                f"{name} has non-finite values (row {int((~torch.isfinite(phi)).any(1).nonzero()[0])})"
            )
        return phi

    def _require_fit(self) -> None:
        if self.h_weight is None:
            raise RuntimeError("DiagonalLaplace is not fitted: call fit() first, or load_laplace()")

    # ------------------------------------------------------------------ evidence and posterior
    def log_marginal_likelihood(self, prior_precision: float | torch.Tensor) -> torch.Tensor:
        """Laplace evidence log p(D | delta) at the MAP, up to a delta-independent constant.

        log p(D|delta) ~= log p(D|theta) - delta/2 ||theta - theta_0||^2 + P/2 log delta
        - 1/2 sum_p log(h_p + delta): log-likelihood + log-prior - 1/2 log det(posterior precision / 2pi).
        """
        self._require_fit()
        delta = torch.as_tensor(prior_precision, dtype=torch.float64)
        h = torch.cat([self.h_weight.flatten(), self.h_bias]).double()  # (P,)
        sq = float(self._sq_dev(self.weight, self.bias))
        n_params = h.numel()
        return self.log_lik - 0.5 * delta * sq + 0.5 * n_params * delta.log() - 0.5 * (h + delta).log().sum()

    def _val_loss(self, va: torch.Tensor, vb: torch.Tensor, delta: float) -> torch.Tensor:
        """Held-out in-batch InfoNCE with probit-corrected logits (the paper's Eq. 6 at logit scale)."""
        var_w, var_b = 1.0 / (self.h_weight + delta), 1.0 / (self.h_bias + delta)
        return probit_val_loss(
            va, vb, self.weight, self.bias, var_w, var_b, self.cosine, self.temperature, self.batch_size
        )

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
        """(M, D) float32 means W phi + b of the map's output (before any normalisation)."""
        self._require_fit()
        phi = self._features(phi, self.weight.shape[1], "phi")
        return (phi @ self.weight.T + self.bias).float()

    def predict_var(self, phi: torch.Tensor) -> torch.Tensor:
        """(M, D) float32 variances phi^2 . var(W) + var(b) of the map's output (before normalisation)."""
        self._require_fit()
        phi = self._features(phi, self.weight.shape[1], "phi")
        return (phi**2 @ self.posterior_var_weight.T + self.posterior_var_bias).float()  # (M, D)

    def predict(self, phi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(M, D) mean and variance of the *scored* embedding: L2-normalised y under cosine logits.

        Under ``similarity="cosine"`` the score sees y / ||y||; its variance is the linearised
        (Jacobian) image of diag var(y). Under ``"dot"`` the raw y is scored.
        """
        self._require_fit()
        phi = self._features(phi, self.weight.shape[1], "phi")
        mean = phi @ self.weight.T + self.bias
        var = phi**2 @ self.posterior_var_weight.T + self.posterior_var_bias
        if self.cosine:
            mean, var = normalised_moments(mean, var)
        return mean.float(), var.float()
