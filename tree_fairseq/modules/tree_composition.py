"""Attention as the composition function of a bottom-up tree encoder (Ahmed, Samee & Mercer,
ACL 2019, "You Only Need Attention to Traverse Trees"; the constituency-tree model).

A recursive network whose composition function is attention: a node's vector is computed from
the vectors of its children (leaves and nodes directly under it), from the bottom of the tree
up, with one set of weights for every node. Per node, with the rows ``x`` (c × d) of its
children (eq. 1, ``X_c``), :class:`TreeComposition` computes the paper's equations:

    B_i  = softmax(x W_i^Q (x W_i^K)ᵀ / sqrt(d_b)) x W_i^V              (eqs. 3-4; c × d_b)
    B̄_i  = LayerNorm(B_i W_i^b + x) · κ_i                               (eq. 5; c × d)
    PCNN_i(y) = max(0, y W_i^1 + b_i^1) W_i^2 + b_i^2                   (eq. 6)
    x̃    = BranchAttn(x) = Σ_i α_i PCNN_i(B̄_i)                          (eq. 7; c × d)
    P̃    = EwS(tanh((x̃ + x) W + b)) = Σ_rows tanh((x̃ + x) W + b)        (eq. 8; d)

for branches ``i = 1..M``, each one attention head of width ``d_b = d / M`` (the paper's
``d_k = d_v = d_m / n``). ``W_i^Q, W_i^K, W_i^V`` (d × d_b) and ``W_i^b`` (d_b × d) have no bias,
as printed; ``κ, α ∈ R^M`` are free parameters, as printed.

Readings taken where the printed equations leave a choice (docs/methods.md, section 5, lists them
against the paper):

- **Eq. 5's residual.** As printed, ``B_i W_i^b + B_i`` adds a ``c × d`` matrix to a
  ``c × d_b`` one and does not type-check for ``M > 1``. Read here as the residual around branch
  ``i``'s attention block: its input ``x`` (the branch's copy of the rows, eq. 4's ``V_i``).
  ``branch_residual="head"`` is the other reading: ``B_i`` itself, placed in branch ``i``'s own
  ``d_b`` columns of ``d`` (zero elsewhere).
- **Per-branch parts.** Eq. 7 writes one ``PCNN``; the experimental setup has one position-wise
  network per branch (six of each), so each branch has its own ``PCNN_i``, and its own layer
  norm gain and bias in eq. 5 (the paper does not say whether they are shared).
- **κ, α start at 1/M** (the paper gives no initialisation): the first sum of eq. 7 is the mean
  of the branches.
- **Dropout** (the paper's 0.1 on the PCNN's second layer) acts on each ``PCNN_i`` output.
- ``node_inputs`` (e.g. label embeddings) are optional. Given, a node's own input joins its
  children's rows as the first row: the paper's dependency form ``X_d`` (eq. 1), where the parent
  is the head word. Absent, only the children are composed: the constituency form ``X_c``.
- Leaf states (the paper's classifiers read only the root): a leaf's row of
  ``tanh((x̃ + x) W + b)`` in its parent's composition, the leaf in the context of its siblings.
  Items without a parent — the root, EOS, the word of a one-word sentence — form a top-level
  group composed last, so EOS's state sees the root's.
- One bottom-up pass; several passes (layers) are the caller's business.

:class:`ResidualMeanComposition` is this plugin's earlier form, kept for its checkpoints: the
branches' sum ``Σ_i α_i FFN_i(κ_i · B_i W_i^O)`` (projections with biases, ``κ`` and ``α``
softmax-normalised), one residual and layer norm around it, ``H = LayerNorm(x + BranchAttn(x))``,
and the parent as the mean of the rows of ``H``; leaf states are rows of ``H``.

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

from tree_fairseq.modules.tree_geometry import node_heights, tree_items, tree_parents


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



def branch_heads(module: nn.Module, rows: Tensor, padding_mask: Tensor) -> Tensor:
    """Eqs. 3-4, every branch's scaled dot-product attention over the rows of its group: rows
    ``(G, K, d)``, padding_mask ``(G, K)`` (every group has a real row) -> ``(G, M, K, d_b)``.
    ``module`` has ``q_proj``, ``k_proj``, ``v_proj`` (branch-major output columns),
    ``num_branches`` and ``branch_dim``. Scores and softmax in at least float32."""
    groups, size, _ = rows.shape

    def split(x: Tensor) -> Tensor:  # (G, K, d) -> (G, M, K, d_b)
        return x.view(groups, size, module.num_branches, module.branch_dim).transpose(1, 2)

    queries = split(module.q_proj(rows)) * module.branch_dim**-0.5
    keys, values = split(module.k_proj(rows)), split(module.v_proj(rows))
    scores = (queries @ keys.transpose(-1, -2)).to(torch.promote_types(queries.dtype, torch.float32))
    probs = scores.masked_fill(padding_mask[:, None, None, :], float("-inf")).softmax(dim=-1)
    return probs.to(values.dtype) @ values


class BottomUpComposition(nn.Module):
    """One bottom-up pass over a :class:`CompositionSchedule`: each step gathers its groups' rows,
    :meth:`compose` maps them to the members' states and the parent's state, and the parents'
    states are scattered back for the steps above."""

    def compose(self, rows: Tensor, padding_mask: Tensor) -> tuple[Tensor, Tensor]:
        """rows ``(G, K, d)``, zero at padding, padding_mask ``(G, K)`` -> the rows' states
        ``(G, K, d)`` and the parents' states ``(G, d)``."""
        raise NotImplementedError

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
            # the zero attention weights and the pooling.
            rows = rows.masked_fill(rows_padding.unsqueeze(-1), 0)
            states, pooled = self.compose(rows, rows_padding)
            states, pooled = states.to(table.dtype), pooled.to(table.dtype)
            is_node = parents >= 0
            table[parents[is_node]] = pooled[is_node]
            member_rows = states[:, states.size(1) - members.size(1):]
            is_leaf = ~padding_mask & (members % num_items >= num_nodes)
            leaf_states[members[is_leaf]] = member_rows[is_leaf]
        node_states = table.view(batch_size, num_items, dim)[:, :num_nodes]
        node_states = node_states.masked_fill(schedule.node_padding_mask.unsqueeze(-1), 0)
        return node_states, leaf_states.view(batch_size, num_items, dim)[:, num_nodes:]


class TreeComposition(BottomUpComposition):
    """One bottom-up pass of attention composition, the paper's eqs. 4-8 (see the module
    docstring).

    ``num_branches`` is ``M`` (``embed_dim`` must be divisible by it); ``ffn_dim`` the inner size
    of each branch's PCNN; ``branch_residual`` eq. 5's residual, ``"input"`` (the rows ``x``) or
    ``"head"`` (``B_i`` in its branch's columns); ``dropout`` on each PCNN's output.
    """

    def __init__(
        self,
        embed_dim: int,
        num_branches: int = 4,
        ffn_dim: int | None = None,
        dropout: float = 0.0,
        branch_residual: str = "input",
    ):
        super().__init__()
        if embed_dim % num_branches:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_branches {num_branches}")
        if branch_residual not in ("input", "head"):
            raise ValueError(f"branch_residual is 'input' or 'head', not {branch_residual!r}")
        ffn_dim = ffn_dim or embed_dim
        self.embed_dim = embed_dim
        self.num_branches = num_branches
        self.branch_dim = embed_dim // num_branches
        self.dropout = dropout
        self.branch_residual = branch_residual
        # W_i^Q, W_i^K, W_i^V of all branches, branch-major output columns (eq. 4).
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.branch_weight = nn.Parameter(torch.empty(num_branches, self.branch_dim, embed_dim))  # W_i^b
        self.branch_norm_weight = nn.Parameter(torch.empty(num_branches, embed_dim))  # eq. 5's LayerNorm
        self.branch_norm_bias = nn.Parameter(torch.empty(num_branches, embed_dim))
        self.kappa = nn.Parameter(torch.empty(num_branches))
        self.ffn_in_weight = nn.Parameter(torch.empty(num_branches, embed_dim, ffn_dim))  # W_i^1 (eq. 6)
        self.ffn_in_bias = nn.Parameter(torch.empty(num_branches, ffn_dim))
        self.ffn_out_weight = nn.Parameter(torch.empty(num_branches, ffn_dim, embed_dim))  # W_i^2
        self.ffn_out_bias = nn.Parameter(torch.empty(num_branches, embed_dim))
        self.alpha = nn.Parameter(torch.empty(num_branches))  # eq. 7
        self.output_proj = nn.Linear(embed_dim, embed_dim)  # W, b of eq. 8
        self.reset_parameters()

    def reset_parameters(self):
        for proj in (self.q_proj, self.k_proj, self.v_proj):  # as fairseq's MultiheadAttention
            nn.init.xavier_uniform_(proj.weight, gain=2**-0.5)
        for weights in (self.branch_weight, self.ffn_in_weight, self.ffn_out_weight):
            for branch in weights:
                nn.init.xavier_uniform_(branch)
        nn.init.xavier_uniform_(self.output_proj.weight)
        for zeros in (self.branch_norm_bias, self.ffn_in_bias, self.ffn_out_bias, self.output_proj.bias):
            nn.init.zeros_(zeros)
        nn.init.ones_(self.branch_norm_weight)
        nn.init.constant_(self.kappa, 1 / self.num_branches)
        nn.init.constant_(self.alpha, 1 / self.num_branches)

    def branches(self, rows: Tensor, padding_mask: Tensor) -> Tensor:
        """Eqs. 4-5, ``B̄_i`` of every branch for the real rows only: rows ``(G, K, d)`` -> ``(R, M, d)``,
        ``R`` the real rows of all groups in ``(G, K)`` order."""
        heads = branch_heads(self, rows, padding_mask).transpose(1, 2)  # (G, K, M, d_b)
        real = ~padding_mask
        heads = heads[real]  # (R, M, d_b)
        projected = torch.einsum("rmc,mcd->rmd", heads, self.branch_weight.to(heads.dtype))
        if self.branch_residual == "input":
            residual = rows[real].unsqueeze(1).to(projected.dtype)  # (R, 1, d)
        else:  # B_i in branch i's columns: the rows of the identity, split by branch, select them
            selector = torch.eye(self.embed_dim, dtype=heads.dtype, device=heads.device)
            residual = torch.einsum("rmc,mcd->rmd", heads, selector.view(self.num_branches, self.branch_dim, -1))
        normed = F.layer_norm(projected + residual, (self.embed_dim,))
        normed = normed * self.branch_norm_weight + self.branch_norm_bias
        return normed * self.kappa.unsqueeze(-1)

    def branch_attention(self, rows: Tensor, padding_mask: Tensor) -> Tensor:
        """Eqs. 6-7, ``x̃ = Σ_i α_i PCNN_i(B̄_i)`` for the real rows: rows ``(G, K, d)`` -> ``(R, d)``.

        Everything after the attention acts row by row, so it runs on the real rows alone: the
        groups of one height are padded to the largest (about 2.5 rows of padding to 1 real row on
        parsed IWSLT'14 batches), and the per-branch PCNNs are most of the work. Dropout draws
        its mask over the padded ``(G, K, M, d)`` as ``F.dropout`` on the padded rows did, so a
        seeded run draws the same masks as this module's earlier padded form (the outputs then agree
        to rounding)."""
        branches = self.branches(rows, padding_mask)
        hidden = torch.einsum("rmd,mdf->rmf", branches, self.ffn_in_weight.to(branches.dtype))
        hidden = F.relu(hidden + self.ffn_in_bias)
        ffn = torch.einsum("rmf,mfd->rmd", hidden, self.ffn_out_weight.to(hidden.dtype)) + self.ffn_out_bias
        if self.training and self.dropout > 0:
            if self.dropout >= 1:
                ffn = ffn * 0
            else:
                # Filled in the padded form's memory order: branch-major, as its einsum left it.
                keep = ffn.new_empty(ffn.size(1), *padding_mask.shape, ffn.size(2)).bernoulli_(1 - self.dropout)
                ffn = ffn * keep.div_(1 - self.dropout).permute(1, 2, 0, 3)[~padding_mask]
        return torch.einsum("rmd,m->rd", ffn, self.alpha.to(ffn.dtype))

    def compose(self, rows: Tensor, padding_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Eq. 8: each row's ``tanh((x̃ + x) W + b)``, and their element-wise sum over the real
        rows, the parent ``P̃``."""
        x_tilde = self.branch_attention(rows, padding_mask)
        real = ~padding_mask
        packed = torch.tanh(self.output_proj(x_tilde + rows[real].to(x_tilde.dtype)))
        states = packed.new_zeros(*padding_mask.shape, packed.size(-1)).masked_scatter(real.unsqueeze(-1), packed)
        return states, states.sum(1)


class ResidualMeanComposition(BottomUpComposition):
    """This plugin's earlier composition (see the module docstring), kept so that its checkpoints
    load and run as trained: ``H = LayerNorm(x + Σ_i α_i FFN_i(κ_i · (B_i W_i^O + b_i^O)))`` with
    ``κ = softmax(κ_logits)``, ``α = softmax(α_logits)``, biased projections, dropout on the sum;
    the parent is the mean of the rows of ``H``."""

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
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_weight = nn.Parameter(torch.empty(num_branches, self.branch_dim, embed_dim))
        self.out_bias = nn.Parameter(torch.empty(num_branches, embed_dim))
        self.ffn_in_weight = nn.Parameter(torch.empty(num_branches, embed_dim, ffn_dim))
        self.ffn_in_bias = nn.Parameter(torch.empty(num_branches, ffn_dim))
        self.ffn_out_weight = nn.Parameter(torch.empty(num_branches, ffn_dim, embed_dim))
        self.ffn_out_bias = nn.Parameter(torch.empty(num_branches, embed_dim))
        self.kappa_logits = nn.Parameter(torch.empty(num_branches))
        self.alpha_logits = nn.Parameter(torch.empty(num_branches))
        self.layer_norm = nn.LayerNorm(embed_dim)
        self.reset_parameters()

    def reset_parameters(self):
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=2**-0.5)
            nn.init.zeros_(proj.bias)
        for weights in (self.out_weight, self.ffn_in_weight, self.ffn_out_weight):
            for branch in weights:
                nn.init.xavier_uniform_(branch)
        biases = (self.out_bias, self.ffn_in_bias, self.ffn_out_bias)
        for zeros in (*biases, self.kappa_logits, self.alpha_logits):
            nn.init.zeros_(zeros)
        self.layer_norm.reset_parameters()

    def branch_attention(self, rows: Tensor, padding_mask: Tensor) -> Tensor:
        """``Σ_i α_i FFN_i(κ_i · (B_i W_i^O + b_i^O))``: rows ``(G, K, d)`` -> ``(G, K, d)``."""
        heads = branch_heads(self, rows, padding_mask)  # (G, M, K, d_b)
        kappa = self.kappa_logits.softmax(-1)
        alpha = self.alpha_logits.softmax(-1)
        branches = torch.einsum("gmkc,mcd->gkmd", heads, self.out_weight.to(heads.dtype)) + self.out_bias
        branches = branches * kappa.unsqueeze(-1)  # (G, K, M, d)
        hidden = torch.einsum("gkmd,mdf->gkmf", branches, self.ffn_in_weight.to(branches.dtype))
        hidden = F.relu(hidden + self.ffn_in_bias)
        ffn = torch.einsum("gkmf,mfd->gkmd", hidden, self.ffn_out_weight.to(hidden.dtype)) + self.ffn_out_bias
        return torch.einsum("gkmd,m->gkd", ffn, alpha.to(ffn.dtype))

    def compose(self, rows: Tensor, padding_mask: Tensor) -> tuple[Tensor, Tensor]:
        update = F.dropout(self.branch_attention(rows, padding_mask), p=self.dropout, training=self.training)
        composed = self.layer_norm(rows + update.to(rows.dtype))  # H, (G, K, d)
        real = (~padding_mask).unsqueeze(-1).to(composed.dtype)
        return composed, (composed * real).sum(1) / real.sum(1)
