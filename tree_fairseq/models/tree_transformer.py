"""The Tree Transformer of Nguyen et al. (ICLR 2020, "Tree-structured Attention with Hierarchical
Accumulation", arXiv 2002.08046): the fairseq wiring of :mod:`tree_fairseq.modules.tree_attention`.

Encoder (section 4.4, eqs. 12-20). The leaves are the source tokens, embedded as in fairseq's
transformer (scaled token embeddings plus positional embeddings); the nodes are the node labels,
embedded with their own table (the task's node dictionary, never the target vocabulary), scaled,
without position. Each layer is ``φ`` of eqs. 19-20 over the sequence ``[N; L]``: tree
self-attention (hierarchical accumulation of the values, eqs. 5-10; subtree mask, eq. 11), then
residual, layer norm and a feed-forward network shared by nodes and leaves, pre- or post-norm as
fairseq's ``--encoder-normalize-before``. The tree structure (:func:`build_tree_structure`) is
built once per batch, shared by all encoder layers and handed to the decoder in ``encoder_out``.

Decoder (section 4.4, eqs. 21-24). fairseq's transformer decoder whose encoder attention is the
tree cross-attention over ``[N̄'; L]``; ``N̄'`` is accumulated from the encoder output with each
layer's own weights. It does not depend on the target, so in incremental decoding every layer
computes its :class:`TreeMemory` once per source sentence (not once per beam hypothesis) and
keeps it in the incremental state; the hypotheses of a sentence, side by side in the beam, attend
to it together, as one sentence with several queries, so each step reads a sentence's keys and
values once, not once per hypothesis. When the beam's rows change sentence (a finished sentence
leaving the batch) the memory of the remaining sentences is selected again (per hypothesis only
if the rows no longer come in equal groups): the tree part of the encoder output is reordered
lazily (:class:`TreeSource`). ``--no-tree-cross-attention`` keeps
fairseq's decoder unchanged (attention over the leaves only). Note that under the subtree mask
leaves attend to leaves only, so without tree cross-attention the nodes reach the decoder only
with ``--no-subtree-mask``.

Choices the paper leaves open, made here:

- leaf weights ``w = L·u`` (eqs. 16, 23): one ``u ∈ R^d`` per attention module, shared by its
  heads as printed (``--leaf-weight-per-head``: one per head);
- hierarchical embeddings (eq. 9): every attention module, encoder and decoder, owns its tables
  (``--hier-embed-size`` rows each, ``d_head / 2`` wide, shared by the heads of that module). They
  are added to values projected by that layer's own ``W^V``, so a table shared across layers would
  have to serve different value spaces; the cost is ``2 · size · d_head / 2`` parameters per layer;
- node labels and tokens use the same embedding scale, ``layernorm_embedding`` and dropout; the
  node-label table is never shared with the token tables, even with ``--share-all-embeddings``;
- the cross-attention weights handed to fairseq (``attn``, used for ``--print-alignment``) are
  the leaf columns of the head-averaged weights, so that they index source tokens as fairseq's
  alignment code expects; ``TreeCrossAttention.attend`` averages over heads, so
  ``--alignment-heads`` has no effect.
"""

from dataclasses import dataclass
from typing import NamedTuple

import torch
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
)
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
    transformer_wmt_en_de,
)
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import Tensor

from tree_fairseq.models.common import (
    FeedForwardBlock,
    TokenColumns,
    TreeSourceEncoder,
    TreeSourceTransformerModel,
    arch_defaults,
    option,
    sentence_groups,
    tiny_defaults,
)
from tree_fairseq.modules.hierarchical_accumulation import TreeStructure, build_tree_structure
from tree_fairseq.modules.tree_attention import (
    TreeCrossAttention,
    TreeMemory,
    TreeSelfAttention,
    key_padding_mask,
    tree_attention_mask,
)


@dataclass
class TreeTransformerConfig(TransformerConfig):
    """fairseq's transformer options plus the Tree Transformer's (Table 3 ablations included)."""

    hier_embed_size: int = option(
        100,
        "rows of each hierarchical embedding table (vertical and horizontal, eq. 9); "
        "larger indices use the last row (default: 100)",
        minimum=1,
    )
    no_hier_embed: bool = option(False, "no hierarchical embeddings: eq. 8 instead of eq. 10 (Table 3 ablation)")
    no_subtree_mask: bool = option(
        False,
        "no subtree masking (eq. 11) in the encoder: every query sees every node and "
        "leaf (Table 3 ablation)",
    )
    no_tree_cross_attention: bool = option(
        False,
        "the decoder attends to the encoder's leaves with fairseq's attention instead of "
        "the tree cross-attention over nodes and leaves (eqs. 21-24)",
    )
    leaf_weight_per_head: bool = option(
        False,
        "one leaf-weight vector u per attention head (w = L·u, eqs. 16, 23) instead of the "
        "printed u ∈ R^d shared by the heads",
    )


class TreeTransformerEncoderLayer(FeedForwardBlock, TransformerEncoderLayerBase):
    """``φ`` of eqs. 19-20: tree self-attention over ``[N; L]``, then fairseq's residual, layer
    norm and feed-forward network, applied to nodes and leaves alike."""

    def build_self_attention(self, embed_dim, cfg):
        return TreeSelfAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            subtree_masking=not cfg.no_subtree_mask,
            dropout=cfg.attention_dropout,
            hierarchical_embeddings=not cfg.no_hier_embed,
            num_hierarchical_embeddings=cfg.hier_embed_size,
            leaf_weight_per_head=cfg.leaf_weight_per_head,
        )

    def forward(self, x: Tensor, structure: TreeStructure, attn_mask: Tensor | None = None) -> Tensor:
        """x: ``(B, m + n, C)``, nodes then leaves -> the same layout. ``attn_mask``: the
        :func:`tree_attention_mask` of ``structure``, shared by the layers (built here if not given)."""
        num_nodes = structure.node_padding_mask.size(1)
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        leaves, nodes = self.self_attn(x[:, num_nodes:], x[:, :num_nodes], structure, attn_mask)
        x = self.residual_connection(self.dropout_module(torch.cat([nodes, leaves], dim=1)), residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)
        return self.forward_feed_forward(x)


class TreeTransformerEncoder(TreeSourceEncoder, TransformerEncoderBase):
    """The tree encoder (eqs. 12-20); fairseq's transformer encoder for embeddings, positions,
    dropout and the final layer norm.

    Its output is fairseq's encoder dictionary (``encoder_out`` holds the leaves, ``(n, B, C)``)
    plus ``tree_source`` (one :class:`TreeSource`: leaves, nodes and structure, one row per
    source sentence, never reordered); ``source_rows`` (:class:`SentenceRowsReorder`) gives
    the ``tree_source`` row of each row of a reordered output.
    """

    def __init__(self, cfg, dictionary, embed_tokens, embed_node_labels):
        super().__init__(cfg, dictionary, embed_tokens)
        self.embed_node_labels = embed_node_labels

    def build_encoder_layer(self, cfg):
        return TreeTransformerEncoderLayer(cfg)

    def encode_tree(self, src_tokens, src_lengths, src_node_labels, src_node_spans, src_node_padding_mask,
                    leaf_padding_mask, return_all_hiddens):
        structure = build_tree_structure(src_node_spans, leaf_padding_mask, src_node_padding_mask)
        num_nodes = src_node_labels.size(1)
        leaves, leaf_embedding = self.forward_embedding(src_tokens)
        x = torch.cat([self.forward_node_embedding(src_node_labels), leaves], dim=1)  # (B, m + n, C)
        x = x.masked_fill(key_padding_mask(structure).unsqueeze(-1), 0)

        def leaves_of(x):
            return x[:, num_nodes:].transpose(0, 1)  # (n, B, C) as fairseq's encoder states

        encoder_states = [leaves_of(x)] if return_all_hiddens else []
        # One attention mask per batch (per masking option), shared by all layers.
        attn_masks = {}
        for layer in self.layers:
            subtree_masking = layer.self_attn.subtree_masking
            if subtree_masking not in attn_masks:
                attn_masks[subtree_masking] = tree_attention_mask(structure, subtree_masking, x.dtype)
            x = layer(x, structure, attn_masks[subtree_masking])
            if return_all_hiddens:
                encoder_states.append(leaves_of(x))
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [leaves_of(x)],  # (n, B, C)
            "encoder_padding_mask": [leaf_padding_mask],  # (B, n)
            "tree_source": [TreeSource(x[:, num_nodes:], x[:, :num_nodes], structure)],
            "encoder_embedding": [leaf_embedding],  # (B, n, C)
            "encoder_states": encoder_states,  # list of (n, B, C)
            "src_tokens": [],
            "src_lengths": [src_lengths.view(-1, 1)],
        }

    def reorder_encoder_out(self, encoder_out, new_order):
        """The tree source is never reordered, only ``source_rows``: a beam step costs one index
        per hypothesis, not a copy of every tree tensor."""
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        reordered["tree_source"] = encoder_out["tree_source"]
        return reordered


class TreeSource(NamedTuple):
    """What a tree cross-attention reads from the encoder: one row per source sentence."""

    leaves: Tensor  # (B, n, C)
    nodes: Tensor  # (B, m, C)
    structure: TreeStructure


class TreeSourceRows(NamedTuple):
    """A :class:`TreeSource` and the sentence of each decoder row (``None``: row b is sentence b)."""

    source: TreeSource
    rows: Tensor | None  # (B',) long


class TreeEncoderAttention(FairseqIncrementalState, TreeCrossAttention):
    """:class:`TreeCrossAttention` (eqs. 21-24) called the way fairseq's decoder layer calls its
    encoder attention (``(T, B, C)`` queries, a :class:`TreeSourceRows` as the key).

    With an incremental state, the :class:`TreeMemory` of every source sentence is computed at
    the first step (once per sentence, not per hypothesis) and kept there. Decoder rows that come
    in equal groups of consecutive rows per sentence (the beam: ``k`` hypotheses side by side)
    attend as one sentence with ``k·T`` queries over that sentence's memory; the selection of the
    sentences (or, for rows in no such grouping, the gathering per row) is redone only when the
    decoder hands in other rows (the decoder passes the same ``rows`` object while the rows still
    map to the same sentences)."""

    def forward(
        self,
        query: Tensor,
        key: TreeSourceRows,
        value=None,
        key_padding_mask=None,
        incremental_state=None,
        static_kv: bool = True,
        need_weights: bool = False,
        need_head_weights: bool = False,
    ):
        """query ``(T, B, C)`` -> output ``(T, B, C)`` and, if asked, the head-averaged attention
        weights on the nodes and leaves, ``(B, T, m + n)`` (``(1, B, T, m + n)`` for
        ``need_head_weights``); the decoder hands fairseq their leaf columns.
        ``value`` and ``key_padding_mask`` are implied by ``key``."""
        memory, group = self._row_memory(key, incremental_state)
        steps, rows, dim = query.shape
        queries = query.transpose(0, 1).reshape(rows // group, group * steps, dim)  # a sentence's rows together
        out, weights = self.attend(queries, memory, need_weights or need_head_weights,
                                   step=incremental_state is not None)
        out = out.reshape(rows, steps, -1)
        if weights is not None:
            weights = weights.reshape(rows, steps, -1)
            if need_head_weights:
                weights = weights.unsqueeze(0)
        return out.transpose(0, 1), weights

    def _row_memory(self, key: TreeSourceRows, incremental_state) -> tuple[TreeMemory, int]:
        """The :class:`TreeMemory` to attend over and the number of consecutive decoder rows that
        share each of its sentences."""
        cached = self.get_incremental_state(incremental_state, "tree_memory")
        if cached is not None and cached["rows"] is key.rows:
            return cached["memory"], cached["group"]
        per_sentence = cached["per_sentence"] if cached is not None else None
        if per_sentence is None:
            source = key.source
            per_sentence = self.tree_memory(source.leaves, source.nodes, source.structure)
        memory, group = per_sentence, 1
        if key.rows is not None:
            sentences, group = sentence_groups(key.rows)
            if sentences is None:
                memory = per_sentence.index_select(key.rows)
            elif not torch.equal(sentences, torch.arange(per_sentence.keys.size(0), device=sentences.device)):
                memory = per_sentence.index_select(sentences)
        if incremental_state is not None:
            cached = {"per_sentence": per_sentence, "rows": key.rows, "memory": memory, "group": group}
            self.set_incremental_state(incremental_state, "tree_memory", cached)
        return memory, group


class TreeTransformerDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer with tree cross-attention as its encoder attention."""

    def build_encoder_attention(self, embed_dim, cfg):
        return TreeEncoderAttention(
            embed_dim,
            cfg.decoder.attention_heads,
            kdim=cfg.encoder.embed_dim,
            dropout=cfg.attention_dropout,
            hierarchical_embeddings=not cfg.no_hier_embed,
            num_hierarchical_embeddings=cfg.hier_embed_size,
            leaf_weight_per_head=cfg.leaf_weight_per_head,
        )


class TreeTransformerDecoder(TokenColumns, TransformerDecoderBase):
    """fairseq's transformer decoder attending over the source tree (eqs. 21-24); the attention
    weights it hands back are the leaf columns (:class:`TokenColumns`)."""

    def token_columns(self, encoder_out) -> slice:
        return slice(encoder_out["tree_source"][0].nodes.size(1), None)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return TreeTransformerDecoderLayer(cfg, no_encoder_attn)

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None, **kwargs):
        if encoder_out is not None:
            # A beam step that keeps every row on its sentence (the usual case) hands back the
            # same source_rows tensor (SentenceRowsReorder), so the layers keep their gathering.
            rows = encoder_out["source_rows"][0] if encoder_out.get("source_rows") else None
            # fairseq's layers hand encoder_out["encoder_out"][0] to their encoder attention as its key.
            key = TreeSourceRows(encoder_out["tree_source"][0], rows)
            encoder_out = {**encoder_out, "encoder_out": [key]}
        return super().extract_features(prev_output_tokens, encoder_out, incremental_state, **kwargs)


@register_model("tree_transformer")
class TreeTransformerModel(TreeSourceTransformerModel):
    """Tree Transformer (Nguyen et al., ICLR 2020) for ``--task tree_translation``: a
    :class:`TreeTransformerEncoder` and a :class:`TreeTransformerDecoder` (or fairseq's decoder
    with ``--no-tree-cross-attention``). Options: :class:`TreeTransformerConfig`."""

    config_class = TreeTransformerConfig
    encoder_class = TreeTransformerEncoder
    error_name = "tree_transformer"

    @classmethod
    def set_defaults(cls, args):
        tree_transformer(args)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        decoder_class = TransformerDecoderBase if cfg.no_tree_cross_attention else TreeTransformerDecoder
        return decoder_class(cfg, tgt_dict, embed_tokens)


# Architectures: fairseq's transformer of the same size, plus the tree options' defaults and the
# paper's settings (section 5.1, appendix 7.4).


@register_model_architecture("tree_transformer", "tree_transformer")
def tree_transformer(args):
    arch_defaults(args, hier_embed_size=100, no_hier_embed=False, no_subtree_mask=False,  # |E| = 100 (appendix 7.4)
                  no_tree_cross_attention=False, leaf_weight_per_head=False)
    base_architecture(args)


@register_model_architecture("tree_transformer", "tree_transformer_iwslt_de_en")
def tree_transformer_iwslt_de_en(args):
    """IWSLT (appendix 7.4): d = 512, d_ffn = 1024, dropout 0.3; 4 heads and 6 + 6 layers as
    fairseq's transformer_iwslt_de_en (the paper gives neither)."""
    args.dropout = getattr(args, "dropout", 0.3)
    transformer_iwslt_de_en(args)  # 512 / ffn 1024 / 4 heads, 6 + 6 layers, attention dropout 0
    tree_transformer(args)


@register_model_architecture("tree_transformer", "tree_transformer_wmt_en_de")
def tree_transformer_wmt_en_de(args):
    """WMT base (appendix 7.4): d = 512, d_ffn = 2048, dropout 0.1; 8 heads, 6 + 6 layers."""
    transformer_wmt_en_de(args)  # 512 / ffn 2048 / 8 heads, dropout 0.1, attention dropout 0
    tree_transformer(args)


@register_model_architecture("tree_transformer", "tree_transformer_wmt_en_de_big")
def tree_transformer_wmt_en_de_big(args):
    """WMT big (section 5.1): d = 1024; the rest as the big model of Ott et al. (2018), whose
    settings the paper replicates: fairseq's transformer_vaswani_wmt_en_de_big, ffn 4096, 16
    heads, dropout 0.3, no attention dropout (fairseq's transformer_wmt_en_de_big adds 0.1)."""
    transformer_vaswani_wmt_en_de_big(args)  # 1024 / ffn 4096 / 16 heads, dropout 0.3
    tree_transformer(args)


@register_model_architecture("tree_transformer", "tree_transformer_tiny")
def tree_transformer_tiny(args):
    """For tests: 32 / ffn 64 / 4 heads (d_head 8), 2 + 2 layers."""
    tiny_defaults(args)
    tree_transformer(args)
