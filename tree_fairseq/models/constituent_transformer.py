"""Constituent attention (Wang, Lee and Chen, EMNLP 2019, "Tree Transformer: Integrating Tree
Structures into Self-Attention", arXiv 1909.06639): the fairseq wiring of
:mod:`tree_fairseq.modules.constituent_attention`. docs/methods.md (section 2) lists the paper's
equations and settings against this code.

The structure is induced from the text, so these models read only ``src_tokens`` and
``src_lengths``: they train on fairseq's ``--task translation`` with a plain fairseq-preprocess
data-bin, and on ``--task tree_translation``, whose tree keys they accept and ignore.

Encoder (section 3, Figure 1). fairseq's transformer encoder whose layers each carry a
Constituent Attention module: from the layer's input it computes the link probabilities
``â^l`` (neighbouring attention, eqs. 5-7), ``a^l = a^{l-1} + (1 - a^{l-1}) · â^l`` (hierarchical
constraint, eq. 8, ``a^{l-1}`` from the layer below, ``a^{-1} = 0``) and the prior ``C`` (eqs.
3-4); the layer's self-attention is ``E = C ⊙ softmax(QKᵀ/√d_h)`` (eq. 2), then fairseq's
residual, layer norm and feed-forward network. The link probabilities of every layer are in ``encoder_out`` under
``"constituent_links"``, ``(B, L, n - 1)`` (link ``k`` joins tokens ``k`` and ``k + 1``; 0 where
it touches padding or EOS), for parsing with
:func:`~tree_fairseq.modules.constituent_attention.unsupervised_parse`.

Decoder: fairseq's transformer decoder, unchanged (the paper's model is an encoder; for
translation its encoder replaces the transformer's).

Choices the paper leaves open, made here (the maths' own are in the module's docstring):

- the neighbour score of eq. 5 is divided by ``d_model / 2`` as the paper sets it;
  ``--neighbour-score-scale d-model`` divides by ``d_model``, this plugin's earlier reading
  (checkpoints trained with it need the flag back, e.g. as an ``arg_overrides`` entry).
- ``C`` is not renormalised after the product with the attention probabilities, as the paper's
  equation reads and the authors' code does; ``--renormalize-constituent-attention`` divides
  each row of ``E`` by its sum instead. The prior's diagonal is ``C_ii = 1``.
- the neighbouring attention reads what the layer's self-attention reads: the layer input,
  layer-normalised first with ``--encoder-normalize-before`` (pre-norm), as it is (post-norm,
  where it is the output of the layer below or the embeddings).
- EOS lies outside every constituent, as it lies outside every span of a tree_translation
  batch: the constituent attention treats it as padding (its links are 0, the prior is 0 on its
  row and column), so no token attends to it and its self-attention output is 0 (it still has
  its residual path and feed-forward networks). Inside, it draws the last word to itself: in a
  masked LM trained with EOS (and fairseq's leading ``<s>``) inside, the link between the first
  two words and the one between the last two were the weakest in the sentences inspected, so
  Algorithm 1 split off both end words first. EOS is found by position, as the last token of
  each sentence (fairseq's data-bins end every line with it), so that an EOS the masked LM masked
  or replaced is still outside.

:class:`ConstituentEncoderLM` (``constituent_encoder_lm``) is the same encoder with an output
projection (tied to the token embeddings), the model of the masked-LM task
:mod:`tree_fairseq.tasks.constituent_masked_lm` that trains the encoder alone for parsing, as in
the paper's section 7.2. Its default architecture is the paper's (section 7.1: 512 wide, 8 heads,
feed-forward 2048, dropout 0.1, 10 layers, the depth of its best parses);
``constituent_encoder_lm_small`` is the smaller one this plugin used before (256 / 1024 / 4 heads,
6 layers).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import FairseqEncoderModel, register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerEncoderBase, TransformerModelBase
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
)
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor, nn

from tree_fairseq.models.common import (
    FeedForwardBlock,
    TextSourceEncoder,
    TextSourceTransformerModel,
    arch_defaults,
    option,
    refuse_out_of_range,
    tiny_defaults,
)
from tree_fairseq.modules.constituent_attention import (
    NEIGHBOUR_SCORE_DIVISORS,
    ConstituentAttention,
    ConstituentSelfAttention,
)


@dataclass
class ConstituentTransformerConfig(TransformerConfig):
    """fairseq's transformer options plus constituent attention's."""

    renormalize_constituent_attention: bool = option(
        False,
        "divide each row of C ⊙ softmax(QKᵀ/√d) by its sum (default: not renormalised, "
        "as in the paper's equation)",
    )
    neighbour_score_scale: str = option(
        "half-d-model",
        "divisor d of the neighbouring attention's score q_i·k_(i+1)/d: half-d-model is the "
        "paper's d_model/2 (default); d-model divides by d_model (the earlier reading)",
        choices=sorted(NEIGHBOUR_SCORE_DIVISORS),
    )


class ConstituentTransformerEncoderLayer(FeedForwardBlock, TransformerEncoderLayerBase):
    """fairseq's encoder layer with constituent attention: self-attention scaled by the prior of
    this layer's Constituent Attention module (section 3)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.constituent_attention = ConstituentAttention(self.embed_dim, score_scale=cfg.neighbour_score_scale)

    def build_self_attention(self, embed_dim, cfg):
        return ConstituentSelfAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            dropout=cfg.attention_dropout,
            renormalize=cfg.renormalize_constituent_attention,
        )

    def forward(
        self, x: Tensor, padding_mask: Tensor, outside_mask: Tensor, previous_links: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """x: ``(B, n, C)``; padding_mask: ``(B, n)``; outside_mask: ``(B, n)``, True at the tokens
        outside every constituent (padding and EOS); previous_links: ``a^{l-1} (B, n - 1)``, None
        in the first layer. Returns the layer's output ``(B, n, C)`` and ``a^l``."""
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        links, prior = self.constituent_attention(x, outside_mask, previous_links)
        x, _ = self.self_attn(x, prior, padding_mask)
        x = self.residual_connection(self.dropout_module(x), residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)
        return self.forward_feed_forward(x), links


class ConstituentTransformerEncoder(TextSourceEncoder, TransformerEncoderBase):
    """fairseq's transformer encoder (embeddings, positions, dropout, final layer norm) with
    :class:`ConstituentTransformerEncoderLayer` layers chained by their link probabilities.

    Its output is fairseq's encoder dictionary plus ``constituent_links``: ``a^l`` of every layer,
    ``(B, L, n - 1)``, 0 on links touching padding or EOS (the last token of each sentence).
    """

    sentence_keys = ("constituent_links",)

    def build_encoder_layer(self, cfg):
        return ConstituentTransformerEncoderLayer(cfg)

    def encode_text(self, src_tokens, src_lengths, return_all_hiddens, token_embeddings):
        padding_mask = src_tokens.eq(self.padding_idx)  # (B, n)
        # The last token of each sentence (EOS), followed by padding or by the end of the row.
        final_token = ~padding_mask & F.pad(padding_mask[:, 1:], (0, 1), value=True)
        outside_mask = padding_mask | final_token
        x, embedding = self.forward_embedding(src_tokens, token_embeddings)
        x = x.masked_fill(padding_mask.unsqueeze(-1), 0.0)  # (B, n, C)
        encoder_states = [x.transpose(0, 1)] if return_all_hiddens else []
        links, all_links = None, []
        for layer in self.layers:
            x, links = layer(x, padding_mask, outside_mask, links)
            all_links.append(links)
            if return_all_hiddens:
                encoder_states.append(x.transpose(0, 1))
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x.transpose(0, 1)],  # (n, B, C)
            "encoder_padding_mask": [padding_mask],  # (B, n)
            "encoder_embedding": [embedding],  # (B, n, C)
            "encoder_states": encoder_states,  # list of (n, B, C)
            "constituent_links": [torch.stack(all_links, dim=1)],  # (B, L, n - 1)
            "src_tokens": [],
            "src_lengths": [(~padding_mask).sum(dim=1, dtype=torch.int32).view(-1, 1)],
        }


@register_model("constituent_transformer")
class ConstituentTransformerModel(TextSourceTransformerModel):
    """A :class:`ConstituentTransformerEncoder` and fairseq's transformer decoder, for
    ``--task translation`` or ``--task tree_translation`` (its trees are not read). Options:
    :class:`ConstituentTransformerConfig`."""

    config_class = ConstituentTransformerConfig

    @classmethod
    def set_defaults(cls, args):
        constituent_transformer(args)

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        return ConstituentTransformerEncoder(cfg, src_dict, embed_tokens)


@register_model("constituent_encoder_lm")
class ConstituentEncoderLM(FairseqEncoderModel):
    """A :class:`ConstituentTransformerEncoder` with an output projection tied to its token
    embeddings (plus a bias): a masked language model, for ``--task constituent_masked_lm``.

    Options: the encoder options of :class:`ConstituentTransformerConfig` (the decoder options are
    accepted and unused). ``forward`` returns the logits, at the ``masked_tokens`` only when given
    (as fairseq's ``masked_lm`` criterion asks), and the encoder dictionary.
    """

    def __init__(self, encoder: ConstituentTransformerEncoder):
        super().__init__(encoder)
        self.output_bias = nn.Parameter(torch.zeros(len(encoder.dictionary)))

    @classmethod
    def add_args(cls, parser):
        gen_parser_from_dataclass(parser, ConstituentTransformerConfig(), delete_default=True, with_prefix="")

    @classmethod
    def build_model(cls, args, task):
        if not getattr(task, "trains_constituent_lm", False):
            # fairseq's masked_lm task passes inputs this model does not take (src_id, ...)
            raise ValueError(f"--arch {getattr(args, 'arch', None) or 'constituent_encoder_lm'} is trained with "
                             f"--task constituent_masked_lm, not {type(task).__name__}")
        constituent_encoder_lm(args)
        cfg = ConstituentTransformerConfig.from_namespace(args)
        refuse_out_of_range(cfg)
        dictionary = task.source_dictionary
        embed_tokens = TransformerModelBase.build_embedding(cfg, dictionary, cfg.encoder.embed_dim)
        return cls(ConstituentTransformerEncoder(cfg, dictionary, embed_tokens))

    def forward(self, src_tokens: Tensor, src_lengths: Tensor | None = None, masked_tokens: Tensor | None = None):
        """src_tokens ``(B, n)``; masked_tokens: ``(B, n)`` bool or None. Returns the logits,
        ``(number of masked tokens, V)`` or ``(B, n, V)``, and the encoder dictionary."""
        encoder_out = self.encoder(src_tokens, src_lengths)
        features = encoder_out["encoder_out"][0].transpose(0, 1)  # (B, n, C)
        if masked_tokens is not None:
            features = features[masked_tokens]
        return F.linear(features, self.encoder.embed_tokens.weight, self.output_bias), encoder_out


# Architectures: fairseq's transformer of the same name, plus the constituent attention defaults.


@register_model_architecture("constituent_transformer", "constituent_transformer")
def constituent_transformer(args):
    arch_defaults(args, renormalize_constituent_attention=False, neighbour_score_scale="half-d-model")
    base_architecture(args)


@register_model_architecture("constituent_transformer", "constituent_transformer_iwslt_de_en")
def constituent_transformer_iwslt_de_en(args):
    transformer_iwslt_de_en(args)  # 512 / ffn 1024 / 4 heads, 6 + 6 layers
    constituent_transformer(args)


@register_model_architecture("constituent_transformer", "constituent_transformer_wmt_en_de")
def constituent_transformer_wmt_en_de(args):
    transformer_wmt_en_de(args)  # 512 / ffn 2048 / 8 heads, 6 + 6 layers
    constituent_transformer(args)


@register_model_architecture("constituent_transformer", "constituent_transformer_tiny")
def constituent_transformer_tiny(args):
    """For tests: 32 / ffn 64 / 4 heads, 2 + 2 layers."""
    tiny_defaults(args)
    constituent_transformer(args)


@register_model_architecture("constituent_encoder_lm", "constituent_encoder_lm")
def constituent_encoder_lm(args):
    """The paper's encoder (section 7.1): 512 / ffn 2048 / 8 heads, dropout 0.1, 10 layers (its
    Table 1's best depth on WSJ). Paper silent, chosen: GELU as BERT, post-norm as the original
    transformer encoder the paper says it is identical to, attention dropout 0."""
    arch_defaults(args, encoder_embed_dim=512, encoder_ffn_embed_dim=2048, encoder_layers=10,
                  encoder_attention_heads=8, dropout=0.1, activation_fn="gelu")
    constituent_transformer(args)


@register_model_architecture("constituent_encoder_lm", "constituent_encoder_lm_small")
def constituent_encoder_lm_small(args):
    """A smaller masked LM for quick CPU runs (this plugin's earlier default): 256 / ffn 1024 /
    4 heads, 6 layers, the rest as :func:`constituent_encoder_lm`."""
    arch_defaults(args, encoder_embed_dim=256, encoder_ffn_embed_dim=1024, encoder_layers=6,
                  encoder_attention_heads=4)
    constituent_encoder_lm(args)


@register_model_architecture("constituent_encoder_lm", "constituent_encoder_lm_tiny")
def constituent_encoder_lm_tiny(args):
    """For tests: 32 / ffn 64 / 4 heads, 2 layers."""
    arch_defaults(args, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_layers=2,
                  encoder_attention_heads=4)
    constituent_encoder_lm(args)
