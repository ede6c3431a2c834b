"""KL regulariser of the Gaussian embedding towards N(0, I) (paper Eq. 5)."""

from __future__ import annotations

import torch

from ucse.losses.precision import at_least_fp32


def gaussian_kl(mean: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
    """``L_KL`` of Eq. 5: ``KL(N(mu, diag sigma^2) || N(0, I))``, summed over D, averaged over B.

    ``KL_i = 0.5 * sum_d (mu_d^2 + sigma_d^2 - log sigma_d^2 - 1)`` (closed form for diagonal Gaussians).

    Args:
        mean: (B, D) mu.
        log_var: (B, D) log sigma^2 (``HeadOutput.log_var``).

    Returns:
        Scalar loss (fp32), >= 0, zero iff mu = 0 and sigma = 1.
    """
    if mean.shape != log_var.shape:
        raise ValueError(
            f"mean {tuple(mean.shape)} and log_var {tuple(log_var.shape)} must have one shape (B, D)."
        )
    mean, log_var = at_least_fp32(mean), at_least_fp32(log_var)
    kl = 0.5 * (mean.pow(2) + log_var.exp() - log_var - 1.0)  # (B, D)
    return kl.sum(dim=1).mean()
