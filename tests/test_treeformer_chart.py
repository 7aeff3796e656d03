"""The Treeformer chart against eqs. 1-2 computed by hand (loops over spans and splits, same
weights), for the paper's forms and the options; the height count (H tokens at most); loading
checkpoints of the earlier forms and height count; padding, batch invariance, the flat
cross-attention memory and bf16 autocast."""

import math

import pytest
import torch
import torch.nn.functional as F

from tree_fairseq.modules.treeformer_chart import Chart, TreeformerChart, span_padding_mask

DIM = 8
LENGTHS = (1, 2, 5, 9, 12)
LEFT_PAD = (False, True, False, True, True)
FORMS = [("linear", "query_key"), ("gelu_layernorm", "vector"), ("linear", "vector"), ("gelu_layernorm", "query_key")]


def chart_by_hand(chart: TreeformerChart, leaves: torch.Tensor) -> dict[tuple[int, int], torch.Tensor]:
    """``r_{i,j}`` of one unpadded sentence ``(n, d)`` for every span of 2 … H tokens, shortest
    first, with one loop over the splits ``i <= k < j`` of each span:

    eq. 1   c_k = W·[r_{i,k}; r_{k+1,j}]    (``gelu_layernorm``: LayerNorm(GELU(W·[…] + b)))
    eq. 2   r_{i,j} = Σ_k exp(s_k) / Σ_k' exp(s_k') · c_k,   s_k = K c_k · Q w / √d
            (``vector``: s_k = u · c_k)
    """
    length, dim = leaves.shape
    weight = chart.compose.weight  # (d, 2d)
    r = {(i, i): leaves[i] for i in range(length)}
    for span in range(2, min(chart.max_height, length) + 1):
        for i in range(length - span + 1):
            j = i + span - 1
            compositions, scores = [], []
            for k in range(i, j):
                c = weight @ torch.cat([r[i, k], r[k + 1, j]])
                if chart.composition_form == "gelu_layernorm":
                    c = F.layer_norm(F.gelu(c + chart.compose.bias), (dim,), chart.compose_norm.weight,
                                     chart.compose_norm.bias)
                if chart.pooling_form == "query_key":
                    score = (chart.pool_key.weight @ c) @ (chart.pool_query.weight @ chart.pool_w) / math.sqrt(dim)
                else:
                    score = chart.pooling_query @ c
                compositions.append(c)
                scores.append(score)
            total = sum(torch.exp(score) for score in scores)
            r[i, j] = sum(torch.exp(score) / total * c for score, c in zip(scores, compositions))
    return {span: value for span, value in r.items() if span[1] > span[0]}


def randomise(chart: TreeformerChart):
    """Parameters far from their initial values: a peaked pooling, biases and norms that matter."""
    for parameter in chart.parameters():
        torch.nn.init.normal_(parameter, std=0.5 if parameter.dim() == 2 else 1.0)


@pytest.mark.parametrize("composition, pooling", FORMS)
@pytest.mark.parametrize("length, max_height", [(2, 10), (5, 10), (6, 3), (7, 2), (4, 1)])
def test_chart_matches_equations_by_hand(length, max_height, composition, pooling):
    torch.manual_seed(length)
    chart = TreeformerChart(DIM, max_height, composition=composition, pooling=pooling).double()
    randomise(chart)
    leaves = torch.randn(1, length, DIM, dtype=torch.float64, requires_grad=True)
    result = chart(leaves, torch.zeros(1, length, dtype=torch.bool))
    expected = chart_by_hand(chart, leaves[0])
    levels = min(max_height, length) - 1
    assert result.cells.shape == (1, length, levels, DIM) and result.padding_mask.shape == (1, length, levels)
    for i in range(length):
        for span in range(2, levels + 2):
            if (i, i + span - 1) in expected:
                torch.testing.assert_close(result.cells[0, i, span - 2], expected[i, i + span - 1],
                                           atol=1e-10, rtol=1e-10)
                assert not result.padding_mask[0, i, span - 2]
            else:
                assert result.padding_mask[0, i, span - 2] and torch.all(result.cells[0, i, span - 2] == 0)
    assert len(expected) == int((~result.padding_mask).sum())
    if not expected:
        return
    # The gradients agree too, for the tokens and every parameter.
    direction = torch.randn_like(result.cells)
    inputs = [leaves, *chart.parameters()]
    grads = torch.autograd.grad((result.cells * direction).sum(), inputs)
    by_hand = sum((value * direction[0, i, j - i - 1]).sum() for (i, j), value in expected.items())
    for grad, grad_by_hand in zip(grads, torch.autograd.grad(by_hand, inputs)):
        torch.testing.assert_close(grad, grad_by_hand, atol=1e-9, rtol=1e-9)


def test_the_paper_forms_are_the_default():
    chart = TreeformerChart(DIM)
    assert (chart.max_height, chart.composition_form, chart.pooling_form) == (10, "linear", "query_key")
    assert chart.compose.bias is None and chart.compose_norm is None and chart.pooling_query is None
    shapes = {name: tuple(parameter.shape) for name, parameter in chart.named_parameters()}
    assert shapes == {"compose.weight": (DIM, 2 * DIM), "pool_key.weight": (DIM, DIM),
                      "pool_query.weight": (DIM, DIM), "pool_w": (DIM,)}


def test_height_counts_tokens():
    """H = 10: the longest span is 10 tokens (the tokens are height 1), built in 9 steps."""
    torch.manual_seed(0)
    length = 12
    chart = TreeformerChart(DIM, max_height=10).double()
    randomise(chart)
    leaves = torch.randn(1, length, DIM, dtype=torch.float64)
    result = chart(leaves, torch.zeros(1, length, dtype=torch.bool))
    assert result.cells.shape == (1, length, 9, DIM)
    real_spans = {(i, i + level + 1) for _, i, level in (~result.padding_mask).nonzero().tolist()}
    assert max(j - i + 1 for i, j in real_spans) == 10
    assert real_spans == {(i, j) for i in range(length) for j in range(i + 1, min(i + 10, length))}
    # The three spans of 10 tokens, as eqs. 1-2 give them.
    expected = chart_by_hand(chart, leaves[0])
    for i in range(3):
        torch.testing.assert_close(result.cells[0, i, 8], expected[i, i + 9], atol=1e-10, rtol=1e-10)
    # A sentence of exactly H tokens has its root; H = 1 is the tokens alone.
    assert not chart(leaves[:, :10], torch.zeros(1, 10, dtype=torch.bool)).padding_mask[0, 0, -1]
    assert TreeformerChart(DIM, max_height=1)(leaves.float(), torch.zeros(1, length, dtype=torch.bool)).cells.shape \
        == (1, length, 0, DIM)


@pytest.mark.parametrize("composition, pooling", FORMS)
def test_checkpoints_of_the_earlier_height_count_and_forms_load(composition, pooling):
    """A checkpoint without the ``version`` entry counted H above the tokens (spans of H + 1
    tokens): it loads with its forms into a chart of the default forms and keeps its span length,
    also once saved again."""
    torch.manual_seed(0)
    trained = TreeformerChart(DIM, 5, composition=composition, pooling=pooling)  # spans of <= 5 tokens
    randomise(trained)
    old = {f"chart.{key}": value for key, value in trained.state_dict().items() if key != "version"}
    leaves, mask, _ = padded_batch(5)
    expected = trained(leaves, mask)

    def load(state):
        chart = TreeformerChart(DIM, 4)  # the old run's --chart-max-height 4
        state = dict(state)
        chart.upgrade_state_dict_named(state, "chart")
        chart.load_state_dict({key[len("chart."):]: value for key, value in state.items()})
        assert (chart.composition_form, chart.pooling_form, chart.max_span) == (composition, pooling, 5)
        result = chart(leaves, mask)
        torch.testing.assert_close(result.cells, expected.cells, atol=0, rtol=0)
        assert torch.equal(result.padding_mask, expected.padding_mask)
        return {f"chart.{key}": value for key, value in chart.state_dict().items()}

    saved_again = load(old)
    assert float(saved_again["chart.version"][0]) == 1
    load(saved_again)
    # A checkpoint of this version keeps H as the longest span.
    current = TreeformerChart(DIM, 5)
    state = {f"chart.{key}": value for key, value in trained.state_dict().items()}
    current.upgrade_state_dict_named(state, "chart")
    assert current.max_span == 5


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
    assert spans.shape == (2, 4, 3)  # the spans of 2, 3 and 4 tokens
    # Real spans: [0,1], [0,2], [1,2] in the right-padded sentence; [1,2], [1,3], [2,3] in the left-padded one.
    real = {(b, i, i + level + 1) for b, i, level in (~spans).nonzero().tolist()}
    assert real == {(0, 0, 1), (0, 0, 2), (0, 1, 2), (1, 1, 2), (1, 1, 3), (1, 2, 3)}
    spans = span_padding_mask(mask, max_height=2)
    assert spans.shape == (2, 4, 1)
    assert {(b, i, i + 1) for b, i, _ in (~spans).nonzero().tolist()} == {(0, 0, 1), (0, 1, 2), (1, 1, 2), (1, 2, 3)}
    assert span_padding_mask(mask[:, :1], max_height=10).shape == (2, 1, 0)


@pytest.mark.parametrize("composition, pooling", FORMS[:2])
@pytest.mark.parametrize("max_height", [3, 10])
def test_chart_is_batch_invariant(max_height, composition, pooling):
    torch.manual_seed(0)
    chart = TreeformerChart(DIM, max_height, composition=composition, pooling=pooling)
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


@pytest.mark.parametrize("composition, pooling", FORMS[:2])
def test_padding_gradients_are_zero_and_finite(composition, pooling):
    torch.manual_seed(0)
    chart = TreeformerChart(DIM, 4, composition=composition, pooling=pooling)
    leaves, mask, _ = padded_batch(1)
    leaves.requires_grad_(True)
    result = chart(leaves, mask)
    result.cells.square().sum().backward()
    assert torch.isfinite(leaves.grad).all()
    assert torch.all(leaves.grad[mask] == 0) and leaves.grad[~mask].abs().sum() > 0
    assert all(torch.isfinite(p.grad).all() for p in chart.parameters())


def test_flat_memory_for_cross_attention():
    torch.manual_seed(0)
    chart = TreeformerChart(DIM, 4)
    leaves, mask, _ = padded_batch(2)
    result = chart(leaves, mask)
    cells, cell_mask = result.flatten()
    batch_size, length = mask.shape
    assert cells.shape == (batch_size, 3 * length, DIM) and cell_mask.shape == (batch_size, 3 * length)
    # Index (h - 2)·n + i is the span of h tokens from i.
    for h in range(2, 5):
        for i in (0, 5, length - 1):
            assert torch.equal(cells[:, (h - 2) * length + i], result.cells[:, i, h - 2])
            assert torch.equal(cell_mask[:, (h - 2) * length + i], result.padding_mask[:, i, h - 2])
    # Every sentence of >= 2 tokens has a cell to attend to; the one-token sentence has none.
    assert (~cell_mask).sum(-1).tolist() == [sum(max(n - h + 1, 0) for h in range(2, 5)) for n in LENGTHS]
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


@pytest.mark.parametrize("composition, pooling", FORMS[:2])
def test_checkpointed_levels_give_the_same_values_and_gradients(composition, pooling):
    torch.manual_seed(0)
    leaves, mask, _ = padded_batch(4)
    results = []
    for checkpoint_levels in (True, False):
        torch.manual_seed(1)
        chart = TreeformerChart(DIM, 6, checkpoint_levels=checkpoint_levels, composition=composition, pooling=pooling)
        inputs = leaves.clone().requires_grad_(True)
        cells = chart(inputs, mask).cells
        cells.square().sum().backward()
        results.append((cells, inputs.grad, *(parameter.grad for parameter in chart.parameters())))
    for with_checkpoint, without in zip(*results):
        torch.testing.assert_close(with_checkpoint, without)
