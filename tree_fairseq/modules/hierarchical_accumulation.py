"""Hierarchical accumulation (Nguyen et al., ICLR 2020, "Tree-structured Attention with
Hierarchical Accumulation", arXiv 2002.08046, section 4.1-4.2, equations 5-10).

The paper builds ``S = F(L, N, R)`` of size ``(m+1) x n x d`` (eq. 5), averages every branch
upwards (``U``, eq. 6) and takes a weighted mean over the branches of each node (``V``, eq. 7),
optionally after adding hierarchical embeddings ``E`` (eqs. 9-10). All three steps are linear.
With membership ``M[i, j] = [leaf j in span(i)]``, containment ``K[i, t] = [span(t) ⊆ span(i)]``,
``|C^i_j| = 1 + (K·M)[i, j]`` (the leaf and the nodes on the branch) and the per-sentence
``A[i, j] = M[i, j] / (|C^i_j| · |L ∩ R(i)|)``, node i's value per head is

    N̄'_i = Σ_j A[i, j] w_j (l_j + Σ_{t on the branch i -> j} n_t) + (embedding terms).

The spans of a tree are nested or disjoint, so the nodes on the branch from i down to leaf j are
the nodes above leaf j (``Mᵀ·N``, row j) less the nodes strictly above node i
(``(Kᵀ - I)·N``, row i). Hence, with ``R = Mᵀ·N`` (n x d) and ``Q = (Kᵀ - I)·N`` (m x d):

    N̄' = A·(w ⊙ (L + R)) - (A·w) ⊙ Q + (embedding terms)                         (eqs. 6-8)

``A``, ``M`` and ``K`` are shared by the heads, so every product runs on all heads at once and the
largest tensors are ``(B, m, n)`` and ``(B, m, m)`` scalars, not one per head. The embedding terms
first sum ``A[i, j] w_j`` per (node, embedding index) over the branch triples (node i, node t on
the branch, leaf j), T ≈ n·depth²/2, then multiply by the tables. Nothing of size ``n·m·d`` is ever
built: the cost is ``O(m·n·d + m²·d + T·H + m·|E|·d)``. The subtraction cancels the sums above
node i, so the products and the difference are computed in (at least) float32, autocast off.

Choices the paper leaves open, made here:

- Eq. 5 puts node t in row t + 1 of ``S`` (row 1 holds the leaves), but eqs. 6 and 9 name the
  node rows by the node's own index (``S_{t,j}`` for ``x^N_t ∈ R(x^N_i)``, ``E_{i,j}`` for
  ``x^N_i``); both are read as the row of node t (i), so that every node gets its own entries.
- ``C^i_j`` (eq. 6) is the branch from node i down to leaf j: the leaf plus the nodes on that
  path, both ends included, so ``|C^i_j|`` counts the leaf. Read literally, eq. 6 also lists the
  (zero) entries of nodes of R(i) that do not contain leaf j; the text ("the branch that starts
  with x_i and ends with x_j") and Figure 1 exclude them.
- Eq. 9 indexes ``E`` by the rows of ``S`` (row 1 = leaves): the embedding of the cell of node t
  and leaf j is ``[e^v_{|V^t_j|}; e^h_{|H^t_j|}]`` with ``|V^t_j|`` the number of nodes on the
  path from leaf j up to t (t included, so 1 for the lowest node above the leaf) and
  ``|H^t_j| = j - start(t) + 1``. Indices start at 1; an index past the table's size uses its
  last row (the paper does not bound them).
- ``w = L·u`` (eqs. 16, 23) is a linear function of the layer input, unnormalised and without
  bias; the caller computes it. ``leaf_weights`` is ``(B, H, n)``: the printed ``u ∈ R^d`` gives
  every head the same weights (an expanded ``(B, 1, n)``), one ``u`` per head (an option of the
  attention modules) different ones.
- The embedding tables are ``d_head/2`` wide and shared by all heads, as the paper says. The
  paper does not say whether layers share them: each attention module owns one
  :class:`HierarchicalEmbedding` unless it is given one to share.
- A padded node has an empty span: its accumulated value is zero.

The authors' code divides by a count without the leaf and indexes the vertical embeddings by
depth from the root; both differ from eqs. 6 and 9 as printed and are not followed.

Batch layout (the data layer's): leaves ``(B, n)``, nodes ``(B, m)`` right-padded and bottom-up,
``spans (B, m, 2)`` inclusive absolute leaf columns, ``(-1, -1)`` for padded nodes; masks are
True at padding.
"""

from typing import NamedTuple

import torch
from torch import Tensor, nn

from tree_fairseq.modules.tree_geometry import branch_node_counts, leaf_membership, node_containment


class TreeStructure(NamedTuple):
    """The data-only tensors of a batch of trees, built once and shared by all layers.

    Every field is batch-major, so :meth:`index_select` reorders a batch (e.g. for beam search).
    The ``branch_*`` fields list, per sentence, the triples (node i, node t, leaf j) with
    ``j ∈ span(t) ⊆ span(i)``: node t on the branch from node i down to leaf j. They are
    right-padded to the longest list in the batch (``branch_padding_mask`` True at padding).
    """

    membership: Tensor  # (B, m, n) bool   M[i, j]: leaf j lies in span(i)
    containment: Tensor  # (B, m, m) bool  K[i, t]: span(t) ⊆ span(i), t = i included
    branch_average: Tensor  # (B, m, n) float32  A[i, j] = M[i, j] / (|C^i_j| · |L ∩ R(i)|)
    branch_node: Tensor  # (B, T) long      i
    branch_leaf: Tensor  # (B, T) long      j
    branch_vertical: Tensor  # (B, T) long  |V^t_j| (eq. 9), >= 1
    branch_horizontal: Tensor  # (B, T) long  |H^t_j| = j - start(t) + 1 (eq. 9), >= 1
    branch_padding_mask: Tensor  # (B, T) bool
    leaf_padding_mask: Tensor  # (B, n) bool
    node_padding_mask: Tensor  # (B, m) bool

    def index_select(self, order: Tensor) -> "TreeStructure":
        """The structure of the sentences ``order`` (LongTensor of batch indices)."""
        return TreeStructure(*(field.index_select(0, order) for field in self))


def build_tree_structure(
    spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor
) -> TreeStructure:
    """Build the :class:`TreeStructure` of a batch.

    spans: ``(B, m, 2)`` inclusive leaf columns of a tree (nested or disjoint, no two equal),
    ``(-1, -1)`` for padded nodes; leaf_padding_mask: ``(B, n)`` bool; node_padding_mask:
    ``(B, m)`` bool (True = pad).
    """
    start = spans[..., 0]  # (B, m)
    membership = leaf_membership(spans, leaf_padding_mask, node_padding_mask)  # (B, m, n)
    containment = node_containment(spans, node_padding_mask)  # (B, m, m)
    # |C^i_j| = 1 + nodes on the branch i -> j, 0 off span.
    path_count = branch_node_counts(membership, containment).add_(1).mul_(membership)  # (B, m, n)
    span_size = membership.sum(-1)  # (B, m)
    branches = _branch_triples(containment, span_size, start, path_count)
    branch_average = membership / (path_count * span_size.unsqueeze(-1)).clamp_(min=1)
    return TreeStructure(
        membership, containment, branch_average, *branches, leaf_padding_mask, node_padding_mask
    )


def _branch_triples(containment: Tensor, span_size: Tensor, start: Tensor, path_count: Tensor):
    """List the (i, t, j) triples of :class:`TreeStructure` without an ``m·m·n`` tensor:
    every pair ``t ⊆ i`` is repeated once per leaf of ``span(t)``.
    Returns ``(node, leaf, vertical, horizontal, padding_mask)``, each ``(B, T)``."""
    device = containment.device
    batch_size = containment.size(0)
    b, i, t = containment.nonzero().unbind(1)  # (E,) each, sorted by sentence
    size_t = span_size[b, t]
    pair = torch.repeat_interleave(torch.arange(b.numel(), device=device), size_t)  # (T_all,)
    first_of_pair = torch.cumsum(size_t, 0) - size_t
    offset = torch.arange(pair.numel(), device=device) - first_of_pair[pair]  # j - start(t)
    b, i, t = b[pair], i[pair], t[pair]
    j = start[b, t] + offset
    vertical = path_count[b, t, j].long() - 1  # nodes on the path from leaf j up to t, t included
    horizontal = offset + 1

    per_sentence = torch.bincount(b, minlength=batch_size)  # (B,)
    position = torch.arange(b.numel(), device=device) - (torch.cumsum(per_sentence, 0) - per_sentence)[b]
    longest = int(per_sentence.max()) if b.numel() > 0 else 0

    def padded(values: Tensor, fill: int) -> Tensor:
        out = torch.full((batch_size, longest), fill, dtype=torch.long, device=device)
        out[b, position] = values
        return out

    padding_mask = torch.ones(batch_size, longest, dtype=torch.bool, device=device)
    padding_mask[b, position] = False
    # Padding triples point at valid cells (node 0, leaf 0, index 1) and carry zero weight.
    return padded(i, 0), padded(j, 0), padded(vertical, 1), padded(horizontal, 1), padding_mask


class HierarchicalEmbedding(nn.Module):
    """The vertical and horizontal embedding tables ``E^v, E^h`` of eq. 9, each
    ``(num_embeddings, head_dim / 2)``, shared by all heads; row ``k - 1`` holds index ``k``."""

    def __init__(self, head_dim: int, num_embeddings: int = 64):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"hierarchical embeddings need an even head dimension, got {head_dim}")
        self.vertical = nn.Parameter(torch.empty(num_embeddings, head_dim // 2))
        self.horizontal = nn.Parameter(torch.empty(num_embeddings, head_dim // 2))
        nn.init.normal_(self.vertical, std=head_dim**-0.5)
        nn.init.normal_(self.horizontal, std=head_dim**-0.5)

    def forward(self, leaf_weights: Tensor, structure: TreeStructure) -> Tensor:
        """The embedding part of ``V(U(S + E), w)`` (eq. 10):
        ``Σ_j A[i, j] w_j Σ_{t on the branch i -> j} [e^v_{|V^t_j|}; e^h_{|H^t_j|}]``.

        leaf_weights: ``w``, ``(B, H, n)``. Returns ``(B, H, m, head_dim)`` in the tables' dtype.
        The scalar weights ``A[i, j] w_j`` are first summed per (node i, embedding index) over
        the branch triples, then multiplied by the tables.
        """
        num_heads = leaf_weights.size(1)
        num_nodes, num_leaves = structure.branch_average.shape[1:]
        cell = structure.branch_node * num_leaves + structure.branch_leaf  # (B, T)
        average = structure.branch_average.flatten(1).gather(1, cell)  # (B, T)
        weight = leaf_weights.gather(2, structure.branch_leaf.unsqueeze(1).expand(-1, num_heads, -1))
        triple_weights = (weight * average.masked_fill(structure.branch_padding_mask, 0).unsqueeze(1))
        triple_weights = triple_weights.to(self.vertical.dtype)  # (B, H, T)
        node = structure.branch_node
        vertical = self._per_index(triple_weights, node, structure.branch_vertical, num_nodes)
        horizontal = self._per_index(triple_weights, node, structure.branch_horizontal, num_nodes)
        return torch.cat([vertical @ self.vertical, horizontal @ self.horizontal], dim=-1)

    def _per_index(self, triple_weights: Tensor, node: Tensor, index: Tensor, num_nodes: int) -> Tensor:
        """Sum ``(B, H, T)`` triple weights into ``(B, H, m, num_embeddings)`` bins (node, index)."""
        batch_size, num_heads, _ = triple_weights.shape
        size = self.vertical.size(0)
        bin_index = node * size + index.clamp(max=size) - 1  # (B, T)
        bins = triple_weights.new_zeros(batch_size, num_heads, num_nodes * size)
        bins.scatter_add_(2, bin_index.unsqueeze(1).expand(-1, num_heads, -1), triple_weights)
        return bins.view(batch_size, num_heads, num_nodes, size)


def hierarchical_accumulation(
    leaf_values: Tensor,
    node_values: Tensor,
    leaf_weights: Tensor,
    structure: TreeStructure,
    embedding: HierarchicalEmbedding | None = None,
) -> Tensor:
    """``N̄' = V(U(F(L, N, R) + E), w)`` (eqs. 5-10), or ``N̄ = V(U(F(L, N, R)), w)`` (eq. 8)
    when ``embedding`` is None, computed for all heads at once without the ``S`` tensor.

    leaf_values: ``(B, H, n, dh)``; node_values: ``(B, H, m, dh)``; leaf_weights: ``(B, H, n)``.
    Returns the accumulated node values ``(B, H, m, dh)`` (zero for padded nodes) in at least
    float32.
    """
    batch_size, num_heads, num_leaves, head_dim = leaf_values.shape
    num_nodes = node_values.size(2)
    dtype = torch.promote_types(leaf_values.dtype, torch.float32)

    def fold(x: Tensor) -> Tensor:  # (B, H, L, dh) -> (B, L, H·dh): heads side by side
        return x.transpose(1, 2).reshape(batch_size, x.size(2), num_heads * x.size(3))

    def unfold(x: Tensor) -> Tensor:  # (B, L, H·dh) -> (B, H, L, dh)
        return x.view(batch_size, x.size(1), num_heads, x.size(2) // num_heads).transpose(1, 2)

    with torch.autocast(leaf_values.device.type, enabled=False):
        average = structure.branch_average.to(dtype)  # (B, m, n)
        weights = leaf_weights.to(dtype).unsqueeze(-1)  # (B, H, n, 1)
        nodes = fold(node_values.to(dtype))  # (B, m, H·dh)
        above_leaf = structure.membership.transpose(1, 2).to(dtype) @ nodes  # R: (B, n, H·dh)
        above_node = structure.containment.transpose(1, 2).to(dtype) @ nodes - nodes  # Q: (B, m, H·dh)
        branches = average @ fold(weights * (leaf_values.to(dtype) + unfold(above_leaf)))  # (B, m, H·dh)
        weight_sum = (average @ fold(weights)).transpose(1, 2).unsqueeze(-1)  # A·w: (B, H, m, 1)
        accumulated = unfold(branches) - weight_sum * unfold(above_node)
        if embedding is not None:
            accumulated = accumulated + embedding(leaf_weights.to(dtype), structure).to(dtype)
    return accumulated
