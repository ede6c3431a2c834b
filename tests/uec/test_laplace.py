import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.autograd.functional import hessian, jacobian

from ucse.uec.laplace import DiagonalLaplace

TAU = 0.5


def _tiny(seed=0, n=5, f=3, d=2):
    g = torch.Generator().manual_seed(seed)
    pa = torch.randn(n, f, generator=g, dtype=torch.float64)
    pb = pa + 0.3 * torch.randn(n, f, generator=g, dtype=torch.float64)
    w = torch.randn(d, f, generator=g, dtype=torch.float64)
    b = 0.5 * torch.randn(d, generator=g, dtype=torch.float64)
    return pa, pb, w, b


def _logits_fn(pa, pb, d, f, cosine):
    def fn(theta):
        w, b = theta[: d * f].reshape(d, f), theta[d * f :]
        ya, yb = pa @ w.T + b, pb @ w.T + b
        if cosine:
            ya, yb = ya / ya.norm(dim=1, keepdim=True), yb / yb.norm(dim=1, keepdim=True)
        return ya @ yb.T / TAU

    return fn


def _brute(pa, pb, w, b, cosine, batch):
    """Brute-force diagonal GGN, EF, full Hessian and GGN residual summed over contiguous batches."""
    d, f = w.shape
    theta = torch.cat([w.flatten(), b])
    ggn = torch.zeros_like(theta)
    ef = torch.zeros_like(theta)
    full = torch.zeros_like(theta)
    resid_curv = torch.zeros_like(theta)
    loss = 0.0
    for s in range(0, len(pa), batch):
        fn = _logits_fn(pa[s : s + batch], pb[s : s + batch], d, f, cosine)
        logits = fn(theta)
        n = len(logits)
        target = torch.arange(n)
        jac = jacobian(fn, theta)  # (n, n, P)
        p = logits.softmax(1)
        for i in range(n):
            lam = torch.diag(p[i]) - torch.outer(p[i], p[i])
            ggn += torch.diagonal(jac[i].T @ lam @ jac[i])

        def row_losses(t, fn=fn, target=target):
            return F.cross_entropy(fn(t), target, reduction="none")

        per_sample = jacobian(row_losses, theta)  # (n, P)
        ef += (per_sample**2).sum(0)
        full += torch.diagonal(hessian(lambda t, rl=row_losses: rl(t).sum(), theta))
        second = jacobian(lambda t, fn=fn: jacobian(fn, t, create_graph=True), theta)  # (n, n, P, P)
        r = p - F.one_hot(target, n).double()
        resid_curv += torch.diagonal(torch.einsum("ij,ijpq->pq", r, second))
        loss += float(row_losses(theta).sum())
    return ggn, ef, full, resid_curv, loss


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("batch", [5, 3])
def test_diag_ggn_and_ef_match_brute_force(similarity, batch):
    pa, pb, w, b = _tiny()
    ggn, ef, full, resid_curv, loss = _brute(pa, pb, w, b, similarity == "cosine", batch)
    for kind, ref in (("ggn", ggn), ("ef", ef)):
        la = DiagonalLaplace(hessian=kind, temperature=TAU, similarity=similarity, batch_size=batch).fit(
            pa, pb, w, b
        )
        ours = torch.cat([la.h_weight.flatten(), la.h_bias])
        torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-10)
        assert la.log_lik == pytest.approx(-loss, rel=1e-12)
    # The GGN is exactly the Gauss-Newton part of the true Hessian: H = GGN + sum_ij r_ij d2 L_ij.
    torch.testing.assert_close(full, ggn + resid_curv, rtol=1e-8, atol=1e-9)
    assert not torch.allclose(ggn, ef)  # the two curvatures really differ on this problem


def test_marglik_prior_maximises_closed_form_evidence():
    pa, pb, w, b = _tiny(seed=1)
    grid = torch.logspace(-3, 3, 25)
    la = DiagonalLaplace(temperature=TAU, prior_grid=grid, batch_size=5).fit(pa, pb, w, b)
    ggn, _, _, _, loss = _brute(pa, pb, w, b, True, 5)
    sq = float((w**2).sum() + (b**2).sum())
    evid = torch.tensor(
        dtype=torch.float64,
        data=[
            -loss - 0.5 * d * sq + 0.5 * len(ggn) * math.log(d) - 0.5 * float(torch.log(ggn + d).sum())
            for d in grid.tolist()
        ],
    )
    assert la.prior_precision == pytest.approx(float(grid[int(evid.argmax())]))
    torch.testing.assert_close(la.grid_scores, evid, rtol=1e-9, atol=1e-9)
    assert 0 < int(evid.argmax()) < len(grid) - 1  # an interior optimum: the grid choice matters


def test_predictive_variance_matches_weight_sampling():
    pa, pb, w, b = _tiny(seed=2)
    la = DiagonalLaplace(temperature=TAU, batch_size=5).fit(pa, pb, w, b)
    phi = torch.randn(4, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    g = torch.Generator().manual_seed(4)
    n = 200_000
    sw = w + la.posterior_var_weight.sqrt() * torch.randn(n, *w.shape, generator=g, dtype=torch.float64)
    sb = b + la.posterior_var_bias.sqrt() * torch.randn(n, *b.shape, generator=g, dtype=torch.float64)
    out = torch.einsum("ndf,mf->nmd", sw, phi) + sb[:, None, :]  # (n, M, D)
    mc = out.var(0)
    # Relative s.e. of a Gaussian sample variance is sqrt(2/n) ~ 0.32%; allow ~6 s.e.
    torch.testing.assert_close(la.predict_var(phi).double(), mc, rtol=0.02, atol=0)
    torch.testing.assert_close(la.predict_mean(phi).double(), out.mean(0), rtol=0, atol=0.05)


def test_val_loss_prior_and_errors(tmp_path: Path):
    pa, pb, w, b = _tiny(seed=5, n=8)
    la = DiagonalLaplace(prior="val_loss", temperature=TAU, batch_size=4, prior_grid=[1e-2, 1.0, 1e8])
    with pytest.raises(ValueError, match="val_phi_a"):
        la.fit(pa, pb, w, b)
    la.fit(pa[:4], pb[:4], w, b, val_phi_a=pa[4:], val_phi_b=pb[4:])
    # With a huge prior precision the variance vanishes and the loss is the plain held-out InfoNCE.
    ya, yb = F.normalize(pa[4:] @ w.T + b, dim=1), F.normalize(pb[4:] @ w.T + b, dim=1)
    plain = F.cross_entropy(ya @ yb.T / TAU, torch.arange(4), reduction="sum")
    assert float(la.grid_scores[-1]) == pytest.approx(float(plain), rel=1e-6)
    assert la.prior_precision == float(la.prior_grid[int(la.grid_scores.argmin())])

    fresh = DiagonalLaplace()
    with pytest.raises(RuntimeError, match=r"call fit\(\) first"):
        fresh.predict_var(pa)
    with pytest.raises(ValueError, match="hessian='kfac'"):
        DiagonalLaplace(hessian="kfac")
    with pytest.raises(ValueError, match="F=3"):
        la.predict_var(torch.zeros(2, 4))

    la.save(tmp_path / "la")
    back = DiagonalLaplace.load(tmp_path / "la")
    assert back.prior_precision == la.prior_precision and back.prior.value == "val_loss"
    torch.testing.assert_close(back.predict_var(pa), la.predict_var(pa))


def test_laplace_torch_not_used():
    src = Path(__file__).parents[2].joinpath("ucse/uec/laplace.py").read_text()
    assert "import laplace" not in src and "from laplace" not in src
