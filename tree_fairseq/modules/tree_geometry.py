"""The geometry of a batch of trees, shared by the tree-aware modules: which leaves a node spans,
which nodes contain which, every item's parent, every node's height.

Pure tensor functions, computed once per batch by whichever method needs them; the methods' own
maths stays in their modules.

Batch layout (the data layer's): leaves ``(B, n)``; node ``spans (B, m, 2)`` inclusive absolute
leaf columns, bottom-up, right-padded with ``(-1, -1)``; ``leaf_padding_mask (B, n)`` and
``node_padding_mask (B, m)`` bool, True at padding. The spans of a tree are nested or disjoint and
no two are equal. Where nodes and leaves form one list, items are numbered ``[nodes; leaves]`` per
sentence: item ``x < m`` is node ``x``, item ``m + j`` is leaf ``j``.
"""

import torch
from torch import Tensor


def tree_items(
    spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The nodes and leaves of a batch as one list of items per sentence, ``[nodes; leaves]``.

    Returns ``start, end`` (B, m + n) inclusive leaf columns and ``real`` (B, m + n) bool.
    """
    batch_size, num_leaves = leaf_padding_mask.shape
    column = torch.arange(num_leaves, device=spans.device).expand(batch_size, num_leaves)
    start = torch.cat([spans[..., 0], column], dim=1)
    end = torch.cat([spans[..., 1], column], dim=1)
    real = torch.cat([~node_padding_mask, ~leaf_padding_mask], dim=1)
    return start, end, real


def leaf_membership(spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor) -> Tensor:
    """``M[b, i, j] = [leaf j lies in span(i)]``, ``(B, m, n)`` bool; False for padded nodes and
    padded leaves."""
    start, end = spans[..., 0], spans[..., 1]  # (B, m)
    column = torch.arange(leaf_padding_mask.size(1), device=spans.device)  # (n,)
    return (
        (start.unsqueeze(-1) <= column)
        & (column <= end.unsqueeze(-1))
        & ~node_padding_mask.unsqueeze(-1)
        & ~leaf_padding_mask.unsqueeze(1)
    )


def node_containment(spans: Tensor, node_padding_mask: Tensor) -> Tensor:
    """``K[b, i, t] = [span(t) ⊆ span(i)]``, ``(B, m, m)`` bool, ``t = i`` included; False where
    either node is padding."""
    start, end = spans[..., 0], spans[..., 1]  # (B, m)
    real_node = ~node_padding_mask
    return (
        (start.unsqueeze(-1) <= start.unsqueeze(1))
        & (end.unsqueeze(1) <= end.unsqueeze(-1))
        & real_node.unsqueeze(-1)
        & real_node.unsqueeze(1)
    )


def branch_node_counts(membership: Tensor, containment: Tensor) -> Tensor:
    """``(K·M)[b, i, j] = Σ_t [j ∈ span(t) ⊆ span(i)]``, ``(B, m, n)`` float32: the nodes on the
    branch from node i down to leaf j, both i and the lowest node above j included; 0 where leaf j
    is outside span(i). Small integer counts, exact in float32."""
    return torch.bmm(containment.float(), membership.float())


def node_heights(spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor) -> Tensor:
    """``(B, m)`` long: nodes on the longest path from each node down to a leaf (1 for a node
    over leaves only), 0 for padding: ``max_j Σ_t [j ∈ span(t) ⊆ span(i)]``."""
    if spans.size(1) == 0:
        return spans.new_zeros(spans.size(0), 0, dtype=torch.long)
    membership = leaf_membership(spans, leaf_padding_mask, node_padding_mask)
    containment = node_containment(spans, node_padding_mask)
    return branch_node_counts(membership, containment).amax(-1).round().long()


def tree_parents(spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor) -> Tensor:
    """The parent node of every item of :func:`tree_items`: the smallest real node span strictly
    containing it. Returns ``(B, m + n)`` long node indices, ``-1`` where there is none (the root,
    EOS, the word of a one-word sentence, padding).

    Spans are unique, so a node strictly contains an item iff it contains it and is not it; the
    nodes containing an item are nested, so the smallest is unique.
    """
    num_nodes = spans.size(1)
    start, end, real = tree_items(spans, leaf_padding_mask, node_padding_mask)
    if num_nodes == 0:
        return torch.full_like(start, -1)
    real_node = real[:, :num_nodes]
    not_itself = ~torch.eye(num_nodes, start.size(1), dtype=torch.bool, device=spans.device)
    contains = (
        (spans[..., 0, None] <= start.unsqueeze(1))
        & (end.unsqueeze(1) <= spans[..., 1, None])
        & real_node.unsqueeze(-1)
        & real.unsqueeze(1)
        & not_itself
    )  # (B, m, m + n)
    width = (spans[..., 1] - spans[..., 0]).unsqueeze(-1)  # (B, m, 1)
    never = torch.iinfo(width.dtype).max
    smallest, parent = width.expand_as(contains).masked_fill(~contains, never).min(dim=1)
    return parent.masked_fill(smallest == never, -1)
