"""The Treeformer (Patel and Flanigan, "Forming Trees with Treeformers", arXiv 2207.06960): the
fairseq wiring of :mod:`tree_fairseq.modules.treeformer_chart` (eqs. 1-2; docs/methods.md,
section 4, lists each printed equation and setting against this code).

The structure is induced from the text, so the model reads only ``src_tokens`` and
``src_lengths``: it trains on fairseq's ``--task translation`` with a plain fairseq-preprocess
data-bin, and on ``--task tree_translation``, whose tree keys it accepts and ignores.

Encoder: fairseq's transformer encoder, then the CKY-style chart over its output (§3.2, "Use in
Downstream Tasks"): its first row is the encoder's tokens, and it builds the spans of
2 … H tokens, ``--chart-max-height H``, default 10 (§4). EOS is treated as padding by the
chart, so it lies in no span; it stays a token the decoder attends to.

Decoder: fairseq's transformer decoder; its cross-attention memory is the whole chart, the tokens
(the chart's first row) followed by the cells above them,
``encoder_out["encoder_out"] = [tokens; cells]`` ``(n + m, B, C)`` with the combined key
padding mask ``(B, n + m)``, so fairseq's own cross-attention, its key/value cache and beam
reordering serve it unchanged. Cells of spans that hold padding or EOS are masked. The cells are
the chart's ``L·n`` cells height by height (:meth:`Chart.flatten`; ``L = min(H, n) - 1`` for the
batch's width ``n``) less those masked in every sentence of the batch: the spans that run past
the longest sentence or over its EOS (the last h columns of height h), and padding every sentence
shares. A masked key gets no weight, so leaving them out changes no output; it saves their
keys and values and, at every decoder step, the reading of them (about 6 of every 25 cells at
n = 25). ``encoder_out["chart_cells"]`` ``(m,)`` is each kept cell's index ``(h - 2)·n + i``
in the flattened chart (the span of h tokens from i), and ``encoder_out["chart_padding_mask"]``
``(B, m)`` is the cells' part of the key padding mask.

Options: ``--chart-composition gelu_layernorm`` and ``--chart-pooling vector``, this plugin's
earlier forms of eqs. 1 and 2 (checkpoints of those forms load with them unasked).

Choices, made here:

- the chart reads the encoder's final output (after the final layer norm with
  ``--encoder-normalize-before``); the tokens ``r_{i,i}`` enter the chart unchanged, so the token
  part of the memory is exactly fairseq's encoder output.
- the cross-attention weights handed to fairseq (``attn``, for ``--print-alignment``) are the
  token columns of the head-averaged weights, so that they index source tokens as fairseq's
  alignment code expects.
"""
from dataclasses import dataclass

import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerEncoderBase,
)
from fairseq.models.transformer.transformer_legacy import base_architecture, transformer_iwslt_de_en

from tree_fairseq.models.common import (
    SentenceCrossAttentionDecoder,
    TextSourceEncoder,
    TextSourceTransformerModel,
    TokenColumns,
    arch_defaults,
    option,
    tiny_defaults,
)
from tree_fairseq.modules.treeformer_chart import COMPOSITIONS, POOLINGS, TreeformerChart


@dataclass
class TreeformerConfig(TransformerConfig):
    """fairseq's transformer options plus the chart's."""

    chart_max_height: int = option(
        10,
        "H: the longest span of the chart, in tokens; the chart holds the tokens and the spans "
        "of 2 … H tokens (default: 10)",
        minimum=1,
    )
    chart_composition: ChoiceEnum(COMPOSITIONS) = option(
        "linear",
        "composition of a split: 'linear', W·[left; right] (eq. 1); 'gelu_layernorm', "
        "LayerNorm(GELU(W·[left; right] + b)) (this plugin's earlier form)",
    )
    chart_pooling: ChoiceEnum(POOLINGS) = option(
        "query_key",
        "pooling of a span's splits: 'query_key', softmax(K c · Q w / sqrt(d)) (eq. 2); "
        "'vector', softmax(u · c), one learned u (this plugin's earlier form)",
    )
    no_chart_checkpointing: bool = option(
        False,
        "keep each chart height's gathered halves for the backward pass instead of recomputing "
        "them: faster, but O(n·H²·d) training memory per sentence instead of O(n·H·d)",
    )


class TreeformerEncoder(TextSourceEncoder, TransformerEncoderBase):
    """fairseq's transformer encoder followed by a :class:`TreeformerChart`.

    Its output is fairseq's encoder dictionary whose ``encoder_out`` ``(n + m, B, C)`` and
    ``encoder_padding_mask`` ``(B, n + m)`` hold the tokens then the m chart cells that are real
    in at least one sentence, plus ``chart_padding_mask`` ``(B, m)`` and ``chart_cells`` ``(m,)``
    (each cell's index in :meth:`Chart.flatten`'s ``L·n`` cells). ``encoder_embedding`` and
    ``encoder_states`` are the tokens' only.
    """

    sentence_keys = ("chart_padding_mask",)
    shared_keys = ("chart_cells",)

    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        self.chart = TreeformerChart(
            embed_tokens.embedding_dim,
            cfg.chart_max_height,
            checkpoint_levels=not cfg.no_chart_checkpointing,
            composition=str(cfg.chart_composition),
            pooling=str(cfg.chart_pooling),
        )

    def encode_text(self, src_tokens, src_lengths, return_all_hiddens, token_embeddings):
        encoder_out = self.forward_scriptable(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        tokens = encoder_out["encoder_out"][0]  # (n, B, C)
        token_padding_mask = encoder_out["encoder_padding_mask"][0]  # (B, n)
        chart = self.chart(tokens.transpose(0, 1), token_padding_mask | src_tokens.eq(self.dictionary.eos()))
        cells, cell_padding_mask = chart.flatten()  # (B, L·n, C), (B, L·n)
        kept = (~cell_padding_mask.all(dim=0)).nonzero().squeeze(1)  # (m,): real in some sentence
        if kept.numel() < cell_padding_mask.size(1):
            cells, cell_padding_mask = cells.index_select(1, kept), cell_padding_mask.index_select(1, kept)
        return {
            **encoder_out,
            "encoder_out": [torch.cat([tokens, cells.transpose(0, 1)], dim=0)],  # (n + m, B, C)
            "encoder_padding_mask": [torch.cat([token_padding_mask, cell_padding_mask], dim=1)],
            "chart_padding_mask": [cell_padding_mask],
            "chart_cells": [kept],
        }


class TreeformerDecoder(TokenColumns, SentenceCrossAttentionDecoder):
    """A :class:`SentenceCrossAttentionDecoder` over the tokens and chart cells; the attention
    weights it returns cover the tokens only (:class:`TokenColumns`)."""

    def token_columns(self, encoder_out) -> slice:
        return slice(encoder_out["encoder_out"][0].size(0) - encoder_out["chart_padding_mask"][0].size(1))


@register_model("treeformer")
class TreeformerModel(TextSourceTransformerModel):
    """Treeformer (Patel and Flanigan): a :class:`TreeformerEncoder` and a
    :class:`TreeformerDecoder`, for ``--task translation`` or ``--task tree_translation`` (its trees
    are not read). Options: :class:`TreeformerConfig`."""

    config_class = TreeformerConfig

    @classmethod
    def set_defaults(cls, args):
        treeformer(args)

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        return TreeformerEncoder(cfg, src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        return TreeformerDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


# Architectures: fairseq's transformer of the same name, plus the chart's defaults.


@register_model_architecture("treeformer", "treeformer")
def treeformer(args):
    arch_defaults(args, chart_max_height=10, chart_composition="linear", chart_pooling="query_key",
                  no_chart_checkpointing=False)
    base_architecture(args)


@register_model_architecture("treeformer", "treeformer_iwslt_de_en")
def treeformer_iwslt_de_en(args):
    transformer_iwslt_de_en(args)  # 512 / ffn 1024 / 4 heads, 6 + 6 layers
    treeformer(args)


@register_model_architecture("treeformer", "treeformer_tiny")
def treeformer_tiny(args):
    """For tests: 32 / ffn 64 / 4 heads, 2 + 2 layers, chart height 10."""
    tiny_defaults(args)
    treeformer(args)
