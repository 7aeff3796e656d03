"""Parent-scaled self-attention, PASCAL (Bugliarello and Okazaki, ACL 2020, "Enhancing Machine
Translation with Dependency-Aware Self-Attention"): the fairseq wiring of
:mod:`tree_fairseq.modules.parent_scaled_attention`. docs/methods.md (section 6) lists the
method's settings (as this project's description of the paper and the released code give them;
the paper's text was not at hand) against this code.

Encoder: fairseq's transformer encoder (embeddings, sinusoidal positions, layers, final layer
norm) in which the self-attention of the layers ``--pascal-layers`` (default ``1``, the first, as
in the description and every released training script) has ``--pascal-heads`` parent-scaled
heads; the other layers are fairseq's own. The parent weights are computed once per batch from
the batch's ``src_parent_spans`` and shared by those layers (each draws its own parent-ignoring
in training). Decoder: fairseq's transformer decoder, unchanged (its cross-attention keeps keys
and values per source sentence in beam search,
:class:`~tree_fairseq.models.common.SentenceCrossAttentionDecoder`).

The model reads each source piece's dependency parent, which ``--task dependency_translation``
puts in the batch (a data-bin with parents: tree-fairseq-preprocess with
``{pref}.heads.{src}``); the task's tree keys are accepted and ignored.

Options (each one the released code has, :class:`PascalTransformerConfig`): ``--pascal-heads`` P,
``--pascal-layers``, ``--pascal-weight normal|uniform``, ``--pascal-sigma`` σ (the Gaussian's
standard deviation, default 1), ``--pascal-window`` (the uniform window's half-width, default 1),
``--pascal-parent-position middle|first`` (where a parent word of several pieces sits, default
the middle) and ``--pascal-parent-ignoring`` q (default 0).
"""

from dataclasses import dataclass
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerEncoderBase
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
    transformer_wmt_en_de_big,
)
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from torch import Tensor

from tree_fairseq.models.common import (
    FeedForwardBlock,
    SentenceRowsReorder,
    TextSourceTransformerModel,
    arch_defaults,
    option,
    tiny_defaults,
)
from tree_fairseq.modules.parent_scaled_attention import (
    PARENT_POSITIONS,
    PARENT_WEIGHTS,
    ParentScaledSelfAttention,
    parent_positions,
    parent_weight_flops,
    parent_weights,
)


@dataclass
class PascalTransformerConfig(TransformerConfig):
    """fairseq's transformer options plus parent-scaled self-attention's."""

    pascal_heads: int = option(1, "P: parent-scaled heads in each layer of --pascal-layers (the first P heads)",
                               minimum=0)
    pascal_layers: str = option(
        "1",
        "encoder layers with parent-scaled heads, numbered from 1, comma-separated "
        "(default: 1, the first, as in the paper)",
    )
    pascal_weight: ChoiceEnum(list(PARENT_WEIGHTS)) = option(
        "normal",
        "weight over the keys around a token's parent: normal, the Gaussian N(j; p, sigma^2) "
        "(default, the paper's); uniform, 1 within --pascal-window of the parent, 0 elsewhere",
    )
    pascal_sigma: float = option(1.0, "sigma, the standard deviation of the normal weight (default: 1)", above=0)
    pascal_window: int = option(1, "half-width c of the uniform weight: keys with |j - p| < c + 1 (default: 1)",
                                minimum=0)
    pascal_parent_position: ChoiceEnum(list(PARENT_POSITIONS)) = option(
        "middle",
        "position of a parent word of several pieces: middle, the mean of its pieces' positions "
        "(default, the paper's); first, its first piece",
    )
    pascal_parent_ignoring: float = option(
        0.0,
        "q: in training, each token of each parent-scaled head ignores its parent (weights all "
        "ones) with this probability (default: 0)",
        minimum=0,
        maximum=1,
    )


def pascal_layer_indices(cfg) -> tuple[int, ...]:
    """The 0-based encoder layers of ``--pascal-layers``; ValueError for a layer that is not one."""
    text = str(cfg.pascal_layers).strip()
    try:
        layers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--pascal-layers {text!r}: comma-separated layer numbers from 1, e.g. 1 or 1,2") from None
    num_layers = cfg.encoder.layers
    if not layers or layers[0] < 1 or layers[-1] > num_layers:
        raise ValueError(f"--pascal-layers {text!r}: layers from 1 to --encoder-layers ({num_layers})")
    return tuple(layer - 1 for layer in layers)


class PascalEncoderLayer(FeedForwardBlock, TransformerEncoderLayerBase):
    """fairseq's encoder layer whose self-attention is :class:`ParentScaledSelfAttention`."""

    def build_self_attention(self, embed_dim, cfg):
        if cfg.pascal_heads > cfg.encoder.attention_heads:
            raise ValueError(f"--pascal-heads {cfg.pascal_heads} is more than the layer's "
                             f"--encoder-attention-heads {cfg.encoder.attention_heads}")
        return ParentScaledSelfAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            cfg.pascal_heads,
            dropout=cfg.attention_dropout,
            parent_ignoring=cfg.pascal_parent_ignoring,
        )

    def forward(self, x: Tensor, weights: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
        """x: ``(n, B, C)``; weights: the parent weights ``(B, n, n)``; padding_mask: ``(B, n)``
        or None. Returns ``(n, B, C)``."""
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(x.transpose(0, 1), weights, padding_mask)
        x = self.residual_connection(self.dropout_module(x.transpose(0, 1)), residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)
        return self.forward_feed_forward(x)


class PascalEncoder(SentenceRowsReorder, TransformerEncoderBase):
    """fairseq's transformer encoder with :class:`PascalEncoderLayer` at ``--pascal-layers``.
    Its output is fairseq's encoder dictionary."""

    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(cfg, dictionary, embed_tokens)
        for index in pascal_layer_indices(cfg):
            self.layers[index] = PascalEncoderLayer(cfg)

    def method_flops(self, batch_size: int, length: int, backward: bool) -> int:
        """The parent scaling's elementwise work in one forward over ``batch_size`` rows of
        ``length`` columns (``backward``: and its backward): the weights, once per batch
        (:func:`parent_weight_flops`), and their product with the scores in each parent-scaled
        layer (:meth:`ParentScaledSelfAttention.scaling_flops`). The rest of the encoder is the
        transformer's; ``torch.utils.flop_counter`` counts its matrix products, not this."""
        cfg = self.cfg
        flops = parent_weight_flops(batch_size, length, str(cfg.pascal_weight), str(cfg.pascal_parent_position))
        for layer in self.layers:
            if isinstance(layer, PascalEncoderLayer):
                flops += layer.self_attn.scaling_flops(batch_size, length, backward)
        return flops

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        src_parent_spans: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        # The tree keys of a dependency_translation batch: not read.
        src_node_labels: Optional[Tensor] = None,
        src_node_spans: Optional[Tensor] = None,
        src_node_padding_mask: Optional[Tensor] = None,
    ):
        """src_tokens ``(B, n)``; src_parent_spans ``(B, n, 2)``: the first and last column of the
        pieces of each token's parent word (:mod:`tree_fairseq.data.parent_dataset`)."""
        if src_parent_spans is None:
            raise ValueError("pascal_transformer reads each source token's dependency parent (src_parent_spans): "
                             "use --task dependency_translation on a data-bin with parents")
        if src_parent_spans.shape[:2] != src_tokens.shape:
            raise ValueError(f"src_parent_spans {tuple(src_parent_spans.shape)} does not match src_tokens "
                             f"{tuple(src_tokens.shape)}")
        cfg = self.cfg
        padding_mask = src_tokens.eq(self.padding_idx)  # (B, n)
        layer_padding_mask = padding_mask if padding_mask.any() else None
        weights = parent_weights(parent_positions(src_parent_spans, str(cfg.pascal_parent_position)),
                                 str(cfg.pascal_weight), sigma=cfg.pascal_sigma, window=cfg.pascal_window)
        x, embedding = self.forward_embedding(src_tokens)
        x = x.masked_fill(padding_mask.unsqueeze(-1), 0.0).transpose(0, 1)  # (n, B, C)
        encoder_states = [x] if return_all_hiddens else []
        for layer in self.layers:
            if isinstance(layer, PascalEncoderLayer):
                x = layer(x, weights, layer_padding_mask)
            else:
                x = layer(x, encoder_padding_mask=layer_padding_mask)
            if return_all_hiddens:
                encoder_states.append(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x],  # (n, B, C)
            "encoder_padding_mask": [padding_mask],  # (B, n)
            "encoder_embedding": [embedding],  # (B, n, C)
            "encoder_states": encoder_states,  # list of (n, B, C)
            "src_tokens": [],
            "src_lengths": [(~padding_mask).sum(dim=1, dtype=torch.int32).view(-1, 1)],
        }


@register_model("pascal_transformer")
class PascalTransformerModel(TextSourceTransformerModel):
    """A :class:`PascalEncoder` and fairseq's transformer decoder, for
    ``--task dependency_translation``. Options: :class:`PascalTransformerConfig`."""

    config_class = PascalTransformerConfig

    @classmethod
    def set_defaults(cls, args):
        pascal_transformer(args)

    @classmethod
    def build_model(cls, args, task):
        if not getattr(task, "source_parents", False):
            raise ValueError("pascal_transformer reads each source token's dependency parent: use --task "
                             "dependency_translation (a data-bin made by tree-fairseq-preprocess with "
                             "{pref}.heads.{src} beside the trees)")
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        return PascalEncoder(cfg, src_dict, embed_tokens)

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        src_parent_spans=None,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        src_node_labels=None,
        src_node_spans=None,
        src_node_padding_mask=None,
    ):
        """fairseq's transformer forward pass with the source parents; the tree keys are ignored."""
        return self.encode_and_decode((src_tokens, src_lengths, src_parent_spans), prev_output_tokens, src_lengths,
                                      return_all_hiddens, features_only, alignment_layer, alignment_heads)


# Architectures: fairseq's transformer of the same name, plus the parent-scaled heads' defaults.


def pascal_defaults(args, heads: int):
    """``heads`` parent-scaled heads in the first layer, the Gaussian with σ = 1 at the middle of
    the parent's pieces, no parent-ignoring."""
    arch_defaults(args, pascal_heads=heads, pascal_layers="1", pascal_weight="normal", pascal_sigma=1.0,
                  pascal_window=1, pascal_parent_position="middle", pascal_parent_ignoring=0.0)


# The released training script of the paper's WMT16 en-de model scales 5 of the 8 heads of the
# first layer (its scripts for other data use 2, 7 or 8 of 8); at 4 heads (IWSLT, tiny) half of
# them are chosen here.
BASE_PASCAL_HEADS = 5


@register_model_architecture("pascal_transformer", "pascal_transformer")
def pascal_transformer(args):
    pascal_defaults(args, BASE_PASCAL_HEADS)
    base_architecture(args)


@register_model_architecture("pascal_transformer", "pascal_transformer_iwslt_de_en")
def pascal_transformer_iwslt_de_en(args):
    transformer_iwslt_de_en(args)  # 512 / ffn 1024 / 4 heads, 6 + 6 layers
    pascal_defaults(args, 2)
    pascal_transformer(args)


@register_model_architecture("pascal_transformer", "pascal_transformer_wmt_en_de")
def pascal_transformer_wmt_en_de(args):
    transformer_wmt_en_de(args)  # the paper's base: 512 / ffn 2048 / 8 heads, 6 + 6 layers
    pascal_transformer(args)


@register_model_architecture("pascal_transformer", "pascal_transformer_wmt_en_de_big")
def pascal_transformer_wmt_en_de_big(args):
    transformer_wmt_en_de_big(args)  # 1024 / ffn 4096 / 16 heads, dropout 0.3, attention dropout 0.1
    pascal_transformer(args)


@register_model_architecture("pascal_transformer", "pascal_transformer_tiny")
def pascal_transformer_tiny(args):
    """For tests: 32 / ffn 64 / 4 heads (2 parent-scaled), 2 + 2 layers."""
    tiny_defaults(args)
    pascal_defaults(args, 2)
    pascal_transformer(args)
