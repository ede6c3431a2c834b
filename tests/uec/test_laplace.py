import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.autograd.functional import hessian, jacobian

from ucse.uec.laplace import DiagonalLaplace
from ucse.uec.laplace_io import load_laplace, save_laplace

TAU = 0.5


def _tiny(seed=0, n=5, f=3, d=2):
    g = torch.Generator().manual_seed(seed)
    pa = torch.randn(n, f, generator=g, dtype=torch.float64)
    pb = pa + 0.3 * torch.randn(n, f, generator=g, dtype=torch.float64)
    w = torch.randn(d, f, generator=g, dtype=torch.float64)
    b = 0.5 * torch.randn(d, generator=g, dtype=torch.float64)
    return pa, pb, w, b


def _logits_fn(pa, pb, d, f, cosine, mask=None):
    def fn(theta):
        w, b = theta[: d * f].reshape(d, f), theta[d * f :]
        ya, yb = pa @ w.T + b, pb @ w.T + b
        if cosine:
            ya, yb = ya / ya.norm(dim=1, keepdim=True), yb / yb.norm(dim=1, keepdim=True)
        logits = ya @ yb.T / TAU
        # A masked negative is simply absent: -1e4 / TAU-scale logits carry exactly zero probability.
        return logits if mask is None else logits.masked_fill(mask, -1e30)

    return fn


def _brute(pa, pb, w, b, cosine, batch, groups=None):
    """Brute-force diagonal GGN, EF, full Hessian and GGN residual summed over contiguous batches."""
    d, f = w.shape
    theta = torch.cat([w.flatten(), b])
    ggn = torch.zeros_like(theta)
    ef = torch.zeros_like(theta)
    full = torch.zeros_like(theta)
    resid_curv = torch.zeros_like(theta)
    loss = 0.0
    for s in range(0, len(pa), batch):
        mask = None
        if groups is not None:
            g = groups[s : s + batch]
            mask = (g[:, None] == g[None, :]) & ~torch.eye(len(g), dtype=torch.bool)
        fn = _logits_fn(pa[s : s + batch], pb[s : s + batch], d, f, cosine, mask)
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
        la = DiagonalLaplace(
            hessian=kind, temperature=TAU, similarity=similarity, batch_size=batch, refine_steps=0
        ).fit(pa, pb, w, b)
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
    # The evidence is taken at the refined MAP, with the prior centred on the pretrained (w, b).
    ggn, _, _, _, loss = _brute(pa, pb, la.weight, la.bias, True, 5)
    sq = float(((la.weight - w) ** 2).sum() + ((la.bias - b) ** 2).sum())
    assert sq > 1e-3  # the refinement really moved the map
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
    w, b = la.weight, la.bias  # the posterior is centred on the refined MAP
    sw = w + la.posterior_var_weight.sqrt() * torch.randn(n, *w.shape, generator=g, dtype=torch.float64)
    sb = b + la.posterior_var_bias.sqrt() * torch.randn(n, *b.shape, generator=g, dtype=torch.float64)
    out = torch.einsum("ndf,mf->nmd", sw, phi) + sb[:, None, :]  # (n, M, D)
    mc = out.var(0)
    # Relative s.e. of a Gaussian sample variance is sqrt(2/n) ~ 0.32%; allow ~6 s.e.
    torch.testing.assert_close(la.predict_var(phi).double(), mc, rtol=0.02, atol=0)
    torch.testing.assert_close(la.predict_mean(phi).double(), out.mean(0), rtol=0, atol=0.05)


def test_val_loss_prior_and_errors(tmp_path: Path):
    pa, pb, w, b = _tiny(seed=5, n=8)
    la = DiagonalLaplace(
        prior="val_loss", temperature=TAU, batch_size=4, prior_grid=[1e-2, 1.0, 1e8], refine_steps=0
    )
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

    save_laplace(la, tmp_path / "la")
    back = load_laplace(tmp_path / "la")
    assert back.prior_precision == la.prior_precision and back.prior.value == "val_loss"
    torch.testing.assert_close(back.predict_var(pa), la.predict_var(pa))


def test_masked_positives_match_brute_force():
    pa, pb, w, b = _tiny(seed=7, n=6)
    groups = torch.tensor([0, 0, 1, 2, 2, 2])  # pairs 0-1 and 3-5 share a query: not negatives of each other
    ggn, ef, _, _, loss = _brute(pa, pb, w, b, True, 6, groups)
    for kind, ref in (("ggn", ggn), ("ef", ef)):
        la = DiagonalLaplace(hessian=kind, temperature=TAU, batch_size=6, refine_steps=0)
        la.fit(pa, pb, w, b, groups=groups)
        torch.testing.assert_close(torch.cat([la.h_weight.flatten(), la.h_bias]), ref, rtol=1e-9, atol=1e-10)
        assert la.log_lik == pytest.approx(-loss, rel=1e-12)
    unmasked = DiagonalLaplace(temperature=TAU, batch_size=6, refine_steps=0).fit(pa, pb, w, b)
    assert unmasked.log_lik < la.log_lik  # masking removes competitors: a strictly larger likelihood


def test_map_is_a_stationary_point_and_pretrained_is_not():
    pa, pb, w, b = _tiny(seed=8, n=12, f=3, d=3)
    w = torch.eye(3, dtype=torch.float64) + 0.3 * w  # as a member uses it: a square map near identity
    la = DiagonalLaplace(temperature=TAU, batch_size=6, prior_grid=torch.logspace(-2, 2, 9)).fit(pa, pb, w, b)
    g_map, norm_map = la.objective_grad_norm(pa, pb)
    # The same objective at the pretrained weights (prior term 0 there): far from stationary.
    start = DiagonalLaplace(temperature=TAU, batch_size=6, refine_steps=0).fit(pa, pb, w, b)
    start.prior_precision = la.prior_precision
    g_pre, norm_pre = start.objective_grad_norm(pa, pb)
    assert g_map / norm_map < 1e-6
    assert g_pre / norm_pre > 1e-2
    assert la.diagnostics["nll_map"] < la.diagnostics["nll_pretrained"]
    assert la.prior_precision in la.diagnostics["delta_history"]


def test_rounds_that_run_out_still_end_at_the_mode_of_the_chosen_prior():
    # One evidence round moves delta from its start (1.0) and the rounds end there: the MAP is refined once
    # more at the chosen delta (before, it stayed the MAP of delta = 1 under a posterior built for the other).
    pa, pb, w, b = _tiny(seed=8, n=12, f=3, d=3)
    w = torch.eye(3, dtype=torch.float64) + 0.3 * w
    grid = torch.logspace(-2, 2, 9)
    one = DiagonalLaplace(temperature=TAU, batch_size=6, prior_grid=grid, evidence_rounds=1).fit(pa, pb, w, b)
    assert one.diagnostics["delta_history"] == [one.prior_precision] and one.prior_precision != 1.0
    g_map, norm_map = one.objective_grad_norm(pa, pb)
    assert g_map / norm_map < 1e-6
    one.prior_precision = 1.0  # the same weights under the first round's delta: not stationary there, so
    g_one, norm_one = one.objective_grad_norm(pa, pb)  # the check above tells the two deltas' modes apart
    assert g_one / norm_one > 1e-4


def test_scored_space_variance_matches_monte_carlo():
    """predict() gives the moments of y / ||y||, y = W phi + b with W, b drawn from the posterior."""
    pa, pb, w, b = _tiny(seed=9, n=10, f=3, d=3)
    la = DiagonalLaplace(temperature=TAU, batch_size=5, prior_grid=[300.0]).fit(pa, pb, w, b)
    phi = torch.randn(4, 3, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    g = torch.Generator().manual_seed(11)
    n = 200_000
    sw = la.weight + la.posterior_var_weight.sqrt() * torch.randn(n, 3, 3, generator=g, dtype=torch.float64)
    sb = la.bias + la.posterior_var_bias.sqrt() * torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.einsum("ndf,mf->nmd", sw, phi) + sb[:, None, :]
    u = y / y.norm(dim=-1, keepdim=True)  # the scored (cosine) embedding
    mean, var = la.predict(phi)
    torch.testing.assert_close(mean.norm(dim=1), torch.ones(4, dtype=torch.float32))
    # Linearisation error is O(var^2): with var ~ 1e-3 the MC variance agrees to a few percent.
    assert float(var.max()) < 0.05
    torch.testing.assert_close(var.double(), u.var(0), rtol=0.08, atol=1e-6)
    torch.testing.assert_close(mean.double(), u.mean(0), rtol=0, atol=0.02)


def test_load_validates_what_it_reads(tmp_path: Path):
    from safetensors.torch import load_file, save_file

    pa, pb, w, b = _tiny(seed=12)
    la = DiagonalLaplace(temperature=TAU, batch_size=5, refine_steps=0).fit(pa, pb, w, b)
    folder = save_laplace(la, tmp_path / "ok")
    back = load_laplace(folder)
    torch.testing.assert_close(back.predict(pa)[1], la.predict(pa)[1])

    def broken(name, edit):
        dst = tmp_path / name
        dst.mkdir()
        (dst / "laplace.json").write_text((folder / "laplace.json").read_text())
        tensors = load_file(str(folder / "laplace.safetensors"))
        edit(dst, tensors)
        if tensors is not None:
            save_file(tensors, str(dst / "laplace.safetensors"))
        return dst

    cases = {
        "neg": (lambda d, t: t["h_weight"].__setitem__((0, 0), -1.0), "h_weight.*negative"),
        "nan": (lambda d, t: t["bias"].__setitem__(0, float("nan")), "'bias' has non-finite"),
        "shape": (
            lambda d, t: t.__setitem__("h_bias", torch.ones(7, dtype=torch.float64)),
            "'h_bias' has shape",
        ),
        "delta": (
            lambda d, t: (d / "laplace.json").write_text(
                (d / "laplace.json").read_text().replace('"prior_precision":', '"prior_precision": -1, "x":')
            ),
            "prior_precision",
        ),
        # these loaded before and failed later: a float32 curvature in predict (double != float), a string
        # score in torch.tensor (TypeError), a list of diagnostics where a run updates a dict
        "dtype": (lambda d, t: t.__setitem__("h_weight", t["h_weight"].float()), "share one float dtype"),
        "grid": (lambda d, t: _edit_json(d, grid_scores="x"), "'grid_scores' must be one number per"),
        "diagnostics": (lambda d, t: _edit_json(d, diagnostics=[1]), "'diagnostics' an object"),
        "log_lik": (lambda d, t: _edit_json(d, log_lik=True), "'log_lik' must be a number"),
    }
    for name, (edit, match) in cases.items():
        with pytest.raises(ValueError, match=match) as err:
            load_laplace(broken(name, edit))
        assert "laplace." in str(err.value)  # the error names the file
    trunc = tmp_path / "trunc"
    trunc.mkdir()
    (trunc / "laplace.json").write_text((folder / "laplace.json").read_text())
    (trunc / "laplace.safetensors").write_bytes((folder / "laplace.safetensors").read_bytes()[:100])
    with pytest.raises(ValueError, match="laplace.safetensors"):
        load_laplace(trunc)


def _edit_json(folder: Path, **fields) -> None:
    path = folder / "laplace.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def test_laplace_torch_not_used():
    src = Path(__file__).parents[2].joinpath("ucse/uec/laplace.py").read_text()
    assert "import laplace" not in src and "from laplace" not in src
