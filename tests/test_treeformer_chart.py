"""The Treeformer chart against a naive memoised recursion over spans (same weights), padding,
batch invariance, the flat cross-attention memory and bf16 autocast."""

import functools

import pytest
import torch

from tree_fairseq.modules.treeformer_chart import Chart, TreeformerChart, span_padding_mask

DIM = 8
LENGTHS = (1, 2, 5, 9, 12)
LEFT_PAD = (False, True, False, True, True)


def naive_chart(chart: TreeformerChart, leaves: torch.Tensor) -> dict[tuple[int, int], torch.Tensor]:
    """``r_{i,j}`` of one unpadded sentence ``(n, d)`` by recursion over spans, memoised:
    every split's composition ``W·[r_{i,k}; r_{k+1,j}]``, pooled by attention against ``u``."""

    @functools.cache
    def span(i: int, j: int) -> torch.Tensor:
        if i == j:
            return leaves[i]
        compositions = torch.stack([chart.composition(span(i, k), span(k + 1, j)) for k in range(i, j)])
        weights = torch.softmax(compositions @ chart.pooling_query, dim=0)
        return (weights.unsqueeze(-1) * compositions).sum(0)

    length = leaves.size(0)
    return {
        (i, j): span(i, j) for i in range(length) for j in range(i + 1, min(length, i + chart.max_height + 1))
    }


@pytest.mark.parametrize("length, max_height", [(2, 10), (5, 10), (6, 3), (7, 1)])
def test_chart_matches_naive_recursion(length, max_height):
    torch.manual_seed(length)
    chart = TreeformerChart(DIM, max_height).double()
    torch.nn.init.normal_(chart.compose.bias)
    torch.nn.init.normal_(chart.compose_norm.weight)
    torch.nn.init.normal_(chart.pooling_query)  # a peaked pooling, far from the mean
    leaves = torch.randn(1, length, DIM, dtype=torch.float64, requires_grad=True)
    result = chart(leaves, torch.zeros(1, length, dtype=torch.bool))
    expected = naive_chart(chart, leaves[0])
    height = min(max_height, length - 1)
    assert result.cells.shape == (1, length, height, DIM) and result.padding_mask.shape == (1, length, height)
    for i in range(length):
        for h in range(1, height + 1):
            if (i, i + h) in expected:
                torch.testing.assert_close(result.cells[0, i, h - 1], expected[i, i + h], atol=1e-5, rtol=1e-5)
                assert not result.padding_mask[0, i, h - 1]
            else:
                assert result.padding_mask[0, i, h - 1] and torch.all(result.cells[0, i, h - 1] == 0)
    # The gradients agree too (the in-place chart stores must not break autograd).
    direction = torch.randn_like(result.cells)
    (grad,) = torch.autograd.grad((result.cells * direction).sum(), leaves)
    naive_loss = sum((value * direction[0, i, j - i - 1]).sum() for (i, j), value in expected.items())
    (naive_grad,) = torch.autograd.grad(naive_loss, leaves)
    torch.testing.assert_close(grad, naive_grad, atol=1e-5, rtol=1e-5)


def padded_batch(seed: int):
    width = max(LENGTHS)
    generator = torch.Generator().manual_seed(seed)
    leaves = torch.randn(len(LENGTHS), width, DIM, generator=generator)
    mask = torch.ones(len(LENGTHS), width, dtype=torch.bool)
    columns = []
    for b, (length, left) in enumerate(zip(LENGTHS, LEFT_PAD)):
        start = width - length if left else 0
        mask[b, start : start + length] = False
        columns.append(slice(start, start + length))
    leaves[mask] = 1e4  # padding content must not leak into any real cell
    return leaves, mask, columns


def test_span_padding_mask():
    mask = torch.tensor([[False, False, False, True], [True, False, False, False]])
    spans = span_padding_mask(mask, max_height=10)
    assert spans.shape == (2, 4, 3)
    # Real spans: [0,1], [0,2], [1,2] in the right-padded sentence; [1,2], [1,3], [2,3] in the left-padded one.
    real = {(b, i, i + h + 1) for b, i, h in (~spans).nonzero().tolist()}
    assert real == {(0, 0, 1), (0, 0, 2), (0, 1, 2), (1, 1, 2), (1, 1, 3), (1, 2, 3)}
    assert span_padding_mask(mask[:, :1], max_height=10).shape == (2, 1, 0)


@pytest.mark.parametrize("max_height", [3, 10])
def test_chart_is_batch_invariant(max_height):
    torch.manual_seed(0)
    chart = TreeformerChart(DIM, max_height)
    leaves, mask, columns = padded_batch(0)
    result = chart(leaves, mask)
    assert torch.isfinite(result.cells).all()
    assert torch.all(result.cells[result.padding_mask] == 0)
    for b, cols in enumerate(columns):
        alone = chart(leaves[b : b + 1, cols], torch.zeros(1, LENGTHS[b], dtype=torch.bool))
        height = alone.cells.size(2)
        assert not alone.padding_mask[0, : LENGTHS[b] - height].any()  # full-height rows are all real
        torch.testing.assert_close(result.cells[b : b + 1, cols, :height], alone.cells, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(result.padding_mask[b : b + 1, cols, :height], alone.padding_mask)
        # Nothing else of this sentence is a cell.
        assert result.padding_mask[b, :, height:].all()
        outside = torch.ones(mask.size(1), dtype=torch.bool)
        outside[cols] = False
        assert result.padding_mask[b, outside].all()


def test_padding_gradients_are_zero_and_finite():
    torch.manual_seed(0)
    chart = TreeformerChart(DIM, 4)
    leaves, mask, _ = padded_batch(1)
    leaves.requires_grad_(True)
    result = chart(leaves, mask)
    result.cells.square().sum().backward()
    assert torch.isfinite(leaves.grad).all()
    assert torch.all(leaves.grad[mask] == 0) and leaves.grad[~mask].abs().sum() > 0
    assert all(torch.isfinite(p.grad).all() for p in chart.parameters())


def test_flat_memory_for_cross_attention():
    torch.manual_seed(0)
    chart = TreeformerChart(DIM, 3)
    leaves, mask, _ = padded_batch(2)
    result = chart(leaves, mask)
    cells, cell_mask = result.flatten()
    batch_size, length = mask.shape
    assert cells.shape == (batch_size, 3 * length, DIM) and cell_mask.shape == (batch_size, 3 * length)
    # Index (h - 1)·n + i is the span [i, i + h].
    for h in range(1, 4):
        for i in (0, 5, length - 1):
            assert torch.equal(cells[:, (h - 1) * length + i], result.cells[:, i, h - 1])
            assert torch.equal(cell_mask[:, (h - 1) * length + i], result.padding_mask[:, i, h - 1])
    # Every sentence of >= 2 tokens has a cell to attend to; the one-token sentence has none.
    assert (~cell_mask).sum(-1).tolist() == [sum(max(n - h, 0) for h in range(1, 4)) for n in LENGTHS]
    order = torch.tensor([4, 4, 0])
    reordered = result.index_select(order)
    assert isinstance(reordered, Chart) and torch.equal(reordered.cells, result.cells[order])


def test_bf16_autocast_has_no_nan():
    torch.manual_seed(0)
    chart = TreeformerChart(DIM)
    leaves, mask, columns = padded_batch(3)
    leaves.requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = chart(leaves, mask)
    assert torch.isfinite(result.cells).all()
    assert torch.all(result.cells[result.padding_mask] == 0)
    reference = chart(leaves, mask).cells
    torch.testing.assert_close(result.cells.float(), reference, atol=0.1, rtol=0.1)  # bf16 keeps ~3 digits
    result.cells.float().sum().backward()
    assert torch.isfinite(leaves.grad).all()


def test_checkpointed_levels_give_the_same_values_and_gradients():
    torch.manual_seed(0)
    leaves, mask, _ = padded_batch(4)
    results = []
    for checkpoint_levels in (True, False):
        torch.manual_seed(1)
        chart = TreeformerChart(DIM, 5, checkpoint_levels=checkpoint_levels)
        inputs = leaves.clone().requires_grad_(True)
        cells = chart(inputs, mask).cells
        cells.square().sum().backward()
        results.append((cells, inputs.grad, chart.compose.weight.grad, chart.pooling_query.grad))
    for with_checkpoint, without in zip(*results):
        torch.testing.assert_close(with_checkpoint, without)
