"""Aligning members of different embedding spaces before convolution (orthogonal Procrustes).

Gaussian convolution adds member vectors coordinate by coordinate, which is meaningless across spaces
that are not aligned (trained heads of different backbones, models of different widths). Each such
member k gets a map R_k (D_k, D) with orthonormal rows or columns, fitted on the train texts' unit
means X_k (N, D_k) against a reference member's X (N, D):

    R_k = argmin ||X_k R - X||_F  s.t.  R^T R = I (or R R^T = I when D_k > D)  =  U V^T,
    with U S V^T = svd(X_k^T X)   (Schonemann's solution; scipy.linalg.orthogonal_procrustes for square).

The mean maps to mu R; the diagonal covariance maps to R^T diag(var) R, of which the diagonal
var'_j = sum_i R_ij^2 var_i is kept (the member keeps a diagonal Gaussian, as the convolution needs);
a projection's shortened means are rescaled to unit norm with their variances.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ucse.core.gaussian import GaussianEmbeddings


class AlignmentError(ValueError):
    """A member that cannot be aligned to the reference space."""


@dataclass
class ProcrustesMap:
    """Orthogonal map of one member into the reference space.

    Attributes:
        rotation: (D_k, D) float64, orthonormal columns (D_k >= D) or rows (D_k < D).
        member: member id (for errors).
        fit_residual: relative residual ||X_k R - X||_F / ||X||_F on the fitting texts.
        rank: numerical rank of the cross-covariance X_k^T X (at most min(D_k, D)).
    """

    rotation: torch.Tensor
    member: str = "?"
    fit_residual: float = float("nan")
    rank: int = -1

    def apply(self, g: GaussianEmbeddings) -> GaussianEmbeddings:
        """The (N, D) aligned Gaussian: mean mu R (renormalised), diagonal of R^T diag(var) R."""
        if g.dim != self.rotation.shape[0]:
            raise AlignmentError(
                f"member {self.member}: alignment was fitted for dim {self.rotation.shape[0]}, got {g.dim}"
            )
        r = self.rotation
        mean = g.mean.double() @ r  # (N, D)
        var = g.var.double() @ r**2  # (N, D): diag(R^T diag(var) R)
        # A projection (D_k > D) shortens means: rescale back to unit norm (exact no-op for a rotation).
        norm = mean.norm(dim=1, keepdim=True).clamp_min(1e-12)
        mean, var = mean / norm, var / norm**2
        return GaussianEmbeddings(mean, var, {**g.meta, "aligned": True})


def fit_procrustes(source: torch.Tensor, target: torch.Tensor, member: str = "?") -> ProcrustesMap:
    """Orthogonal Procrustes map R (D_k, D) with source @ R ~ target.

    Args:
        source: (N, D_k) the member's unit means of the fitting texts.
        target: (N, D) the reference member's unit means of the same texts.
        member: member id for error messages.

    Raises:
        AlignmentError: too few texts (N < min(D_k, D)), non-finite inputs, or a rank-deficient fit.
    """
    x, y = torch.as_tensor(source).double(), torch.as_tensor(target).double()
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
        raise AlignmentError(
            f"member {member}: alignment needs (N, D_k) and (N, D) means of the same N texts, got "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    need = min(x.shape[1], y.shape[1])
    if len(x) < need:
        raise AlignmentError(
            f"member {member}: cannot align a {x.shape[1]}-d space to a {y.shape[1]}-d one from "
            f"{len(x)} texts; an orthogonal map needs >= {need} fitting texts (use more train texts, "
            "members of one space, or `align: blocks` in the ensemble config: each member in its own block, "
            "no map)"
        )
    if not (bool(torch.isfinite(x).all()) and bool(torch.isfinite(y).all())):
        raise AlignmentError(f"member {member}: non-finite means in the alignment texts")
    u, s, vh = torch.linalg.svd(x.T @ y, full_matrices=False)  # (D_k, r), (r,), (r, D)
    # Real embeddings span slightly fewer directions than their width (all-MiniLM-L6-v2 and all-mpnet-base-v2
    # each lose two to their final LayerNorm: rank 382 of 384 and 766 of 768 on STS texts). U V^T is still a
    # minimiser then, arbitrary only along directions no fitting text uses. A member sharing less than half
    # of the reference's directions (a dead or collapsed one) is not alignable.
    rank = int((s > 1e-9 * s[0]).sum()) if float(s[0]) > 0 else 0
    if rank < (need + 1) // 2:
        raise AlignmentError(
            f"member {member}: the cross-covariance of the two spaces is rank-deficient (rank {rank} of "
            f"{need}; singular values {float(s[0]):.3g} ... {float(s[-1]):.3g}); the spaces cannot be "
            "aligned (`align: blocks` in the ensemble config keeps each member in its own block, with no map)"
        )
    rotation = u @ vh  # (D_k, D)
    resid = float((x @ rotation - y).norm() / y.norm())
    return ProcrustesMap(rotation, member, resid, rank)
