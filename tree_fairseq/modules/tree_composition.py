"""Attention as the composition function of a bottom-up tree encoder (Ahmed, Samee & Mercer,
ACL 2019, "You Only Need Attention to Traverse Trees"; the constituency-tree model).

A recursive network whose composition function is attention: a node's vector is computed from
the vectors of its children (leaves and nodes directly under it), from the bottom of the tree
up, with one set of weights for every node. Per node, with children rows ``C`` (c × d):

    head_i   = softmax(C W_i^Q (C W_i^K)ᵀ / sqrt(d_b)) C W_i^V               branch i = 1..M
    B_i      = κ_i · head_i W_i^O                                             (c × d)
    BranchAttn(C) = Σ_i α_i FFN_i(B_i)          FFN_i(x) = max(0, x W_i^1 + b_i^1) W_i^2 + b_i^2
    H        = LayerNorm(C + BranchAttn(C))                                   residual + layer norm
    parent   = mean of the rows of H

The multi-branch attention is the branched attention of the Weighted Transformer (Ahmed, Keskar
& Socher 2017), which the paper uses in place of multi-head attention: each branch is one
attention head (``d_b = d / M``) with its own output projection and feed-forward network,
``κ`` scales a branch before its FFN, ``α`` weighs the branches' sum; both lie on the simplex.

Choices made here, where the paper is silent or where we depart from it:

- ``κ = softmax(κ_logits)`` and ``α = softmax(α_logits)``, logits initialised to 0 (uniform),
  keep the Weighted Transformer's simplex constraint for any update.
- The rows of ``H`` are reduced to the parent's vector by their mean, not a sum: the parent's
  scale does not grow with its number of children (our nodes have from 2 to dozens).
- ``node_inputs`` (e.g. label embeddings) are optional. Given, a node's own input joins its
  children's rows — the place the paper's dependency-tree form gives the head word; absent, only
  the children are composed (the paper's constituency form).
- Leaf states: a leaf's row of ``H`` in its parent's composition (the leaf in the context of
  its siblings). Items without a parent — the root, EOS, the word of a one-word sentence — form
  a top-level group composed last, so EOS's state sees the root's.
- One bottom-up pass; several passes (layers) are the caller's business. Dropout, when set,
  acts on ``BranchAttn(C)`` before the residual, as in fairseq's layers.

Attention without positions is permutation-equivariant, so a parent's state does not depend on
the order of its children: word order reaches the composition only through its inputs (add
positional encodings to the leaves where it should matter).

Batching: a node's height is the number of nodes on the longest path from it down to a leaf.
All nodes of one height, over the whole batch, form the groups of one step: their members are
gathered into ``(G, K, d)`` (``K`` the most members of a group at that height, the rest masked),
composed by one batched operation and scattered back. The schedule (heights, groups, gathers) is
data-only: :func:`composition_schedule` builds it once per batch for every layer. A group sees
only its own members, so a sentence's states do not depend on the batch it is in.

Batch layout (the data layer's): leaves ``(B, n)`` with EOS last, left- or right-padded; node
spans ``(B, m, 2)`` inclusive absolute leaf columns, bottom-up, right-padded with ``(-1, -1)``;
masks True at padding. Items are numbered ``[nodes; leaves]`` per sentence, ``I = m + n``, and
``b · I + x`` in a flattened batch.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tree_fairseq.modules.tree_positional_encoding import tree_items, tree_parents


class CompositionStep(NamedTuple):
    """The groups composed together: the nodes of one height (or the top-level groups)."""

    members: Tensor  # (G, K) long  flat items b·I + x of each group, left to right
    padding_mask: Tensor  # (G, K) bool
    parents: Tensor  # (G,) long    flat item of the node composed, -1 for a top-level group


class CompositionSchedule(NamedTuple):
    """The bottom-up order of a batch: steps by increasing height, then the top-level groups."""

    steps: tuple[CompositionStep, ...]
    leaf_padding_mask: Tensor  # (B, n)
    node_padding_mask: Tensor  # (B, m)


def node_heights(spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor) -> Tensor:
    """``(B, m)`` long: nodes on the longest path from each node down to a leaf (1 for a node
    over leaves only), 0 for padding. ``max_j Σ_t [j ∈ span(t) ⊆ span(i)]`` as one bmm."""
    start, end, real = tree_items(spans, leaf_padding_mask, node_padding_mask)
    num_nodes = spans.size(1)
    if num_nodes == 0:
        return start.new_zeros(start.size(0), 0)
    node_start, node_end, real_node = start[:, :num_nodes], end[:, :num_nodes], real[:, :num_nodes]
    column = torch.arange(leaf_padding_mask.size(1), device=spans.device)
    membership = (
        (node_start.unsqueeze(-1) <= column) & (column <= node_end.unsqueeze(-1)) & real[:, None, num_nodes:]
    )  # (B, m, n)
    containment = (
        (node_start.unsqueeze(-1) <= node_start.unsqueeze(1))
        & (node_end.unsqueeze(1) <= node_end.unsqueeze(-1))
        & real_node.unsqueeze(-1)
        & real_node.unsqueeze(1)
    )  # (B, m, m)
    # Small integer counts: exact in float32.
    return torch.bmm(containment.float(), membership.float()).amax(-1).round().long()


def composition_schedule(
    spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor
) -> CompositionSchedule:
    """Group every real item under its parent (or its sentence's top level), order each group
    left to right and split the groups into steps by the height of the parent."""
    batch_size, num_nodes = node_padding_mask.shape
    device = spans.device
    start, _, real = tree_items(spans, leaf_padding_mask, node_padding_mask)
    parent = tree_parents(spans, leaf_padding_mask, node_padding_mask)  # (B, I)
    num_items = parent.size(1)
    height = node_heights(spans, leaf_padding_mask, node_padding_mask)  # (B, m)

    # Group g = b·(m + 1) + (parent, or m for the top level); members sorted by (group, start).
    b, x = real.nonzero(as_tuple=True)
    group = b * (num_nodes + 1) + parent[b, x].masked_fill(parent[b, x] < 0, num_nodes)
    order = torch.argsort(group * (leaf_padding_mask.size(1) + 1) + start[b, x])
    sorted_items = (b * num_items + x)[order]
    size = torch.bincount(group, minlength=batch_size * (num_nodes + 1))  # (B·(m + 1),)
    offset = torch.cumsum(size, 0) - size
    top_height = int(height.max()) + 1 if height.numel() else 1
    group_height = torch.cat([height, height.new_full((batch_size, 1), top_height)], dim=1).flatten()
    group_item = torch.arange(num_nodes + 1, device=device).repeat(batch_size)  # node index, or m
    group_sentence = torch.arange(batch_size, device=device).repeat_interleave(num_nodes + 1)

    steps = []
    for level in range(1, top_height + 1):
        groups = ((group_height == level) & (size > 0)).nonzero().squeeze(1)  # (G,)
        if groups.numel() == 0:
            continue
        slot = torch.arange(int(size[groups].max()), device=device)
        padding_mask = slot >= size[groups].unsqueeze(1)  # (G, K)
        position = (offset[groups].unsqueeze(1) + slot).masked_fill(padding_mask, 0)
        members = sorted_items[position].masked_fill(padding_mask, 0)
        is_node = group_item[groups] < num_nodes
        parents = torch.where(is_node, group_sentence[groups] * num_items + group_item[groups], -1)
        steps.append(CompositionStep(members, padding_mask, parents))
    return CompositionSchedule(tuple(steps), leaf_padding_mask, node_padding_mask)


class TreeComposition(nn.Module):
    """One bottom-up pass of attention composition (see the module docstring).

    ``num_branches`` is ``M`` (``embed_dim`` must be divisible by it); ``ffn_dim`` the inner size
    of each branch's FFN.
    """

    def __init__(
        self, embed_dim: int, num_branches: int = 4, ffn_dim: int | None = None, dropout: float = 0.0
    ):
        super().__init__()
        if embed_dim % num_branches:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_branches {num_branches}")
        ffn_dim = ffn_dim or embed_dim
        self.embed_dim = embed_dim
        self.num_branches = num_branches
        self.branch_dim = embed_dim // num_branches
        self.dropout = dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim)  # W_i^Q of all branches, branch-major rows
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_weight = nn.Parameter(torch.empty(num_branches, self.branch_dim, embed_dim))  # W_i^O
        self.out_bias = nn.Parameter(torch.empty(num_branches, embed_dim))
        self.ffn_in_weight = nn.Parameter(torch.empty(num_branches, embed_dim, ffn_dim))  # W_i^1
        self.ffn_in_bias = nn.Parameter(torch.empty(num_branches, ffn_dim))
        self.ffn_out_weight = nn.Parameter(torch.empty(num_branches, ffn_dim, embed_dim))  # W_i^2
        self.ffn_out_bias = nn.Parameter(torch.empty(num_branches, embed_dim))
        self.kappa_logits = nn.Parameter(torch.empty(num_branches))
        self.alpha_logits = nn.Parameter(torch.empty(num_branches))
        self.layer_norm = nn.LayerNorm(embed_dim)
        self.reset_parameters()

    def reset_parameters(self):
        for proj in (self.q_proj, self.k_proj, self.v_proj):  # as fairseq's MultiheadAttention
            nn.init.xavier_uniform_(proj.weight, gain=2**-0.5)
            nn.init.zeros_(proj.bias)
        for weights in (self.out_weight, self.ffn_in_weight, self.ffn_out_weight):
            for branch in weights:
                nn.init.xavier_uniform_(branch)
        # κ and α start uniform over the branches.
        biases = (self.out_bias, self.ffn_in_bias, self.ffn_out_bias)
        for zeros in (*biases, self.kappa_logits, self.alpha_logits):
            nn.init.zeros_(zeros)
        self.layer_norm.reset_parameters()

    def branch_attention(self, rows: Tensor, padding_mask: Tensor) -> Tensor:
        """``BranchAttn(C)`` of every group: rows ``(G, K, d)``, padding_mask ``(G, K)`` (every
        group has a real row) -> ``(G, K, d)``. Scores and softmax in at least float32."""
        groups, size, _ = rows.shape

        def split(x: Tensor) -> Tensor:  # (G, K, d) -> (G, M, K, d_b)
            return x.view(groups, size, self.num_branches, self.branch_dim).transpose(1, 2)

        queries = split(self.q_proj(rows)) * self.branch_dim**-0.5
        keys, values = split(self.k_proj(rows)), split(self.v_proj(rows))
        scores = (queries @ keys.transpose(-1, -2)).to(torch.promote_types(queries.dtype, torch.float32))
        probs = scores.masked_fill(padding_mask[:, None, None, :], float("-inf")).softmax(dim=-1)
        heads = probs.to(values.dtype) @ values  # (G, M, K, d_b)
        kappa = self.kappa_logits.softmax(-1)
        alpha = self.alpha_logits.softmax(-1)
        branches = torch.einsum("gmkc,mcd->gkmd", heads, self.out_weight.to(heads.dtype)) + self.out_bias
        branches = branches * kappa.unsqueeze(-1)  # (G, K, M, d)
        hidden = torch.einsum("gkmd,mdf->gkmf", branches, self.ffn_in_weight.to(branches.dtype))
        hidden = F.relu(hidden + self.ffn_in_bias)
        ffn = torch.einsum("gkmf,mfd->gkmd", hidden, self.ffn_out_weight.to(hidden.dtype)) + self.ffn_out_bias
        return torch.einsum("gkmd,m->gkd", ffn, alpha.to(ffn.dtype))

    def forward(
        self, leaves: Tensor, schedule: CompositionSchedule, node_inputs: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """leaves ``(B, n, d)``, node_inputs ``(B, m, d)`` or None -> node states ``(B, m, d)``
        and leaf states ``(B, n, d)``, zero at padding.

        ``table`` holds one row per item: the leaves, then each node's state once its height's
        step has run (its input until then — what a node with ``node_inputs`` adds to its group).
        """
        batch_size, num_leaves, dim = leaves.shape
        num_nodes = schedule.node_padding_mask.size(1)
        num_items = num_nodes + num_leaves
        nodes = node_inputs if node_inputs is not None else leaves.new_zeros(batch_size, num_nodes, dim)
        table = torch.cat([nodes.to(leaves.dtype), leaves], dim=1).reshape(batch_size * num_items, dim)
        leaf_states = torch.zeros_like(table)
        for members, padding_mask, parents in schedule.steps:
            rows, rows_padding = table[members], padding_mask  # (G, K, d)
            if node_inputs is not None:
                rows = torch.cat([table[parents.clamp(min=0)].unsqueeze(1), rows], dim=1)
                rows_padding = torch.cat([(parents < 0).unsqueeze(1), padding_mask], dim=1)
            # Padding rows point at arbitrary items: zero them, or a NaN there would leak through
            # the zero attention weights and the masked mean.
            rows = rows.masked_fill(rows_padding.unsqueeze(-1), 0)
            update = self.branch_attention(rows, rows_padding)
            update = F.dropout(update, p=self.dropout, training=self.training)
            composed = self.layer_norm(rows + update.to(rows.dtype)).to(table.dtype)  # H, (G, K', d)
            real = (~rows_padding).unsqueeze(-1).to(composed.dtype)
            pooled = (composed * real).sum(1) / real.sum(1)  # (G, d)
            is_node = parents >= 0
            table[parents[is_node]] = pooled[is_node]
            member_rows = composed[:, composed.size(1) - members.size(1):]
            is_leaf = ~padding_mask & (members % num_items >= num_nodes)
            leaf_states[members[is_leaf]] = member_rows[is_leaf]
        node_states = table.view(batch_size, num_items, dim)[:, :num_nodes]
        node_states = node_states.masked_fill(schedule.node_padding_mask.unsqueeze(-1), 0)
        return node_states, leaf_states.view(batch_size, num_items, dim)[:, num_nodes:]
