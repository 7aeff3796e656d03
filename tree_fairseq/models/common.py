"""The fairseq wiring the models of this package share: a config dataclass's fields
(:func:`option`) and an architecture's defaults (:func:`arch_defaults`), options from the config
dataclass, embeddings with fairseq's sharing rules, node-label embeddings, the encoders' ``forward``
(:class:`TreeSourceEncoder` hands the method's ``encode_tree`` the tree batch,
:class:`TextSourceEncoder` the method's ``encode_text`` the text, the tree keys ignored), the
feed-forward block of an encoder layer, the token columns of the attention weights handed to
fairseq, the model's ``forward`` of a ``--task tree_translation`` batch (tree keys passed to the
encoder, or accepted and ignored; :meth:`ConfiguredTransformerModel.encode_and_decode`), and the
tiny test architecture. What is particular to a method stays in its own module
(docs/architecture.md)."""

from dataclasses import field, fields
from typing import Optional

import torch
from torch import Tensor
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase, TransformerModelBase


def option(default, help: str, *, minimum=None, above=None, maximum=None, **metadata):
    """A field of a model's config dataclass: its default and its ``--help`` text (and any other
    metadata fairseq reads, such as ``choices``). fairseq makes the command-line option of it.
    ``minimum`` / ``maximum`` (inclusive) and ``above`` (exclusive) bound a number: a value
    outside is refused at model build (:func:`refuse_out_of_range`)."""
    bounds = {key: value for key, value in (("minimum", minimum), ("above", above), ("maximum", maximum))
              if value is not None}
    return field(default=default, metadata={"help": help, **bounds, **metadata})


def refuse_out_of_range(cfg) -> None:
    """ValueError, one line naming the option and its value, for an option of the config
    dataclass ``cfg`` outside the bounds its :func:`option` declares; an unset option (None, its
    default) passes. Every model of this package calls it on its config before building."""
    for config_field in fields(cfg):
        bounds = config_field.metadata
        value = getattr(cfg, config_field.name, None)
        if value is None or not {"minimum", "above", "maximum"} & bounds.keys():
            continue
        minimum, above, maximum = bounds.get("minimum"), bounds.get("above"), bounds.get("maximum")
        if ((minimum is not None and value < minimum) or (above is not None and value <= above)
                or (maximum is not None and value > maximum)):
            if minimum is not None and maximum is not None:
                valid = f"from {minimum} to {maximum}"
            elif maximum is not None:
                valid = f"at most {maximum}"
            else:
                valid = f"at least {minimum}" if minimum is not None else f"above {above}"
            raise ValueError(f"--{config_field.name.replace('_', '-')} {value}: must be {valid}")


def arch_defaults(args, **values) -> None:
    """An architecture's defaults: each option of ``values`` that ``args`` has not been given is
    set to its value (fairseq's ``args.x = getattr(args, "x", value)``)."""
    for name, value in values.items():
        setattr(args, name, getattr(args, name, value))


class SentenceRowsReorder:
    """``reorder_encoder_out`` for a fairseq encoder that copies the output only when a row
    moves to another source sentence: worth most where the output is larger than the
    transformer's (chart cells, tree nodes).

    Beam search reorders the encoder output at every step, but the hypotheses of one sentence
    share that sentence's encoder output, so while every row stays with its sentence (the usual
    step) the reordered output equals the one already there. The encoder output carries
    ``source_rows`` (empty: row b is sentence b; else one LongTensor, the sentence of each row);
    fairseq's fields and the encoder's ``sentence_keys`` (tensors with the batch first) are
    reordered only when that changes: the expansion to beam rows, a finished sentence leaving the
    batch; its ``shared_keys`` (the same for every row) are carried over as they are. Mix in before
    fairseq's encoder class."""

    #: Entries of the encoder output, besides fairseq's, that hold one row per sentence (batch first).
    sentence_keys: tuple[str, ...] = ()
    #: Entries of the encoder output, besides fairseq's, that hold no row per sentence: kept as they are.
    shared_keys: tuple[str, ...] = ()

    def reorder_encoder_out(self, encoder_out, new_order):
        rows = encoder_out.get("source_rows", [])
        if rows:
            current = rows[0]
        else:
            current = torch.arange(encoder_out["encoder_padding_mask"][0].size(0), device=new_order.device)
        reordered_rows = current.index_select(0, new_order)
        if reordered_rows.shape == current.shape and torch.equal(reordered_rows, current):
            return encoder_out
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        for key in self.sentence_keys:
            reordered[key] = [tensor.index_select(0, new_order) for tensor in encoder_out[key]]
        for key in self.shared_keys:
            reordered[key] = encoder_out[key]
        reordered["source_rows"] = [reordered_rows]
        return reordered


class NodeLabelEmbedding:
    """Node-label embeddings for a fairseq transformer encoder (mix in before it), treated as
    fairseq treats the token embeddings: ``embed_scale``, then, after whatever positions the
    method adds, ``layernorm_embedding``, dropout and quant noise. The node-label table
    (the encoder's ``embed_node_labels``, from the node dictionary) is never shared with the
    token tables."""

    def scaled_node_embedding(self, src_node_labels: Tensor) -> Tensor:
        """Node labels ``(B, m)`` -> ``embed_scale · E[label]`` ``(B, m, C)``."""
        return self.embed_scale * self.embed_node_labels(src_node_labels)

    def embedding_tail(self, x: Tensor) -> Tensor:
        """fairseq's ``forward_embedding`` after the positions: ``layernorm_embedding`` (if any),
        dropout, quant noise (if any). ``(..., C)`` -> ``(..., C)``."""
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        x = self.dropout_module(x)
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        return x

    def forward_node_embedding(self, src_node_labels: Tensor) -> Tensor:
        """Node labels ``(B, m)`` -> ``(B, m, C)``: as the token embeddings, without position."""
        return self.embedding_tail(self.scaled_node_embedding(src_node_labels))


class TreeSourceEncoder(NodeLabelEmbedding, SentenceRowsReorder):
    """The encoder of a ``--task tree_translation`` batch (mix in before fairseq's encoder class):
    ``forward`` takes the batch's tree keys and hands them, with the leaves' padding mask, to the
    method's :meth:`encode_tree`. The node-label table is the encoder's ``embed_node_labels``."""

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
        leaf_padding_mask = src_tokens.eq(self.padding_idx)  # (B, n)
        return self.encode_tree(src_tokens, src_lengths, src_node_labels, src_node_spans, src_node_padding_mask,
                                leaf_padding_mask, return_all_hiddens)

    def encode_tree(self, src_tokens, src_lengths, src_node_labels, src_node_spans, src_node_padding_mask,
                    leaf_padding_mask, return_all_hiddens):
        raise NotImplementedError


class TextSourceEncoder(SentenceRowsReorder):
    """The encoder of a model that reads the source text only, for ``--task translation`` or
    ``--task tree_translation`` (mix in before fairseq's encoder class): ``forward`` takes
    fairseq's encoder arguments and the tree keys of a tree_translation batch, which it ignores
    (the method induces its own structure), and hands the rest to :meth:`encode_text`."""

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Tensor | None = None,
        return_all_hiddens: bool = False,
        token_embeddings: Tensor | None = None,
        src_node_labels: Tensor | None = None,
        src_node_spans: Tensor | None = None,
        src_node_padding_mask: Tensor | None = None,
    ):
        return self.encode_text(src_tokens, src_lengths, return_all_hiddens, token_embeddings)

    def encode_text(self, src_tokens, src_lengths, return_all_hiddens, token_embeddings):
        raise NotImplementedError


class FeedForwardBlock:
    """The feed-forward block of fairseq's transformer encoder layer, for a layer (mix in before
    :class:`TransformerEncoderLayerBase`) whose attention block is its own: ``fc2(act(fc1(x)))``
    with activation dropout, dropout, the residual and ``final_layer_norm`` before
    (``--encoder-normalize-before``) or after."""

    def forward_feed_forward(self, x: Tensor) -> Tensor:
        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.fc2(self.activation_dropout_module(self.activation_fn(self.fc1(x))))
        x = self.residual_connection(self.dropout_module(x), residual)
        if not self.normalize_before:
            x = self.final_layer_norm(x)
        return x


class TokenColumns:
    """For a fairseq decoder (mix in before it) whose encoder output holds more items than the
    source tokens (tree nodes, chart cells): the cross-attention weights it hands back (``attn``,
    e.g. a hypothesis' ``attention`` for ``--print-alignment``) are the token columns only, so that
    they index source tokens as fairseq's alignment code expects."""

    def token_columns(self, encoder_out) -> slice:
        """The columns of the encoder's items that are the source tokens."""
        raise NotImplementedError

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        x, extra = super().extract_features(prev_output_tokens, encoder_out, incremental_state, **kwargs)
        attn = extra["attn"][0]
        if attn is not None and encoder_out is not None:
            extra["attn"] = [attn[..., self.token_columns(encoder_out)]]
        return x, extra


class SentenceCrossAttentionDecoder(TransformerDecoderBase):
    """fairseq's transformer decoder whose cross-attention, in beam search, projects and keeps the
    encoder's keys and values once per source sentence instead of once per hypothesis: fairseq's
    "beamable" encoder-decoder attention, which its own translation models leave off. The saving
    grows with the encoder output, larger here than the transformer's (nodes, chart cells).

    fairseq switches that mode on per module and for good (``set_beam_size``), which would break
    a later full forward pass or search with another beam. Here the number of hypotheses per
    sentence is read from the encoder output at the first step of a search (the ``source_rows``
    of :class:`SentenceRowsReorder`: each sentence's rows side by side after the generator's
    expansion), kept in that search's incremental state, and set on the cross-attention modules
    at every call: 1 outside incremental decoding."""

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        beam = 1
        if incremental_state is not None and encoder_out is not None:
            beam = self._hypotheses_per_sentence(encoder_out, incremental_state)
        for layer in self.layers:
            if layer.encoder_attn is not None:
                layer.encoder_attn.set_beam_size(beam)
        return super().extract_features(prev_output_tokens, encoder_out, incremental_state, **kwargs)

    def _hypotheses_per_sentence(self, encoder_out, incremental_state) -> int:
        kept = self.get_incremental_state(incremental_state, "hypotheses_per_sentence")
        if kept is not None:
            return int(kept["beam"])
        beam = 1
        rows = encoder_out.get("source_rows", [])
        if rows:
            sentences, beam = sentence_groups(rows[0])
            if sentences is None or not torch.equal(sentences, torch.arange(sentences.numel(), device=sentences.device)):
                beam = 1
        self.set_incremental_state(incremental_state, "hypotheses_per_sentence", {"beam": torch.tensor(beam)})
        return beam


def sentence_groups(rows: Tensor) -> tuple[Tensor | None, int]:
    """``(sentences, k)`` when ``rows`` (the sentence of each decoder row) is ``k`` equal entries
    per sentence, side by side (a beam of ``k``): ``sentences`` is one entry per group; else
    ``(None, 1)``."""
    if rows.numel() == 0:
        return None, 1
    group = int(rows.eq(rows[0]).sum())
    if rows.numel() % group:
        return None, 1
    grouped = rows.view(-1, group)
    if not bool(grouped.eq(grouped[:, :1]).all()):
        return None, 1
    return grouped[:, 0], group


def build_embeddings(model_class, cfg, src_dict, tgt_dict):
    """``(encoder embed_tokens, decoder embed_tokens)`` built by ``model_class.build_embedding``
    with fairseq's rules: ``--share-all-embeddings`` (a joined dictionary, equal dimensions) gives
    one table for both and sets ``cfg.share_decoder_input_output_embed``."""
    embed_tokens = model_class.build_embedding(cfg, src_dict, cfg.encoder.embed_dim, cfg.encoder.embed_path)
    if not cfg.share_all_embeddings:
        return embed_tokens, model_class.build_embedding(cfg, tgt_dict, cfg.decoder.embed_dim, cfg.decoder.embed_path)
    if src_dict != tgt_dict:
        raise ValueError("--share-all-embeddings requires a joined dictionary")
    if cfg.encoder.embed_dim != cfg.decoder.embed_dim:
        raise ValueError("--share-all-embeddings requires --encoder-embed-dim to match --decoder-embed-dim")
    cfg.share_decoder_input_output_embed = True
    return embed_tokens, embed_tokens


class ConfiguredTransformerModel(TransformerModelBase):
    """fairseq's transformer model whose options are ``config_class`` (a
    :class:`TransformerConfig` subclass) and whose base architecture is :meth:`set_defaults`."""

    config_class = TransformerConfig

    @classmethod
    def add_args(cls, parser):
        # No defaults on the parser, so that the architectures can set them (as fairseq's transformer).
        gen_parser_from_dataclass(parser, cls.config_class(), delete_default=True, with_prefix="")

    @classmethod
    def set_defaults(cls, args):
        """The base architecture: fills options missing from the args of older checkpoints."""
        raise NotImplementedError

    @classmethod
    def build_model(cls, args, task):
        cls.set_defaults(args)
        cfg = cls.config_class.from_namespace(args)
        refuse_out_of_range(cfg)
        return super().build_model(cfg, task)

    def encode_and_decode(self, encoder_inputs: tuple, prev_output_tokens, src_lengths, return_all_hiddens: bool,
                          features_only: bool, alignment_layer: Optional[int], alignment_heads: Optional[int]):
        """fairseq's transformer forward pass with the encoder's inputs ``encoder_inputs`` (the
        source and whatever the method reads beside it: trees, parents)."""
        encoder_out = self.encoder(*encoder_inputs, return_all_hiddens=return_all_hiddens)
        return self.decoder(
            prev_output_tokens,
            encoder_out=encoder_out,
            features_only=features_only,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
            src_lengths=src_lengths,
            return_all_hiddens=return_all_hiddens,
        )


class TextSourceTransformerModel(ConfiguredTransformerModel):
    """A model that reads the source text only, for ``--task translation`` or
    ``--task tree_translation``, whose tree keys ``forward`` accepts and ignores. Its decoder is
    a :class:`SentenceCrossAttentionDecoder` unless ``build_decoder`` says otherwise."""

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        return SentenceCrossAttentionDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        src_node_labels=None,
        src_node_spans=None,
        src_node_padding_mask=None,
    ):
        """fairseq's transformer forward pass; the tree keys of a tree_translation batch are ignored."""
        return self.encode_and_decode((src_tokens, src_lengths), prev_output_tokens, src_lengths, return_all_hiddens,
                                      features_only, alignment_layer, alignment_heads)


class TreeSourceDecoder(TokenColumns, SentenceCrossAttentionDecoder):
    """A :class:`SentenceCrossAttentionDecoder` over an encoder output of ``[nodes; leaves]``
    items (with ``src_node_padding_mask``). Cross-attention is fairseq's over all items; the
    attention weights it hands back are the leaf columns (:class:`TokenColumns`)."""

    def token_columns(self, encoder_out) -> slice:
        return slice(encoder_out["src_node_padding_mask"][0].size(1), None)


class TreeSourceTransformerModel(ConfiguredTransformerModel):
    """The wiring shared by the transformers whose encoder reads a source tree of
    ``--task tree_translation``: node-label embeddings from the node dictionary, the tree batch in
    ``forward``. Subclasses give ``config_class``, :meth:`set_defaults` and
    :meth:`build_tree_encoder`; the decoder is a :class:`TreeSourceDecoder` unless
    ``build_decoder`` says otherwise."""

    #: How the error for a task without trees names the model (default: the class name).
    error_name: Optional[str] = None

    #: The encoder: built with the config, the source dictionary, its token and node-label embeddings.
    encoder_class: Optional[type] = None

    @classmethod
    def build_tree_encoder(cls, cfg, src_dict, embed_tokens, embed_node_labels):
        return cls.encoder_class(cfg, src_dict, embed_tokens, embed_node_labels)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        return TreeSourceDecoder(cfg, tgt_dict, embed_tokens)

    @classmethod
    def build_model(cls, args, task):
        node_dictionary = getattr(task, "node_dictionary", None)
        if node_dictionary is None:
            raise ValueError(f"{cls.error_name or cls.__name__} reads source trees: use --task tree_translation")
        cls.set_defaults(args)
        cfg = cls.config_class.from_namespace(args)
        refuse_out_of_range(cfg)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        embed_tokens, decoder_embed_tokens = build_embeddings(cls, cfg, src_dict, tgt_dict)
        embed_node_labels = cls.build_embedding(cfg, node_dictionary, cfg.encoder.embed_dim)
        encoder = cls.build_tree_encoder(cfg, src_dict, embed_tokens, embed_node_labels)
        return cls(cfg, encoder, cls.build_decoder(cfg, tgt_dict, decoder_embed_tokens))

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        src_node_labels,
        src_node_spans,
        src_node_padding_mask,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        return self.encode_and_decode(
            (src_tokens, src_lengths, src_node_labels, src_node_spans, src_node_padding_mask), prev_output_tokens,
            src_lengths, return_all_hiddens, features_only, alignment_layer, alignment_heads,
        )


def tiny_defaults(args):
    """For tests: 32 / ffn 64 / 4 heads (d_head 8), 2 + 2 layers."""
    arch_defaults(args, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_layers=2,
                  encoder_attention_heads=4, decoder_layers=2, decoder_attention_heads=4)
