import pytest
import torch

from ucse.core.gaussian import GaussianEmbeddings
from ucse.uec.convolution import convolve, paper_temperature


def _members(k=3, n=4, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(k):
        mean = torch.randn(n, d, generator=g) * (1 + i)  # un-normalised on purpose
        var = (0.05 + torch.rand(n, d, generator=g)) * (1 + i) ** 2 * (0.2 + i)
        out.append(GaussianEmbeddings(mean, var, {"member": f"m{i}"}))
    return out


def test_fused_moments_match_monte_carlo():
    members = _members(k=3, n=2, d=4)
    res = convolve(members, rule="inverse_trace", temperature=0.7)
    normed = [m.normalized() for m in members]
    n = 200_000
    g = torch.Generator().manual_seed(1)
    z = sum(
        res.weights[:, k, None].double()
        * (m.mean.double() + m.var.double().sqrt() * torch.randn(n, 2, 4, generator=g, dtype=torch.float64))
        for k, m in enumerate(normed)
    )  # (n, 2, 4) samples of sum_k pi_k z_k with independent members
    mc_mean, mc_var = z.mean(0), z.var(0)
    assert bool(((mc_mean - res.fused.mean.double()).abs() < 5 * (mc_var / n).sqrt()).all())
    torch.testing.assert_close(res.fused.var.double(), mc_var, rtol=5 * (2 / n) ** 0.5, atol=0)


def test_rules_follow_paper_equations():
    members = _members()
    normed = [m.normalized() for m in members]
    tr = torch.stack([m.var.double().sum(1) for m in normed], 1)  # (N, K)
    # Eq. 4 at T = 1: pi_k = (1/tr_k) / sum_j (1/tr_j).
    w = convolve(members, "inverse_trace").weights.double()
    torch.testing.assert_close(w, (1 / tr) / (1 / tr).sum(1, keepdim=True), rtol=1e-5, atol=1e-7)
    # Eq. 8 on raw members: cost = tr + ||mu||^2.
    cost = torch.stack([m.var.double().sum(1) + (m.mean.double() ** 2).sum(1) for m in members], 1)
    w = convolve(members, "inverse_cost", normalize=False).weights.double()
    torch.testing.assert_close(w, (1 / cost) / (1 / cost).sum(1, keepdim=True), rtol=1e-5, atol=1e-7)
    # Paper semantics (default "sharpen"): T = 2 squares the inverse weights before normalising.
    w = convolve(members, "inverse_trace", temperature=2.0).weights.double()
    torch.testing.assert_close(w, tr**-2 / (tr**-2).sum(1, keepdim=True), rtol=1e-5, atol=1e-7)
    # "divide": T = 0.5 does the same by dividing.
    w = convolve(members, "inverse_trace", temperature=0.5, temperature_mode="divide").weights.double()
    torch.testing.assert_close(w, tr**-2 / (tr**-2).sum(1, keepdim=True), rtol=1e-5, atol=1e-7)
    w = convolve(members, "softmax_trace", temperature=2.0, temperature_mode="divide").weights.double()
    torch.testing.assert_close(w, torch.softmax(-tr / 2.0, 1), rtol=1e-5, atol=1e-7)
    prec = torch.stack([(1 / m.var.double()).sum(1) for m in normed], 1)
    w = convolve(members, "softmax_precision", temperature=0.02).weights.double()
    torch.testing.assert_close(w, torch.softmax(prec * 0.02, 1), rtol=1e-5, atol=1e-7)
    # Less uncertain member gets more weight (member 0 has the smallest variances by construction).
    assert bool((convolve(members).weights.argmax(1) == 0).all())


def test_temperature_semantics_by_hand():
    """Traces [1, 3]: Eq. 4 gives [0.75, 0.25]; the paper's sharpening T = 1.5 gives 1 : 3^-1.5."""
    mean = torch.tensor([[1.0, 0.0]])
    a = GaussianEmbeddings(mean, torch.tensor([[0.5, 0.5]]), {"member": "a"})
    b = GaussianEmbeddings(mean, torch.tensor([[1.5, 1.5]]), {"member": "b"})
    assert convolve([a, b]).weights[0].tolist() == pytest.approx([0.75, 0.25])
    sharp = 1 / (1 + 3**-1.5)
    assert convolve([a, b], temperature=1.5).weights[0].tolist() == pytest.approx(
        [sharp, 1 - sharp], rel=1e-6
    )
    flat = 1 / (1 + 3 ** (-1 / 1.5))
    got = convolve([a, b], temperature=1.5, temperature_mode="divide").weights[0].tolist()
    assert got == pytest.approx([flat, 1 - flat], rel=1e-6)
    assert paper_temperature("mteb") == 1.8 and paper_temperature("MIRACL") == 1.5
    with pytest.raises(ValueError, match="temperature_mode='hot'"):
        convolve([a, b], temperature_mode="hot")


def test_weights_are_per_row_without_leakage():
    members = _members(n=6)
    base = convolve(members).weights
    perm = torch.tensor([5, 3, 0, 1, 4, 2])
    permuted = [GaussianEmbeddings(m.mean[perm], m.var[perm], m.meta) for m in members]
    torch.testing.assert_close(convolve(permuted).weights, base[perm])
    extra = _members(n=3, seed=9)
    # Added rows with very different (1000x) variances must not move the original rows' weights, as a
    # batch-level statistic (the reference code's leak) would.
    grown = [
        GaussianEmbeddings(torch.cat([m.mean, e.mean]), torch.cat([m.var, e.var * 1e3]), m.meta)
        for m, e in zip(members, extra, strict=True)
    ]
    for rule in ("inverse_trace", "inverse_cost", "softmax_trace", "softmax_precision"):
        torch.testing.assert_close(convolve(grown, rule).weights[:6], convolve(members, rule).weights)


def test_errors_and_zero_variance():
    a = GaussianEmbeddings(torch.randn(3, 4), torch.rand(3, 4), {"member": "e5"})
    b = GaussianEmbeddings(torch.randn(3, 6), torch.rand(3, 6), {"member": "bge"})
    with pytest.raises(ValueError, match=r"'#0 e5': 4, '#1 bge': 6"):
        convolve([a, b])
    # two members of one name: the checks keyed them by name alone and let torch.stack fail instead
    b.meta["member"] = "e5"
    with pytest.raises(ValueError, match=r"different dimensions \{'#0 e5': 4, '#1 e5': 6\}"):
        convolve([a, b])
    short = GaussianEmbeddings(torch.randn(2, 4), torch.rand(2, 4), {"member": "e5"})
    with pytest.raises(ValueError, match=r"different numbers of rows \{'#0 e5': 3, '#1 e5': 2\}"):
        convolve([a, short])
    with pytest.raises(ValueError, match="rule='median'"):
        convolve([a, a], rule="median")
    with pytest.raises(ValueError, match="temperature"):
        convolve([a, a], temperature=-0.5)
    with pytest.raises(ValueError, match="temperature"):
        convolve([a, a], temperature=0.0, temperature_mode="divide")
    # T = 0 in sharpen mode: softmax of zeros, equal weights whatever the traces
    c = GaussianEmbeddings(torch.randn(3, 4), 50 * torch.rand(3, 4), {"member": "c"})
    torch.testing.assert_close(convolve([a, c], temperature=0.0).weights, torch.full((3, 2), 0.5))
    zero = GaussianEmbeddings(a.mean, torch.zeros(3, 4), {"member": "z"})
    res = convolve([zero, zero])
    assert torch.isfinite(res.weights).all()
    torch.testing.assert_close(res.weights, torch.full((3, 2), 0.5))
    torch.testing.assert_close(res.fused.mean, zero.normalized().mean)
    assert res.fused.var.abs().max() == 0
