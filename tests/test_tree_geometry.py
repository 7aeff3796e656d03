"""The batch tree geometry shared by the modules: membership, containment, branch node counts,
heights and parents of padded batches of random trees, against their definitions written out
node by node and leaf by leaf."""

import pytest
import torch
from helpers import random_tree_batch

from tree_fairseq.modules.tree_geometry import (
    branch_node_counts,
    leaf_membership,
    node_containment,
    node_heights,
    tree_items,
    tree_parents,
)


def batch(seed: int):
    return random_tree_batch(seed, (1, 2, 5, 9, 13), (False, True, True, False, True), max_children=5)


def real_spans(spans, node_padding_mask, b):
    return [tuple(spans[b, i].tolist()) for i in range(spans.size(1)) if not node_padding_mask[b, i]]


@pytest.mark.parametrize("seed", range(4))
def test_membership_containment_and_counts(seed):
    _, spans, leaf_padding_mask, node_padding_mask, _ = batch(seed)
    membership = leaf_membership(spans, leaf_padding_mask, node_padding_mask)
    containment = node_containment(spans, node_padding_mask)
    counts = branch_node_counts(membership, containment)
    batch_size, num_nodes, num_leaves = membership.shape
    for b in range(batch_size):
        for i in range(num_nodes):
            real_i = not node_padding_mask[b, i]
            start_i, end_i = spans[b, i].tolist()
            for j in range(num_leaves):
                inside = real_i and not leaf_padding_mask[b, j] and start_i <= j <= end_i
                assert bool(membership[b, i, j]) == inside
                on_branch = sum(
                    1 for t in range(num_nodes)
                    if inside and not node_padding_mask[b, t]
                    and start_i <= spans[b, t, 0] <= j <= spans[b, t, 1] <= end_i
                )
                assert counts[b, i, j].item() == on_branch
            for t in range(num_nodes):
                real_t = not node_padding_mask[b, t]
                within = real_i and real_t and start_i <= spans[b, t, 0] and spans[b, t, 1] <= end_i
                assert bool(containment[b, i, t]) == bool(within)


def height(span, spans):
    """Nodes on the longest path from the node over ``span`` down to a leaf, by recursion."""
    inside = [s for s in spans if s != span and span[0] <= s[0] and s[1] <= span[1]]
    children = [s for s in inside if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in inside)]
    return 1 + max((height(child, spans) for child in children), default=0)


@pytest.mark.parametrize("seed", range(4))
def test_heights_and_parents(seed):
    _, spans, leaf_padding_mask, node_padding_mask, _ = batch(seed)
    heights = node_heights(spans, leaf_padding_mask, node_padding_mask)
    parents = tree_parents(spans, leaf_padding_mask, node_padding_mask)
    start, end, real = tree_items(spans, leaf_padding_mask, node_padding_mask)
    batch_size, num_nodes = node_padding_mask.shape
    for b in range(batch_size):
        nodes = real_spans(spans, node_padding_mask, b)
        for i in range(num_nodes):
            expected = 0 if node_padding_mask[b, i] else height(tuple(spans[b, i].tolist()), nodes)
            assert heights[b, i].item() == expected
        for x in range(start.size(1)):
            item = (start[b, x].item(), end[b, x].item())
            above = [
                t for t in range(num_nodes)
                if real[b, x] and not node_padding_mask[b, t] and t != x
                and spans[b, t, 0] <= item[0] and item[1] <= spans[b, t, 1]
            ]
            smallest = min(above, key=lambda t: (spans[b, t, 1] - spans[b, t, 0]).item(), default=-1)
            assert parents[b, x].item() == smallest


def test_no_nodes():
    leaf_padding_mask = torch.tensor([[False, False, True]])
    no_nodes = torch.zeros(1, 0, dtype=torch.bool)
    no_spans = torch.zeros(1, 0, 2, dtype=torch.long)
    assert node_heights(no_spans, leaf_padding_mask, no_nodes).shape == (1, 0)
    assert tree_parents(no_spans, leaf_padding_mask, no_nodes).tolist() == [[-1, -1, -1]]
    assert leaf_membership(no_spans, leaf_padding_mask, no_nodes).shape == (1, 0, 3)
