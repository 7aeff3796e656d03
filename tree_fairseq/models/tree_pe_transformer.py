"""Tree positional encodings in a Transformer (Shiv & Quirk, NeurIPS 2019, "Novel positional
encodings to enable tree-based transformers"): the fairseq wiring of
:mod:`tree_fairseq.modules.tree_positional_encoding`, for reading a source tree
(``tree_pe_transformer``), for generating a tree (``tree_pe_parser``) and for both
(``tree_pe_tree2tree``, ``--task tree_to_tree``: the tree encoder and the tree decoder, which
cross-attends to the source's nodes and leaves, section 5.1 of the paper). docs/methods.md,
section 3, compares the code with the paper row by row.

**Tree encoder** (``tree_pe_transformer``, ``--task tree_translation``). The encoder's sequence is
the source tree's items ``[nodes; leaves]``: nodes embedded from their own label table (the task's
node dictionary, never the target vocabulary), leaves as fairseq embeds tokens, both scaled by
``sqrt(d)``; each item gets the tree positional encoding of its LCRS path from the root
(:func:`tree_paths`; EOS is the root's right sibling) *instead of* the sinusoidal encoding. Then
fairseq's transformer encoder layers, unchanged, over all items with the padding of both masked: the
tree reaches the model through the positions alone, as in the paper. fairseq's transformer decoder
cross-attends to every item, nodes and leaves (:class:`TreeSourceDecoder`).

**Tree decoder** (``tree_pe_parser``, ``--task tree_generation``). The target is a tree linearised by
:mod:`tree_fairseq.trees.linearize`: symbols annotated with their number of children (``NP(3)``; a
leaf has none), in depth-first or breadth-first order (``--tree-order``, which must match the data).
The decoder is fairseq's transformer decoder whose positional embedding is the tree positional
encoding of the symbol each input holds, computed step by step from the partial tree
(:class:`TreeSlotPositions`), as section 4 of the paper asks: the start token gets the zero
encoding, and each fed-back output its own position, the slot of the partial tree it filled (the
first symbol, the root, has the empty path, hence also the zero encoding). The decoder has to infer
the next position from this history. A symbol past the end of the tree (never generated, see the
task) sits at the root's right sibling, where the encoder puts EOS. The partial trees and the
paths of their slots are the module's (:class:`PartialTrees`, "Generating a tree" there); the
decoder keeps them in its incremental state and reorders them with the beam. The encoder is
fairseq's (sinusoidal positions): the source is a sentence. Generation with ``--task tree_generation`` only ever emits
whole trees (see that task).

Choices the paper leaves open, made here (docs/methods.md, section 3, lists them all):

- the encodings are added to the scaled embeddings where fairseq adds its sinusoidal ones, with the
  paper's constant factor (``--tree-pe-scale``; the module compares their norms); the encoder's and
  the decoder's are separate parameters;
- nodes and leaves share one space of positions (every item of a tree has its own path, up to
  the truncation); what tells a node from a leaf is its embedding table;
- option ``--tree-pe-decoder-positions next_slot``: the input at step ``t`` is symbol ``t − 1``
  plus the position of the slot being predicted (symbol ``t``'s), as a sequence decoder adds
  position ``t``; this plugin's earlier form, kept for its checkpoints;
- an item deeper than ``k = --tree-pe-max-depth`` LCRS steps loses its oldest steps (the module's
  truncation); under LCRS a child's index counts as depth, so flat nodes reach it sooner;
- training computes the positions of a whole target at once (:func:`sequence_slot_paths`, ``O(k)``
  batched operations, tested equal to the step function).
"""

from dataclasses import dataclass
from typing import Optional

import torch
from fairseq.data import Dictionary
from fairseq.dataclass import ChoiceEnum
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
)
from fairseq.models.transformer.transformer_legacy import base_architecture, transformer_iwslt_de_en
from torch import Tensor, nn

from tree_fairseq.models.common import (
    ConfiguredTransformerModel,
    TreeSourceDecoder,
    TreeSourceEncoder,
    TreeSourceTransformerModel,
    arch_defaults,
    option,
    tiny_defaults,
)
from tree_fairseq.modules.tree_positional_encoding import (
    DEGREE,
    SCALES,
    PartialTrees,
    TreePositionalEncoding,
    add_symbols,
    next_slot_paths,
    sequence_slot_paths,
    sequence_symbol_paths,
    tree_paths,
)
from tree_fairseq.trees.linearize import TREE_ORDERS, symbol_arity


@dataclass
class TreePETransformerConfig(TransformerConfig):
    """fairseq's transformer options plus the tree positional encodings'."""

    tree_pe_max_depth: int = option(32, "k: LCRS steps from the root kept in a tree position (default: 32)",
                                    minimum=1)
    tree_pe_num_weights: Optional[int] = option(
        None,
        "number of learned depth weights p, each giving a 2k-dimensional encoding "
        "(default: embed_dim // 2k, at least 1; projected to embed_dim when the sizes differ)",
        minimum=1,
    )
    tree_pe_scale: ChoiceEnum(list(SCALES)) = option(
        "paper",
        "constant factor of the encodings: paper = sqrt(1 - p^2) * sqrt(d_model) / 2 as "
        "section 3.2 prints it; authors_code = sqrt((1 - p^2) * d_model / 2), sqrt(2) "
        "larger (the earlier form of this plugin) (default: paper)",
    )


DECODER_POSITIONS = ("symbol", "next_slot")


@dataclass
class TreePEParserConfig(TreePETransformerConfig):
    """The tree decoder's options on top of :class:`TreePETransformerConfig`."""

    tree_order: ChoiceEnum(list(TREE_ORDERS)) = option(
        "depth_first",
        "order in which the target trees are linearised and generated; must be the "
        "order of the data (default: depth_first)",
    )
    tree_pe_decoder_positions: ChoiceEnum(list(DECODER_POSITIONS)) = option(
        "symbol",
        "symbol: each decoder input at the position of the symbol it holds, the start "
        "token at the zero encoding (the paper's section 4); next_slot: at the position "
        "of the symbol it predicts (the earlier form of this plugin) (default: symbol)",
    )


def tree_positional_encoding(cfg, embed_dim: int) -> TreePositionalEncoding:
    return TreePositionalEncoding(embed_dim, cfg.tree_pe_max_depth, num_weights=cfg.tree_pe_num_weights,
                                  scale=str(getattr(cfg, "tree_pe_scale", "paper")))


# Reading a source tree


class TreePEEncoder(TreeSourceEncoder, TransformerEncoderBase):
    """fairseq's transformer encoder over ``[nodes; leaves]`` with tree positional encodings.

    Its output is fairseq's encoder dictionary over all items: ``encoder_out`` ``(m + n, B, C)``,
    ``encoder_padding_mask`` ``(B, m + n)``, plus ``src_node_padding_mask`` ``(B, m)`` (which says
    how many leading items are nodes). ``encoder_states`` have the layout of ``encoder_out``.
    """

    sentence_keys = ("src_node_padding_mask",)

    def __init__(self, cfg, dictionary, embed_tokens, embed_node_labels):
        super().__init__(cfg, dictionary, embed_tokens)
        self.embed_positions = None  # the tree positions replace fairseq's
        self.embed_node_labels = embed_node_labels
        self.tree_positions = tree_positional_encoding(cfg, embed_tokens.embedding_dim)

    def encode_tree(self, src_tokens, src_lengths, src_node_labels, src_node_spans, src_node_padding_mask,
                    leaf_padding_mask, return_all_hiddens):
        node_paths, leaf_paths = tree_paths(
            src_node_spans, leaf_padding_mask, src_node_padding_mask, self.tree_positions.max_depth
        )
        embedding = torch.cat(
            [self.scaled_node_embedding(src_node_labels), self.embed_scale * self.embed_tokens(src_tokens)], dim=1
        )  # (B, m + n, C)
        x = embedding + self.tree_positions(torch.cat([node_paths, leaf_paths], dim=1)).to(embedding)
        x = self.embedding_tail(x)
        padding_mask = torch.cat([src_node_padding_mask, leaf_padding_mask], dim=1)  # (B, m + n)
        x = x.masked_fill(padding_mask.unsqueeze(-1), 0).transpose(0, 1)

        encoder_states = [x] if return_all_hiddens else []
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=padding_mask if padding_mask.any() else None)
            if return_all_hiddens:
                encoder_states.append(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x],  # (m + n, B, C)
            "encoder_padding_mask": [padding_mask],  # (B, m + n)
            "encoder_embedding": [embedding],  # (B, m + n, C)
            "encoder_states": encoder_states,  # list of (m + n, B, C)
            "src_tokens": [],
            "src_lengths": [src_lengths.view(-1, 1)],
            "src_node_padding_mask": [src_node_padding_mask],  # (B, m)
        }


@register_model("tree_pe_transformer")
class TreePETransformerModel(TreeSourceTransformerModel):
    """Transformer reading the source tree through tree positional encodings (Shiv & Quirk 2019)
    for ``--task tree_translation``: a :class:`TreePEEncoder` and a :class:`TreeSourceDecoder`.
    Options: :class:`TreePETransformerConfig`."""

    config_class = TreePETransformerConfig
    encoder_class = TreePEEncoder

    @classmethod
    def set_defaults(cls, args):
        tree_pe_transformer(args)


# Generating a tree


def symbol_arities(dictionary: Dictionary) -> Tensor:
    """``(V,)`` long: the number of children each symbol of a target dictionary announces
    (:func:`symbol_arity`: 0 for a leaf, ``<unk>`` included), ``-1`` for BOS, EOS and padding,
    which are no part of a tree."""
    arities = torch.tensor([symbol_arity(symbol) for symbol in dictionary.symbols], dtype=torch.long)
    arities[[dictionary.bos(), dictionary.eos(), dictionary.pad()]] = -1
    return arities


class TreeSlotPositions(FairseqIncrementalState, nn.Module):
    """The decoder's positional embedding: tokens ``(B, T)`` -> ``(B, T, C)``, the tree
    positional encoding of the symbol each input holds (zero for the start token), or with
    ``--tree-pe-decoder-positions next_slot`` of the slot each step's output fills. Called as
    fairseq's decoder calls its positional embedding; with an incremental state only the last
    step is computed, from the partial trees kept there."""

    def __init__(self, dictionary: Dictionary, embed_dim: int, cfg):
        super().__init__()
        self.encoding = tree_positional_encoding(cfg, embed_dim)
        self.breadth_first = cfg.tree_order == "breadth_first"
        self.next_slot = getattr(cfg, "tree_pe_decoder_positions", "symbol") == "next_slot"
        self.max_positions = cfg.max_target_positions
        self.register_buffer("arities", symbol_arities(dictionary), persistent=False)

    def slot_paths(self, tokens: Tensor, trees: Optional[PartialTrees] = None) -> tuple[Tensor, PartialTrees]:
        """Add ``tokens`` ``(B, T)`` to ``trees`` (empty if None) one step at a time: the
        position ``(B, T, k)`` of each input (the symbol's own slot, the empty path for BOS, EOS
        and padding; with ``next_slot``, the slot open after it), and the partial trees at the
        end."""
        if trees is None:
            trees = PartialTrees.empty(tokens.size(0), self.encoding.max_depth, tokens.device)
        paths = []
        for step in range(tokens.size(1)):
            arity = self.arities[tokens[:, step]]
            if not self.next_slot:
                slot = next_slot_paths(trees, self.breadth_first)
                paths.append(slot.masked_fill((arity < 0).unsqueeze(-1), -1))
            trees = add_symbols(trees, arity, self.breadth_first)
            if self.next_slot:
                paths.append(next_slot_paths(trees, self.breadth_first))
        return torch.stack(paths, dim=1), trees

    def forward(self, tokens: Tensor, incremental_state=None) -> Tensor:
        if incremental_state is None:
            paths = sequence_slot_paths if self.next_slot else sequence_symbol_paths
            return self.encoding(paths(self.arities[tokens], self.breadth_first, self.encoding.max_depth))
        # fairseq adds one token per incremental call; the first call reads the whole prefix.
        trees = self.get_incremental_state(incremental_state, "partial_trees")
        paths, trees = self.slot_paths(tokens if trees is None else tokens[:, -1:], trees)
        self.set_incremental_state(incremental_state, "partial_trees", trees)
        return self.encoding(paths[:, -1:])

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        trees = self.get_incremental_state(incremental_state, "partial_trees")
        if trees is not None:
            self.set_incremental_state(incremental_state, "partial_trees", trees.index_select(new_order))


class TreeDecoder(TransformerDecoderBase):
    """fairseq's transformer decoder with the tree positions of :class:`TreeSlotPositions` in
    place of its sinusoidal ones; generates a linearised tree (``cfg.tree_order``)."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)
        self.embed_positions = TreeSlotPositions(dictionary, cfg.decoder.embed_dim, cfg)


def require_tree_outputs(arch: str, task, tasks: str) -> None:
    """ValueError unless ``task`` generates trees (``generates_trees``, as the tree tasks'
    :class:`~tree_fairseq.tasks.tree_generation.TreeOutputs` says, whose target dictionary holds
    ``LABEL(k)`` symbols): a tree decoder under another task reads text targets as trees of leaves
    alone, and is searched without the constraint that keeps its outputs whole trees."""
    if not getattr(task, "generates_trees", False):
        raise ValueError(f"--arch {arch} decodes linearised trees: use --task {tasks}, not "
                         f"{type(task).__name__}")


@register_model("tree_pe_parser")
class TreePEParserModel(ConfiguredTransformerModel):
    """A sentence in, a tree out: fairseq's transformer encoder and a :class:`TreeDecoder`, for
    ``--task tree_generation`` (parsing as translation). Options: :class:`TreePEParserConfig`."""

    config_class = TreePEParserConfig

    @classmethod
    def set_defaults(cls, args):
        tree_pe_parser(args)

    @classmethod
    def build_model(cls, args, task):
        require_tree_outputs(getattr(args, "arch", None) or "tree_pe_parser", task, "tree_generation")
        return super().build_model(args, task)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        return TreeDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


# Tree to tree


class TreeSourceTreeDecoder(TreeSourceDecoder):
    """A :class:`TreeDecoder` cross-attending to a tree encoder's ``[nodes; leaves]`` (as
    :class:`TreeSourceDecoder`): tree positions on both sides."""

    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        self.embed_positions = TreeSlotPositions(dictionary, cfg.decoder.embed_dim, cfg)


@register_model("tree_pe_tree2tree")
class TreePETreeToTreeModel(TreePETransformerModel):
    """A tree in, a tree out (the paper's section 5.1): a :class:`TreePEEncoder` and a
    :class:`TreeSourceTreeDecoder`, for ``--task tree_to_tree``. Options:
    :class:`TreePEParserConfig`."""

    config_class = TreePEParserConfig

    @classmethod
    def set_defaults(cls, args):
        tree_pe_tree2tree(args)

    @classmethod
    def build_model(cls, args, task):
        require_tree_outputs(getattr(args, "arch", None) or "tree_pe_tree2tree", task, "tree_to_tree")
        return super().build_model(args, task)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        return TreeSourceTreeDecoder(cfg, tgt_dict, embed_tokens)


# Architectures: fairseq's transformer of the same name, plus the tree options' defaults.


def tree_pe_defaults(args):
    arch_defaults(args, tree_pe_max_depth=32, tree_pe_num_weights=None, tree_pe_scale="paper")


@register_model_architecture("tree_pe_transformer", "tree_pe_transformer")
def tree_pe_transformer(args):
    tree_pe_defaults(args)
    base_architecture(args)


@register_model_architecture("tree_pe_transformer", "tree_pe_transformer_iwslt_de_en")
def tree_pe_transformer_iwslt_de_en(args):
    transformer_iwslt_de_en(args)  # 512 / ffn 1024 / 4 heads, 6 + 6 layers
    tree_pe_transformer(args)


PAPER_POSITION_DIM = 2048  # d_pos of section 5


def paper_defaults(args, ffn_embed_dim: int):
    """The sizes of section 5: four layers, ``d_model = 256``, tree positions ``d_pos = 2048``
    (``P = 2048 / (k·n) = 32`` learned ``p`` at ``k = 32``, ``n = 2``, projected to 256), dropout
    0.1; ``d_ff`` 512 in the tree-to-tree experiments (5.1.1), 1024 in semantic parsing (5.2).
    The paper prints no number of heads: fairseq's base default, 8."""
    arch_defaults(args, encoder_embed_dim=256, encoder_ffn_embed_dim=ffn_embed_dim, encoder_layers=4)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", args.encoder_embed_dim)
    args.decoder_ffn_embed_dim = getattr(args, "decoder_ffn_embed_dim", args.encoder_ffn_embed_dim)
    arch_defaults(args, decoder_layers=4, dropout=0.1, tree_pe_max_depth=32)
    args.tree_pe_num_weights = getattr(args, "tree_pe_num_weights",
                                       max(1, PAPER_POSITION_DIM // (DEGREE * args.tree_pe_max_depth)))


@register_model_architecture("tree_pe_transformer", "tree_pe_transformer_paper")
def tree_pe_transformer_paper(args):
    paper_defaults(args, ffn_embed_dim=512)  # the tree encoder of the tree-to-tree models
    tree_pe_transformer(args)


@register_model_architecture("tree_pe_transformer", "tree_pe_transformer_tiny")
def tree_pe_transformer_tiny(args):
    tiny_defaults(args)
    tree_pe_transformer(args)


@register_model_architecture("tree_pe_parser", "tree_pe_parser")
def tree_pe_parser(args):
    arch_defaults(args, tree_order="depth_first", tree_pe_decoder_positions="symbol")
    tree_pe_defaults(args)
    base_architecture(args)


@register_model_architecture("tree_pe_parser", "tree_pe_parser_paper")
def tree_pe_parser_paper(args):
    paper_defaults(args, ffn_embed_dim=1024)  # semantic parsing, section 5.2
    tree_pe_parser(args)


@register_model_architecture("tree_pe_parser", "tree_pe_parser_tiny")
def tree_pe_parser_tiny(args):
    tiny_defaults(args)
    tree_pe_parser(args)


@register_model_architecture("tree_pe_tree2tree", "tree_pe_tree2tree")
def tree_pe_tree2tree(args):
    tree_pe_parser(args)


@register_model_architecture("tree_pe_tree2tree", "tree_pe_tree2tree_paper")
def tree_pe_tree2tree_paper(args):
    paper_defaults(args, ffn_embed_dim=512)  # program translation, section 5.1.1
    tree_pe_tree2tree(args)


@register_model_architecture("tree_pe_tree2tree", "tree_pe_tree2tree_tiny")
def tree_pe_tree2tree_tiny(args):
    tiny_defaults(args)
    tree_pe_tree2tree(args)
