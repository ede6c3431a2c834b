import pytest
import torch

from ucse.uec.fusion import (
    borda_count,
    reciprocal_rank_fusion,
    select_alpha,
    select_weights,
    simplex_grid,
    task_arithmetic,
    uniform_ensemble,
    weighted_ensemble,
)


def test_uniform_and_weighted_ensembles_on_hand_made_vectors():
    a = torch.tensor([[3.0, 0.0], [0.0, 2.0]])
    b = torch.tensor([[0.0, 5.0], [0.0, 1.0]])
    torch.testing.assert_close(uniform_ensemble([a, b]), torch.tensor([[0.5, 0.5], [0.0, 1.0]]))
    torch.testing.assert_close(
        weighted_ensemble([a, b], [0.25, 0.75]), torch.tensor([[0.25, 0.75], [0.0, 1.0]])
    )
    with pytest.raises(ValueError, match="sum to 1"):
        weighted_ensemble([a, b], [0.5, 0.6])
    with pytest.raises(ValueError, match="same shape"):
        uniform_ensemble([a, torch.zeros(2, 3)])


def test_simplex_grid_matches_paper_and_selection():
    grid = simplex_grid(3)
    assert grid.shape == (36, 3)  # compositions of 10 into 3 parts >= 1: C(9, 2)
    assert torch.allclose(grid.sum(1), torch.ones(36, dtype=torch.float64))
    assert [0.1, 0.1, 0.8] in grid.round(decimals=6).tolist() and [0.8, 0.1, 0.1] in grid.round(
        decimals=6
    ).tolist()
    assert float(grid.min()) == pytest.approx(0.1)
    target = torch.tensor([[0.0, 1.0]])
    members = [torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 1.0]])]
    best, scores = select_weights(members, lambda e: -float(((e - target) ** 2).sum()))
    assert best.tolist() == pytest.approx([0.1, 0.8, 0.1])
    assert scores.shape == (36,)


def test_task_arithmetic_and_alpha_selection():
    a, b, c = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 3.0]]), torch.tensor([[1.0, 0.0]])
    torch.testing.assert_close(task_arithmetic(a, b, c, 0.5), torch.tensor([[0.5, 0.5]]))
    alpha, scores = select_alpha(a, b, c, lambda e: -abs(float(e[0, 0]) - 0.9))
    assert alpha == 0.1 and scores.shape == (5,)


def test_borda_and_rrf_on_hand_made_rankings():
    # Member 1 ranks docs 0 > 1 > 2 > 3, member 2 ranks 2 > 1 > 0 > 3; Borda gives (L - rank) points.
    s1 = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    s2 = torch.tensor([[2.0, 3.0, 4.0, 1.0]])
    torch.testing.assert_close(borda_count([s1, s2]), torch.tensor([[6.0, 6.0, 6.0, 2.0]]))
    torch.testing.assert_close(borda_count([s1, s2], depth=2), torch.tensor([[2.0, 2.0, 2.0, 0.0]]))
    rrf = reciprocal_rank_fusion([s1, s2])
    expected = torch.tensor([[1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61, 2 / 64]])
    torch.testing.assert_close(rrf, expected)
    assert int(rrf.argmax()) in (0, 2) and int(rrf.argmin()) == 3
    rrf2 = reciprocal_rank_fusion([s1, s2], depth=1)
    torch.testing.assert_close(rrf2, torch.tensor([[1 / 61, 0.0, 1 / 61, 0.0]]))
    # A third member breaks the Borda tie in favour of doc 1.
    s3 = torch.tensor([[1.0, 4.0, 3.0, 2.0]])
    assert int(borda_count([s1, s2, s3]).argmax()) == 1
