"""Tree-based attention (Nguyen et al., ICLR 2020, arXiv 2002.08046, sections 4.3-4.4,
equations 11-24): subtree masking, encoder self-attention over [nodes; leaves] and decoder
cross-attention over the accumulated source tree.

Both modules are multi-head with q/k/v/out projections like fairseq's ``MultiheadAttention``
and stop at ``Att · W^O``: the residual, layer norm and feed-forward of ``φ`` (eqs. 19-20) belong
to the layer that calls them. Choices the paper leaves open, made here:

- scores are scaled by ``1/sqrt(d_head)`` per head (the paper writes single-head ``1/sqrt(d)``);
- ``w = L·u_s`` (eq. 16) and ``w = L·u_c`` (eq. 23) take ``L`` as the layer's input leaves
  (the encoder output for cross-attention), no bias, no normalisation. As printed, ``u ∈ R^d``
  is one vector per attention module, so every head weighs leaf j by the same ``w_j``;
  ``leaf_weight_per_head=True`` gives each head its own ``u`` instead (``d x H`` parameters);
- keys and values are ordered nodes first, ``[N; L]``, as in eqs. 17, 18 and 24;
- a query with no visible key (a padded node under the subtree mask) gets zero attention
  weights instead of NaN, and every padded query's output is zero.

The attention itself is torch's fused ``scaled_dot_product_attention`` (memory linear in the
length on the flash backends); the explicit ``(B, H, Q, K)`` weights are built only when
``need_weights`` asks for them or for a decoding step (one query per row). The encoder's mask
(:func:`tree_attention_mask`) is built once per batch and shared by all layers.
See :mod:`tree_fairseq.modules.hierarchical_accumulation` for the accumulation's own choices.
"""

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tree_fairseq.modules.hierarchical_accumulation import (
    HierarchicalEmbedding,
    TreeStructure,
    hierarchical_accumulation,
)


def key_padding_mask(structure: TreeStructure) -> Tensor:
    """``(B, m + n)`` bool, True at padded nodes and leaves, in ``[N; L]`` order."""
    return torch.cat([structure.node_padding_mask, structure.leaf_padding_mask], dim=1)


def subtree_mask(structure: TreeStructure) -> Tensor:
    """The subtree masking function ``μ`` of eq. 11 as a ``(B, m + n, m + n)`` bool mask over
    queries × keys, both ordered ``[N; L]``; True where the affinity gets ``-inf``.

    A node query sees the leaves of its span and the nodes of its subtree, itself included; a
    leaf query sees the leaves only. Padded nodes and leaves are blocked as keys. A padded node
    query sees nothing (the attention gives it a zero output); a padded leaf query sees the
    real leaves.
    """
    batch_size, num_nodes, num_leaves = structure.membership.shape
    real_leaf = ~structure.leaf_padding_mask.unsqueeze(1)  # (B, 1, n)
    node_query = torch.cat([structure.containment, structure.membership], dim=2)  # (B, m, m + n)
    leaf_query = torch.cat(
        [
            structure.membership.new_zeros(batch_size, num_leaves, num_nodes),
            real_leaf.expand(batch_size, num_leaves, num_leaves),
        ],
        dim=2,
    )  # (B, n, m + n)
    return ~torch.cat([node_query, leaf_query], dim=1)


def tree_attention_mask(
    structure: TreeStructure, subtree_masking: bool = True, dtype: torch.dtype = torch.float32
) -> Tensor:
    """The additive mask of :class:`TreeSelfAttention` for ``scaled_dot_product_attention``:
    ``(B, 1, m + n, m + n)`` (``(B, 1, 1, m + n)`` without subtree masking) of ``dtype``, 0 where
    a query sees a key and ``-inf`` where :func:`subtree_mask` (or the key padding) blocks it.

    A query that would see no key (a padded node under the subtree mask) sees the first key
    instead, so that the fused softmax stays finite; :class:`TreeSelfAttention` zeroes the output
    of every padded query. Build it once per batch and hand it to every layer.
    """
    if subtree_masking:
        blocked = subtree_mask(structure).unsqueeze(1)  # (B, 1, m + n, m + n)
    else:
        blocked = key_padding_mask(structure)[:, None, None, :]  # (B, 1, 1, m + n)
    if blocked.size(-1) > 0:
        fully_blocked = blocked.all(dim=-1)  # (B, 1, Q)
        blocked = blocked.clone()
        blocked[..., 0] &= ~fully_blocked
    return torch.zeros(blocked.shape, dtype=dtype, device=blocked.device).masked_fill(blocked, float("-inf"))


def _masked_softmax(scores: Tensor, blocked: Tensor) -> Tensor:
    """Softmax over the last axis of ``scores (B, H, Q, K)`` with ``blocked`` (broadcastable,
    True = -inf), computed in at least float32. A fully blocked row gives all-zero weights."""
    fully_blocked = blocked.all(dim=-1, keepdim=True)
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    # Unblocking a fully blocked row keeps its softmax finite; its weights are zeroed below.
    probs = scores.masked_fill(blocked & ~fully_blocked, float("-inf")).softmax(dim=-1)
    return probs.masked_fill(fully_blocked, 0)


class _TreeAttention(nn.Module):
    """Projections, hierarchical accumulation of the values and masked attention, shared by
    the encoder self-attention and the decoder cross-attention."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        kdim: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        hierarchical_embeddings: bool = True,
        num_hierarchical_embeddings: int = 64,
        shared_hierarchical_embedding: HierarchicalEmbedding | None = None,
        leaf_weight_per_head: bool = False,
    ):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        kdim = kdim or embed_dim
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(kdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        # u of w = L·u (eqs. 16, 23): u ∈ R^d shared by the heads, or one per head.
        self.leaf_weight_per_head = leaf_weight_per_head
        self.leaf_weight = nn.Linear(kdim, num_heads if leaf_weight_per_head else 1, bias=False)
        if not hierarchical_embeddings:
            self.hierarchical_embedding = None
        elif shared_hierarchical_embedding is not None:
            self.hierarchical_embedding = shared_hierarchical_embedding
        else:
            self.hierarchical_embedding = HierarchicalEmbedding(self.head_dim, num_hierarchical_embeddings)
        self.reset_parameters()

    def reset_parameters(self):
        # As fairseq's MultiheadAttention.
        gain = 1 / math.sqrt(2) if self.k_proj.in_features == self.embed_dim else 1.0
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=gain)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)
        # w_j = l_j · u of order 1 for layer-normalised leaves.
        nn.init.normal_(self.leaf_weight.weight, std=self.leaf_weight.in_features**-0.5)

    def upgrade_state_dict_named(self, state_dict, name):
        """A checkpoint with one ``u`` per head (this module's default before the shared ``u`` of
        eqs. 16, 23, saved before the option existed) loads as ``leaf_weight_per_head=True``.

        The reverse, a checkpoint of the shared ``u`` into a module built with
        ``leaf_weight_per_head`` (``--leaf-weight-per-head`` given to resume a run trained
        without it), is refused in one line rather than expanded to a copy of ``u`` per head:
        that checkpoint can only come from a run trained without the option, and the expansion
        would silently turn its resume into another model (and another set of parameters for the
        optimizer state saved with it)."""
        weight = state_dict.get(f"{name}.leaf_weight.weight")
        if weight is None or weight.size(0) == self.leaf_weight.out_features:
            return
        if weight.size(0) == 1:
            raise ValueError(f"--leaf-weight-per-head: {name}.leaf_weight.weight has 1 row, the u shared by the "
                             "heads of a run trained without --leaf-weight-per-head; load it without the option")
        if weight.size(0) != self.num_heads:
            raise ValueError(f"{name}.leaf_weight.weight has {weight.size(0)} rows: 1 (u shared by the heads) "
                             f"or {self.num_heads} (one per head) expected")
        self.leaf_weight_per_head = True
        self.leaf_weight = nn.Linear(weight.size(1), weight.size(0), bias=False).to(weight.device)

    def _split_heads(self, x: Tensor) -> Tensor:
        """``(B, L, H·dh)`` -> ``(B, H, L, dh)``."""
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def _merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, L, dh)`` -> ``(B, L, H·dh)``."""
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), self.embed_dim)

    def _keys_and_values(
        self, leaves: Tensor, nodes: Tensor, structure: TreeStructure
    ) -> tuple[Tensor, Tensor]:
        """Keys ``[N W^K; L W^K]`` and values ``[N̄'; L W^V]`` (eqs. 16, 23), each ``(B, H, m + n, dh)``."""
        num_nodes = nodes.size(1)
        source = torch.cat([nodes, leaves], dim=1)  # (B, m + n, kdim)
        keys = self._split_heads(self.k_proj(source))
        values = self._split_heads(self.v_proj(source))
        node_values, leaf_values = values[:, :, :num_nodes], values[:, :, num_nodes:]
        leaf_weights = self.leaf_weight(leaves).transpose(1, 2)  # (B, H or 1, n)
        leaf_weights = leaf_weights.expand(-1, self.num_heads, -1)  # (B, H, n)
        accumulated = hierarchical_accumulation(
            leaf_values, node_values, leaf_weights, structure, self.hierarchical_embedding
        )
        return keys, torch.cat([accumulated.to(leaf_values.dtype), leaf_values], dim=2)

    def _attend(self, query: Tensor, keys: Tensor, values: Tensor, blocked: Tensor) -> tuple[Tensor, Tensor]:
        """Eqs. 17-18 / 24 followed by ``W^O``, the explicit way. query ``(B, Q, d)``; keys,
        values ``(B, H, K, dh)``; blocked ``(B, 1, Q or 1, K)``. Returns the output ``(B, Q, d)``
        and the attention weights ``(B, H, Q, K)`` (before dropout)."""
        queries = self._split_heads(self.q_proj(query)) * self.head_dim**-0.5
        probs = _masked_softmax(queries @ keys.transpose(-1, -2), blocked)
        attended = F.dropout(probs, p=self.dropout, training=self.training).to(values.dtype) @ values
        return self.out_proj(self._merge_heads(attended)), probs

    def _fused_attend(self, query: Tensor, keys: Tensor, values: Tensor, attn_mask: Tensor) -> Tensor:
        """:meth:`_attend` with torch's fused attention and without the weights. attn_mask:
        additive, broadcastable to ``(B, H, Q, K)``, with at least one finite entry per row."""
        queries = self._split_heads(self.q_proj(query))
        if attn_mask.is_floating_point() and attn_mask.dtype != queries.dtype:
            attn_mask = attn_mask.to(queries.dtype)
        attended = F.scaled_dot_product_attention(
            queries,
            keys.to(queries.dtype),
            values.to(queries.dtype),
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.out_proj(self._merge_heads(attended))


class TreeSelfAttention(_TreeAttention):
    """Encoder tree-based self-attention (eqs. 12-18, and ``Att · W^O`` of eqs. 19-20).

    Options for the ablations of the paper's Table 3: ``hierarchical_embeddings=False`` drops
    ``E`` (eq. 8 instead of eq. 10), ``subtree_masking=False`` lets every query see every real
    node and leaf. ``shared_hierarchical_embedding`` makes several layers share one table.
    """

    def __init__(self, embed_dim: int, num_heads: int, subtree_masking: bool = True, **kwargs):
        super().__init__(embed_dim, num_heads, **kwargs)
        self.subtree_masking = subtree_masking

    def forward(
        self, leaves: Tensor, nodes: Tensor, structure: TreeStructure, attn_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """leaves ``(B, n, d)``, nodes ``(B, m, d)`` -> new leaves ``(B, n, d)`` and nodes ``(B, m, d)``;
        zero at padded positions. ``attn_mask``: :func:`tree_attention_mask` of ``structure``
        with this module's ``subtree_masking``, built here if not given."""
        num_nodes = nodes.size(1)
        keys, values = self._keys_and_values(leaves, nodes, structure)
        padding = key_padding_mask(structure)  # (B, m + n)
        if attn_mask is None:
            attn_mask = tree_attention_mask(structure, self.subtree_masking, leaves.dtype)
        out = self._fused_attend(torch.cat([nodes, leaves], dim=1), keys, values, attn_mask)
        out = out.masked_fill(padding.unsqueeze(-1), 0)
        return out[:, num_nodes:], out[:, :num_nodes]


class TreeMemory(NamedTuple):
    """The query-independent half of the cross-attention of one layer: computed once per
    source batch, kept by an incremental decoder and reordered with the beam."""

    keys: Tensor  # (B, H, m + n, dh)  [N W^K; L W^K]
    values: Tensor  # (B, H, m + n, dh)  [N̄'; L W^V]
    key_padding_mask: Tensor  # (B, m + n) bool
    num_nodes: int  # m: the first m keys are nodes

    def index_select(self, order: Tensor) -> "TreeMemory":
        """The memory of the sentences ``order`` (LongTensor of batch indices)."""
        return TreeMemory(
            self.keys.index_select(0, order),
            self.values.index_select(0, order),
            self.key_padding_mask.index_select(0, order),
            self.num_nodes,
        )


class TreeCrossAttention(_TreeAttention):
    """Decoder tree-based cross-attention (eqs. 21-24): target queries attend over
    ``[N̄'; L]``, ``N̄'`` accumulated from the encoder output with this layer's own ``W^V``,
    ``u_c`` and embeddings. No subtree mask (the queries are not tree elements).

    ``kdim`` is the encoder's dimension when it differs from the decoder's.
    """

    def tree_memory(self, leaves: Tensor, nodes: Tensor, structure: TreeStructure) -> TreeMemory:
        """Encoder leaves ``(B, n, kdim)`` and nodes ``(B, m, kdim)`` -> :class:`TreeMemory`."""
        keys, values = self._keys_and_values(leaves, nodes, structure)
        return TreeMemory(keys, values, key_padding_mask(structure), nodes.size(1))

    def attend(
        self, query: Tensor, memory: TreeMemory, need_weights: bool = False, step: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """query ``(B, T, d)`` -> output ``(B, T, d)`` and, if ``need_weights``, the attention
        weights averaged over heads ``(B, T, m + n)`` (columns ``:memory.num_nodes`` are nodes).
        ``step``: a decoding step (a few queries per sentence: one per hypothesis)."""
        blocked = memory.key_padding_mask[:, None, None, :]  # (B, 1, 1, m + n)
        if need_weights or step or query.size(1) == 1:
            # A decoding step takes the explicit way too: its weights are only (B, H, k, m + n)
            # for k hypotheses, and on CPU it is 2-3x faster than the fused kernel there.
            out, probs = self._attend(query, memory.keys, memory.values, blocked)
            return out, probs.mean(dim=1) if need_weights else None
        # A sentence without a real key (never in real batches) attends to nothing, as in _attend:
        # its first key is unblocked for the fused softmax, and its attention output zeroed.
        fully_blocked = blocked.all(dim=-1, keepdim=True)  # (B, 1, 1, 1)
        if blocked.size(-1) > 0:
            blocked = torch.cat([blocked[..., :1] & ~fully_blocked, blocked[..., 1:]], dim=-1)
        queries = self._split_heads(self.q_proj(query))
        attended = F.scaled_dot_product_attention(
            queries,
            memory.keys.to(queries.dtype),
            memory.values.to(queries.dtype),
            attn_mask=~blocked,
            dropout_p=self.dropout if self.training else 0.0,
        )
        attended = attended.masked_fill(fully_blocked, 0)
        return self.out_proj(self._merge_heads(attended)), None

    def forward(
        self,
        query: Tensor,
        leaves: Tensor,
        nodes: Tensor,
        structure: TreeStructure,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """:meth:`attend` over :meth:`tree_memory`, without caching."""
        return self.attend(query, self.tree_memory(leaves, nodes, structure), need_weights)
