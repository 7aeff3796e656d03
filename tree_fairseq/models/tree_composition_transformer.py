"""Attention as the composition function of a bottom-up tree encoder (Ahmed, Samee & Mercer, ACL
2019, "You Only Need Attention to Traverse Trees"), for translation: the fairseq wiring of
:mod:`tree_fairseq.modules.tree_composition`.

Encoder, by default the paper's constituency model: the leaves are the source words' embeddings
(scaled as fairseq scales them, no positions, no transformer layers); ``--composition-layers``
bottom-up passes of :class:`TreeComposition` (eqs. 4-8: multi-branch attention, per-branch
residual, layer norm and ``κ``, per-branch feed-forward weighed by ``α``, then
``Σ tanh((x̃ + x) W + b)``; all nodes of one height, over the whole batch, in one step) build every
node's state from its children only. fairseq's transformer decoder cross-attends to the node
states and the leaf states, ``[nodes; leaves]`` (:class:`TreeSourceDecoder`).

Options (docs/methods.md, section 5, has the table against the paper):

- ``--composition-leaves contextual``: the leaves are fairseq's transformer encoder output
  (sinusoidal positions, ``--encoder-layers`` self-attention layers; 6 by default) — this
  plugin's earlier model, a translation decoder's usual view of each word in its sentence.
  ``--composition-leaves contextual --encoder-layers 0`` is the paper's "PE on" ablation
  (Table 2): embeddings plus positions. The default, ``embeddings``, takes ``--encoder-layers 0``.
- ``--node-labels``: a node's label embedding (node dictionary, embedded as the tokens: scale,
  ``--layernorm-embedding``, dropout; never the target vocabulary) joins its children's rows, where the paper's dependency form puts the
  parent word (eq. 1's ``X_d``); by default only the children are composed (``X_c``).
- ``--composition-branch-residual head``: eq. 5's other reading (see the module).
- ``--composition-form residual_mean``: this plugin's earlier composition
  (:class:`ResidualMeanComposition`: one residual and layer norm around the branches' sum, the
  mean of the rows as the parent).
- ``--composition-branches`` (``M``) defaults to the encoder's attention heads, each branch's
  feed-forward size to the encoder's.

Checkpoints of the earlier model (contextual leaves, node labels unless ``--no-node-labels``,
``residual_mean``) carry ``no_node_labels`` and none of the options above; the architectures
give them their earlier values, so they load and run as trained.

Leaf states: each leaf's row of the composition it takes part in (the leaf among its siblings,
see the module); the decoder reads the states of the last pass. ``encoder_states``
(``--return-all-hiddens``) are the leaves' transformer layers (none by default). Several passes:
each re-composes from the previous pass's leaf and node states (the node states as node inputs,
also without ``--node-labels``) with its own weights; the default is one pass, the paper's.
"""

from dataclasses import dataclass
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerEncoderBase
from fairseq.models.transformer.transformer_legacy import base_architecture, transformer_iwslt_de_en
from torch import nn

from tree_fairseq.models.common import (
    TreeSourceEncoder,
    TreeSourceTransformerModel,
    arch_defaults,
    option,
    tiny_defaults,
)
from tree_fairseq.modules.tree_composition import ResidualMeanComposition, TreeComposition, composition_schedule

COMPOSITION_FORMS = ChoiceEnum(["paper", "residual_mean"])
COMPOSITION_LEAVES = ChoiceEnum(["embeddings", "contextual"])
BRANCH_RESIDUALS = ChoiceEnum(["input", "head"])


@dataclass
class TreeCompositionTransformerConfig(TransformerConfig):
    """fairseq's transformer options plus the composition encoder's."""

    composition_layers: int = option(1, "bottom-up composition passes over the leaves (default: 1, the paper's)",
                                     minimum=1)
    composition_branches: Optional[int] = option(
        None,
        "branches M of the multi-branch attention (default: --encoder-attention-heads)",
        minimum=1,
    )
    composition_leaves: COMPOSITION_LEAVES = option(
        "embeddings",
        "the leaves composed: the word embeddings (the paper's; --encoder-layers 0) or "
        "'contextual', fairseq's transformer encoder output (positions, --encoder-layers)",
    )
    node_labels: bool = option(
        False,
        "compose a node's label embedding with its children (the place of the paper's "
        "dependency-tree parent); default: the children only (its constituency form)",
    )
    composition_form: COMPOSITION_FORMS = option(
        "paper",
        "'paper': eqs. 4-8; 'residual_mean': this plugin's earlier form (one residual and "
        "layer norm around the branches' sum, mean of the rows as the parent)",
    )
    composition_branch_residual: BRANCH_RESIDUALS = option(
        "input",
        "eq. 5's residual: the branch's input rows ('input') or its attention head "
        "in its own columns ('head')",
    )


class TreeCompositionEncoder(TreeSourceEncoder, TransformerEncoderBase):
    """The leaves (word embeddings, or fairseq's transformer encoder output), then bottom-up
    composition passes.

    Its output is fairseq's encoder dictionary over ``[nodes; leaves]``: ``encoder_out``
    ``(m + n, B, C)``, ``encoder_padding_mask`` ``(B, m + n)``, plus ``src_node_padding_mask``
    ``(B, m)``; ``encoder_embedding`` and ``encoder_states`` are the leaves' (fairseq's layout).
    """

    sentence_keys = ("src_node_padding_mask",)

    def __init__(self, cfg, dictionary, embed_tokens, embed_node_labels):
        super().__init__(cfg, dictionary, embed_tokens)
        if cfg.composition_leaves == "embeddings":
            if cfg.encoder.layers:
                raise ValueError(
                    "--composition-leaves embeddings composes the word embeddings and takes --encoder-layers 0; "
                    "--composition-leaves contextual composes the transformer encoder's output"
                )
            self.embed_positions = None  # fairseq's forward_embedding then gives the scaled embeddings
        self.embed_node_labels = embed_node_labels if cfg.node_labels else None
        embed_dim = embed_tokens.embedding_dim
        branches = cfg.composition_branches or cfg.encoder.attention_heads
        ffn_dim = cfg.encoder.ffn_embed_dim
        if cfg.composition_form == "paper":
            def build():
                return TreeComposition(embed_dim, branches, ffn_dim, cfg.dropout, cfg.composition_branch_residual)
        else:
            def build():
                return ResidualMeanComposition(embed_dim, branches, ffn_dim, cfg.dropout)
        self.compositions = nn.ModuleList(build() for _ in range(cfg.composition_layers))

    def encode_tree(self, src_tokens, src_lengths, src_node_labels, src_node_spans, src_node_padding_mask,
                    leaf_padding_mask, return_all_hiddens):
        encoder_out = self.forward_scriptable(src_tokens, src_lengths, return_all_hiddens)
        leaves = encoder_out["encoder_out"][0].transpose(0, 1)  # (B, n, C)
        schedule = composition_schedule(src_node_spans, leaf_padding_mask, src_node_padding_mask)
        nodes = None
        if self.embed_node_labels is not None:
            nodes = self.forward_node_embedding(src_node_labels)
        for composition in self.compositions:
            nodes, leaves = composition(leaves, schedule, nodes)
        return {
            **encoder_out,
            "encoder_out": [torch.cat([nodes, leaves], dim=1).transpose(0, 1)],  # (m + n, B, C)
            "encoder_padding_mask": [torch.cat([src_node_padding_mask, leaf_padding_mask], dim=1)],
            "src_lengths": [src_lengths.view(-1, 1)],
            "src_node_padding_mask": [src_node_padding_mask],  # (B, m)
        }


@register_model("tree_composition_transformer")
class TreeCompositionTransformerModel(TreeSourceTransformerModel):
    """Transformer whose encoder composes the source tree bottom-up by attention (Ahmed et al.
    2019), for ``--task tree_translation``: a :class:`TreeCompositionEncoder` and a
    :class:`TreeSourceDecoder`. Options: :class:`TreeCompositionTransformerConfig`."""

    config_class = TreeCompositionTransformerConfig
    encoder_class = TreeCompositionEncoder

    @classmethod
    def set_defaults(cls, args):
        tree_composition_transformer(args)


def composition_defaults(args):
    """The composition options' defaults; the paper's model, or, for the args of a checkpoint of
    the earlier model (which has ``no_node_labels`` and no ``composition_form``), that model.
    Embedding leaves take no encoder layers: set before the architecture's sizes."""
    earlier = hasattr(args, "no_node_labels") and not hasattr(args, "composition_form")
    arch_defaults(args, composition_layers=1, composition_branches=None,
                  composition_leaves="contextual" if earlier else "embeddings")
    args.node_labels = getattr(args, "node_labels", not args.no_node_labels if earlier else False)
    arch_defaults(args, composition_form="residual_mean" if earlier else "paper",
                  composition_branch_residual="input")
    if args.composition_leaves == "embeddings":
        args.encoder_layers = getattr(args, "encoder_layers", 0)


# Architectures: fairseq's transformer of the same name, plus the composition options' defaults.


@register_model_architecture("tree_composition_transformer", "tree_composition_transformer")
def tree_composition_transformer(args):
    composition_defaults(args)
    base_architecture(args)


@register_model_architecture("tree_composition_transformer", "tree_composition_transformer_paper")
def tree_composition_transformer_paper(args):
    """The paper's composition sizes: d 300, 6 branches of 50, PCNN 341 wide, dropout 0.1; the
    decoder is fairseq's base transformer decoder at that width (6 layers, 6 heads)."""
    arch_defaults(args, encoder_embed_dim=300, encoder_ffn_embed_dim=341, encoder_attention_heads=6,
                  decoder_attention_heads=6, dropout=0.1)
    tree_composition_transformer(args)


@register_model_architecture("tree_composition_transformer", "tree_composition_transformer_iwslt_de_en")
def tree_composition_transformer_iwslt_de_en(args):
    composition_defaults(args)
    transformer_iwslt_de_en(args)  # 512 / ffn 1024 / 4 heads, 6 decoder layers; 4 branches
    tree_composition_transformer(args)


@register_model_architecture("tree_composition_transformer", "tree_composition_transformer_tiny")
def tree_composition_transformer_tiny(args):
    composition_defaults(args)
    tiny_defaults(args)
    tree_composition_transformer(args)
