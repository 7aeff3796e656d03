"""Attention as the composition function of a bottom-up tree encoder (Ahmed, Samee & Mercer, ACL
2019, "You Only Need Attention to Traverse Trees"), for translation: the fairseq wiring of
:mod:`tree_fairseq.modules.tree_composition`.

Encoder. The leaves are the source tokens as fairseq's transformer encoder reads them (scaled
embeddings, sinusoidal positions, ``--encoder-layers`` self-attention layers); then
``--composition-layers`` bottom-up passes of :class:`TreeComposition` build every node's state
from its children (multi-branch attention, residual, layer norm; all nodes of one height, over the
whole batch, in one step). fairseq's transformer decoder cross-attends to the node states and the
leaf states, ``[nodes; leaves]`` (:class:`TreeSourceDecoder`).

Choices the paper leaves open or that translation asks for, made here:

- **Leaves from a transformer encoder.** The paper composes word embeddings directly (a recursive
  network for classification); a translation decoder also needs every word in its sentence
  context, and attention composition is permutation-equivariant, so word order would otherwise
  reach no node. ``--encoder-layers 0`` is closest to the paper: the leaves are the embeddings
  (plus sinusoidal positions).
- **Node labels as node inputs** (the module's ``node_inputs``): a node's label embedding (node
  dictionary, scaled as tokens, never the target vocabulary) joins its children's rows, where the
  paper's dependency form puts the head word; ``--no-node-labels`` composes the children only
  (the paper's constituency form).
- **Leaf states**: each leaf's row of the composition it takes part in (the leaf among its
  siblings, see the module), not the encoder's output: the decoder reads the states of the last
  pass. ``encoder_states`` (``--return-all-hiddens``) are the leaves' transformer layers.
- **Several passes**: each pass re-composes from the previous pass's leaf and node states (the
  node states as node inputs, also with ``--no-node-labels``) with its own weights; the default
  is one pass, the paper's.
- ``--composition-branches`` (``M``) defaults to the encoder's attention heads, each branch's
  feed-forward size to the encoder's.
"""

from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerEncoderBase
from fairseq.models.transformer.transformer_legacy import base_architecture, transformer_iwslt_de_en
from torch import Tensor, nn

from tree_fairseq.models.common import SentenceRowsReorder, TreeSourceTransformerModel, tiny_defaults
from tree_fairseq.modules.tree_composition import TreeComposition, composition_schedule


@dataclass
class TreeCompositionTransformerConfig(TransformerConfig):
    """fairseq's transformer options plus the composition encoder's."""

    composition_layers: int = field(
        default=1, metadata={"help": "bottom-up composition passes after the leaves' encoder layers (default: 1)"}
    )
    composition_branches: Optional[int] = field(
        default=None,
        metadata={"help": "branches M of the multi-branch attention (default: --encoder-attention-heads)"},
    )
    no_node_labels: bool = field(
        default=False,
        metadata={"help": "compose a node from its children only, without its label embedding "
                          "(the paper's constituency form)"},
    )


class TreeCompositionEncoder(SentenceRowsReorder, TransformerEncoderBase):
    """fairseq's transformer encoder over the leaves, then bottom-up composition passes.

    Its output is fairseq's encoder dictionary over ``[nodes; leaves]``: ``encoder_out``
    ``(m + n, B, C)``, ``encoder_padding_mask`` ``(B, m + n)``, plus ``src_node_padding_mask``
    ``(B, m)``; ``encoder_embedding`` and ``encoder_states`` are the leaves' (fairseq's layout).
    """

    sentence_keys = ("src_node_padding_mask",)

    def __init__(self, cfg, dictionary, embed_tokens, embed_node_labels):
        super().__init__(cfg, dictionary, embed_tokens)
        if cfg.composition_layers < 1:
            raise ValueError("--composition-layers must be at least 1: the nodes' states come from it")
        self.embed_node_labels = None if cfg.no_node_labels else embed_node_labels
        embed_dim = embed_tokens.embedding_dim
        branches = cfg.composition_branches or cfg.encoder.attention_heads
        self.compositions = nn.ModuleList(
            TreeComposition(embed_dim, branches, ffn_dim=cfg.encoder.ffn_embed_dim, dropout=cfg.dropout)
            for _ in range(cfg.composition_layers)
        )

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Tensor,
        src_node_labels: Tensor,
        src_node_spans: Tensor,
        src_node_padding_mask: Tensor,
        return_all_hiddens: bool = False,
    ):
        """The batch of :mod:`tree_fairseq.data.tree_pair_dataset` -> the encoder dictionary."""
        encoder_out = self.forward_scriptable(src_tokens, src_lengths, return_all_hiddens)
        leaves = encoder_out["encoder_out"][0].transpose(0, 1)  # (B, n, C)
        leaf_padding_mask = src_tokens.eq(self.padding_idx)
        schedule = composition_schedule(src_node_spans, leaf_padding_mask, src_node_padding_mask)
        nodes = None
        if self.embed_node_labels is not None:
            nodes = self.dropout_module(self.embed_scale * self.embed_node_labels(src_node_labels))
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

    @classmethod
    def set_defaults(cls, args):
        tree_composition_transformer(args)

    @classmethod
    def build_tree_encoder(cls, cfg, src_dict, embed_tokens, embed_node_labels):
        return TreeCompositionEncoder(cfg, src_dict, embed_tokens, embed_node_labels)


# Architectures: fairseq's transformer of the same name, plus the composition options' defaults.


@register_model_architecture("tree_composition_transformer", "tree_composition_transformer")
def tree_composition_transformer(args):
    args.composition_layers = getattr(args, "composition_layers", 1)
    args.composition_branches = getattr(args, "composition_branches", None)
    args.no_node_labels = getattr(args, "no_node_labels", False)
    base_architecture(args)


@register_model_architecture("tree_composition_transformer", "tree_composition_transformer_iwslt_de_en")
def tree_composition_transformer_iwslt_de_en(args):
    transformer_iwslt_de_en(args)  # 512 / ffn 1024 / 4 heads, 6 + 6 layers; 4 branches
    tree_composition_transformer(args)


@register_model_architecture("tree_composition_transformer", "tree_composition_transformer_tiny")
def tree_composition_transformer_tiny(args):
    tiny_defaults(args)
    tree_composition_transformer(args)
