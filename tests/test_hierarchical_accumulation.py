"""The fast hierarchical accumulation against a direct implementation of the paper's
equations 5-10 (the oracle below), on random trees with 2-4 children per node."""

import pytest
import torch
from helpers import random_tree_batch
from torch.utils._python_dispatch import TorchDispatchMode

from tree_fairseq.modules.hierarchical_accumulation import (
    HierarchicalEmbedding,
    build_tree_structure,
    hierarchical_accumulation,
)


def random_batch(seed: int, word_counts=(1, 2, 5, 9, 12), left_pad=(False, True, False, True, True)):
    """Random trees with 2-4 children per node, padded (:func:`helpers.random_tree_batch`)."""
    return random_tree_batch(seed, word_counts, left_pad, max_children=4)


def naive_accumulation(leaf_values, node_values, leaf_weights, spans, embedding=None):
    """Eqs. 5-10 as they read, for one sentence and head: ``S`` (eq. 5) and ``E`` (eq. 9) of
    size ``(m+1) x n x d``, the upward cumulative average over each branch (eq. 6) and the
    weighted aggregation (eq. 7). leaf_values ``(n, d)``, node_values ``(m, d)``, leaf_weights
    ``(n,)``, spans: the real nodes' ``(start, end)``. Returns ``(m, d)``."""
    num_leaves, dim = leaf_values.shape
    num_nodes = len(spans)

    def in_span(j, t):  # x_j^L ∈ R(x_t^N)
        return spans[t][0] <= j <= spans[t][1]

    def in_subtree(t, i):  # x_t^N ∈ R(x_i^N)
        return spans[i][0] <= spans[t][0] and spans[t][1] <= spans[i][1]

    S = torch.zeros(num_nodes + 1, num_leaves, dim, dtype=leaf_values.dtype)
    E = torch.zeros_like(S)
    S[0] = leaf_values
    for t in range(num_nodes):
        for j in range(num_leaves):
            if not in_span(j, t):
                continue
            S[t + 1, j] = node_values[t]
            if embedding is not None:
                size = embedding.vertical.size(0)
                vertical = sum(1 for u in range(num_nodes) if in_subtree(u, t) and in_span(j, u))
                horizontal = sum(1 for u in range(j + 1) if in_span(u, t))
                E[t + 1, j] = torch.cat(
                    [
                        embedding.vertical[min(vertical, size) - 1],
                        embedding.horizontal[min(horizontal, size) - 1],
                    ]
                )
    S = S + E
    S_hat = torch.zeros(num_nodes, num_leaves, dim, dtype=leaf_values.dtype)
    for i in range(num_nodes):
        for j in range(num_leaves):
            if in_span(j, i):
                branch = [0] + [t + 1 for t in range(num_nodes) if in_subtree(t, i) and in_span(j, t)]
                S_hat[i, j] = S[branch, j].sum(0) / len(branch)
    N_bar = torch.zeros(num_nodes, dim, dtype=leaf_values.dtype)
    for i in range(num_nodes):
        leaves = [j for j in range(num_leaves) if in_span(j, i)]
        N_bar[i] = sum(leaf_weights[j] * S_hat[i, j] for j in leaves) / len(leaves)
    return N_bar


def hand_made_batch():
    """(ROOT (NP w0 w1) (VP w2 (NP w3 w4))) EOS, left-padded by one leaf, plus one padded node."""
    spans = torch.tensor([[[1, 2], [4, 5], [3, 5], [1, 5], [-1, -1]]])
    leaf_padding_mask = torch.tensor([[True] + [False] * 6])
    node_padding_mask = torch.tensor([[False] * 4 + [True]])
    return spans, leaf_padding_mask, node_padding_mask


def test_structure_of_hand_made_tree():
    structure = build_tree_structure(*hand_made_batch())
    expected_membership = torch.tensor(
        [
            [0, 1, 1, 0, 0, 0, 0],
            [0, 0, 0, 0, 1, 1, 0],
            [0, 0, 0, 1, 1, 1, 0],
            [0, 1, 1, 1, 1, 1, 0],
            [0, 0, 0, 0, 0, 0, 0],
        ]
    ).bool()
    expected_containment = torch.tensor(
        [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 1, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0]]
    ).bool()
    assert torch.equal(structure.membership[0], expected_membership)
    assert torch.equal(structure.containment[0], expected_containment)
    # A[i, j] = 1 / (|C^i_j| |span(i)|); |C| counts the leaf: root to w3 is w3, NP, VP, ROOT.
    path_count = [[0, 3, 3, 3, 4, 4, 0], [0, 0, 0, 2, 3, 3, 0]]
    span_size = [5, 3]
    for row, node in enumerate((3, 2)):
        expected = [1 / (c * span_size[row]) if c else 0.0 for c in path_count[row]]
        torch.testing.assert_close(structure.branch_average[0, node], torch.tensor(expected))
    assert torch.all(structure.branch_average[0, 4] == 0)  # the padded node
    # One (i, t, j) triple per node t on each branch: 3 + 3 + 3 + 6 + 6.
    real = ~structure.branch_padding_mask[0]
    assert int(real.sum()) == 21
    triples = {
        (i, j, v, h)
        for i, j, v, h, keep in zip(
            structure.branch_node[0].tolist(),
            structure.branch_leaf[0].tolist(),
            structure.branch_vertical[0].tolist(),
            structure.branch_horizontal[0].tolist(),
            real.tolist(),
        )
        if keep
    }
    # Branch ROOT -> w3 passes NP(w3 w4) (|V|=1, |H|=1), VP (2, 2), ROOT (3, 4).
    assert {(3, 4, 1, 1), (3, 4, 2, 2), (3, 4, 3, 4)} <= triples


@pytest.mark.parametrize("with_embeddings", [False, True])
@pytest.mark.parametrize("num_embeddings", [3, 16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_accumulation_equals_naive(seed, with_embeddings, num_embeddings):
    torch.manual_seed(seed)
    trees, spans, leaf_padding_mask, node_padding_mask, offsets = random_batch(seed)
    structure = build_tree_structure(spans, leaf_padding_mask, node_padding_mask)
    batch_size, num_nodes, _ = spans.shape
    num_leaves, num_heads, head_dim = leaf_padding_mask.size(1), 2, 4
    leaf_values = torch.randn(batch_size, num_heads, num_leaves, head_dim, dtype=torch.float64)
    node_values = torch.randn(batch_size, num_heads, num_nodes, head_dim, dtype=torch.float64)
    leaf_weights = torch.randn(batch_size, num_heads, num_leaves, dtype=torch.float64)
    embedding = HierarchicalEmbedding(head_dim, num_embeddings).double() if with_embeddings else None

    fast = hierarchical_accumulation(leaf_values, node_values, leaf_weights, structure, embedding)

    assert fast.shape == (batch_size, num_heads, num_nodes, head_dim)
    for b, (_, sentence_spans) in enumerate(trees):
        absolute = [(s + offsets[b], e + offsets[b]) for s, e in sentence_spans]
        for h in range(num_heads):
            naive = naive_accumulation(
                leaf_values[b, h], node_values[b, h, : len(absolute)], leaf_weights[b, h], absolute, embedding
            )
            torch.testing.assert_close(fast[b, h, : len(absolute)], naive, atol=1e-5, rtol=1e-5)
        assert torch.all(fast[b, :, len(absolute) :] == 0)


def test_accumulation_gradients_reach_every_input():
    _, spans, leaf_padding_mask, node_padding_mask, _ = random_batch(3)
    structure = build_tree_structure(spans, leaf_padding_mask, node_padding_mask)
    batch_size, num_nodes, _ = spans.shape
    num_leaves = leaf_padding_mask.size(1)
    leaf_values = torch.randn(batch_size, 2, num_leaves, 4, requires_grad=True)
    node_values = torch.randn(batch_size, 2, num_nodes, 4, requires_grad=True)
    leaf_weights = torch.randn(batch_size, 2, num_leaves, requires_grad=True)
    embedding = HierarchicalEmbedding(4, 8)
    out = hierarchical_accumulation(leaf_values, node_values, leaf_weights, structure, embedding)
    out.square().sum().backward()
    inputs = (leaf_values, node_values, leaf_weights, embedding.vertical, embedding.horizontal)
    for grad in (tensor.grad for tensor in inputs):
        assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    # Padded leaves and leaves outside every span (EOS) feed no node.
    outside = ~structure.membership.any(1)  # (B, n)
    assert torch.all(leaf_values.grad.abs().sum((1, 3))[outside] == 0)


def test_structure_index_select_equals_rebuilt_structure():
    _, spans, leaf_padding_mask, node_padding_mask, _ = random_batch(4)
    order = torch.tensor([3, 3, 0, 4])
    structure = build_tree_structure(spans, leaf_padding_mask, node_padding_mask).index_select(order)
    rebuilt = build_tree_structure(spans[order], leaf_padding_mask[order], node_padding_mask[order])
    leaf_weights = torch.randn(len(order), 2, leaf_padding_mask.size(1))
    leaf_values = torch.randn(len(order), 2, leaf_padding_mask.size(1), 4)
    node_values = torch.randn(len(order), 2, spans.size(1), 4)
    embedding = HierarchicalEmbedding(4, 8)
    torch.testing.assert_close(
        hierarchical_accumulation(leaf_values, node_values, leaf_weights, structure, embedding),
        hierarchical_accumulation(leaf_values, node_values, leaf_weights, rebuilt, embedding),
    )


def test_batch_without_nodes():
    spans = torch.empty(2, 0, 2, dtype=torch.long)
    leaf_padding_mask = torch.tensor([[False, False], [True, False]])
    structure = build_tree_structure(spans, leaf_padding_mask, torch.empty(2, 0, dtype=torch.bool))
    leaf_values, node_values, leaf_weights = torch.randn(2, 2, 2, 4), torch.randn(2, 2, 0, 4), torch.randn(2, 2, 2)
    out = hierarchical_accumulation(leaf_values, node_values, leaf_weights, structure, HierarchicalEmbedding(4))
    assert out.shape == (2, 2, 0, 4)


class _LargestTensor(TorchDispatchMode):
    """Records the largest tensor any operation returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(tensor, torch.Tensor):
                self.largest = max(self.largest, tensor.numel())
        return out


def test_no_tensor_of_size_n_m_d():
    batch = random_batch(5, word_counts=(20, 24), left_pad=(False, True))
    _, spans, leaf_padding_mask, node_padding_mask, _ = batch
    structure = build_tree_structure(spans, leaf_padding_mask, node_padding_mask)
    batch_size, num_nodes, _ = spans.shape
    num_leaves, num_heads, head_dim = leaf_padding_mask.size(1), 2, 32
    leaf_values = torch.randn(batch_size, num_heads, num_leaves, head_dim)
    node_values = torch.randn(batch_size, num_heads, num_nodes, head_dim)
    leaf_weights = torch.randn(batch_size, num_heads, num_leaves)
    embedding = HierarchicalEmbedding(head_dim, 8)
    with _LargestTensor() as probe:
        hierarchical_accumulation(leaf_values, node_values, leaf_weights, structure, embedding)
    assert probe.largest < batch_size * num_heads * num_nodes * num_leaves * head_dim / 8


def test_no_per_head_node_by_leaf_tensor():
    """The scalar weights are shared by the heads: the largest tensors are ``(B, m, n)`` scalars
    and the per-head weights of the branch triples, nothing of size ``H·m·n``."""
    batch = random_batch(6, word_counts=(120, 150), left_pad=(False, True))
    _, spans, leaf_padding_mask, node_padding_mask, _ = batch
    structure = build_tree_structure(spans, leaf_padding_mask, node_padding_mask)
    batch_size, num_nodes, _ = spans.shape
    num_leaves, num_heads, head_dim = leaf_padding_mask.size(1), 8, 4
    num_triples = structure.branch_node.size(1)
    leaf_values = torch.randn(batch_size, num_heads, num_leaves, head_dim, requires_grad=True)
    node_values = torch.randn(batch_size, num_heads, num_nodes, head_dim, requires_grad=True)
    leaf_weights = torch.randn(batch_size, num_heads, num_leaves, requires_grad=True)
    embedding = HierarchicalEmbedding(head_dim, 8)
    with _LargestTensor() as probe:
        hierarchical_accumulation(leaf_values, node_values, leaf_weights, structure, embedding).sum().backward()
    allowed = max(batch_size * num_nodes * max(num_nodes, num_leaves), batch_size * num_heads * num_triples)
    assert probe.largest <= allowed < batch_size * num_heads * num_nodes * num_leaves
