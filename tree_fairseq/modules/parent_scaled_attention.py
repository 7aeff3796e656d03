"""Parent-scaled self-attention, PASCAL (Bugliarello and Okazaki, ACL 2020, "Enhancing Machine
Translation with Dependency-Aware Self-Attention", arXiv 1909.03149). docs/methods.md
(section 6) lists the method's settings against this code.

The method, as this project's description of the paper gives it (the paper's text was not at
hand here, so nothing below is quoted from it) and as the released code (github.com/e-bug/pascal)
computes it for a batch of one sentence. In ``P`` heads of the encoder's first self-attention
layer, for the query token ``i`` whose dependency parent sits at position ``p_i``, the scaled dot
products ``S_ij = q_i · k_j / sqrt(d)`` are multiplied, elementwise and before the softmax, by a
weight over the key positions ``j`` centred on the parent::

    w_ij = N(j; p_i, σ²) = exp(-(j - p_i)² / (2σ²)) / sqrt(2πσ²)        (σ² = 1 by default)
    S'_ij = S_ij · w_ij,        head output = softmax(S') V

The other heads of the layer are standard; there are no new parameters. With subword pieces,
every piece of a word gets its word's parent, and a parent's position is the middle of its
word's pieces (the mean of their positions; the first piece as an option); the root is its own
parent. Options exposed here, each one the released code has: ``P`` (its training scripts use 2,
5, 7 and 8 of 8 heads, for different data), ``σ``, which encoder layers, a uniform window instead
of the Gaussian, and parent-ignoring (a dropout of the parent weighting in training; 0.3 or 0.4 in
some of its scripts, 0 in the others).

Where this module stands:

- positions are a batch's columns, the parents' absolute columns too (the data layer adds each
  sentence's padding offset), so ``j - p_i`` and every weight are the same whatever the padding
  (left or right) and whatever else is in the batch. Padded keys get ``-inf`` after the scaling,
  as in fairseq's attention; a padded query is its own parent (any finite value would do: its
  output is never read);
- EOS, which no parser parses, is its own parent (as the root), so its Gaussian peaks on itself;
- the ``P`` parent-scaled heads are heads ``0 .. P-1`` of the layer (the heads are
  interchangeable; which ``P`` carry the parents is a labelling choice);
- without autograd (inference) the layer attends one head at a time, scaling, masking and
  normalising that head's ``(B, n, n)`` scores in place, so no ``(B, H, n, n)`` tensor is
  formed; with autograd, all heads at once and out of place. The two paths do the same
  elementwise operations (tests compare them);
- the uniform window (:data:`PARENT_WEIGHTS` ``uniform``) is ``w_ij = 1`` where
  ``|j - p_i| < c + 1`` and 0 elsewhere, ``c`` the window: the ``2c + 1`` keys centred on a
  parent at a piece, ``2c + 2`` around a parent at the middle of an even number of pieces. It is
  not normalised (the released code's definition, below);
- parent-ignoring (:func:`ignore_parents`): in training, each query token of each
  parent-scaled head, independently with probability ``q``, has its weights replaced by ones
  (its scores kept as they are, the head standard for that token); none in evaluation. The
  paper's text could not be read here; this is the granularity of the released code (one draw
  per row of the weights it builds: per sentence, head and query token).

The released code (github.com/e-bug/pascal, ``fairseq/fairseq/modules/multihead_pascal.py``,
read for understanding only) departs from the method where batches hold more than one sentence.
Its attention rows are laid out sentence-major (``q.view(tgt_len, bsz * num_heads, head_dim)``:
row ``b·H + h``), while the weights are built per sentence with the ``P`` copies side by side
(``.repeat(1, num_pascal_heads, 1).view(-1, n, n)``: row ``b·P + h``) and multiplied into the
*last* ``P·bsz`` rows (``attn_weights[-self.num_pascal_heads*bsz:] *= pascal_weights``). With
``H = 8``, ``P = 1`` and 16 sentences, the last 16 rows are all 8 heads of sentences 14 and 15,
row ``r`` scaled with the parents of sentence ``r - 112``: sentence 14's head ``h`` gets
sentence ``h``'s parents, sentence 15's head ``h`` sentence ``8 + h``'s (its own on its last
head only), and the other 14 sentences get no parent weighting at all. With one sentence per
batch (``bsz = 1``) the last ``P`` heads get its own parents, as the method has it. Its encoder
(``fairseq/fairseq/models/pascal_transformer.py``) reads the parents as numbers from a tag
dictionary, a tag that is none (EOS, padding) becoming the batch's last column. Its data
(``fairseq/fairseq/data/tags_language_pair_dataset.py``) collates the sources left-padded
(``left_pad_source`` defaults to True in its ``tags_translation`` task) and the parents with
``left_pad=left_pad_target`` (False): right-padded, so in a batch of several lengths a shorter
sentence's parents are shifted against its tokens by its padding. Its ``unipdf`` builds the
uniform window as ``|j - p_i| < w + 1`` (followed here).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from tree_fairseq.modules.head_projections import HeadProjections

# The weight a parent-scaled head multiplies its scores by: the paper's Gaussian, or a window.
PARENT_WEIGHTS = ("normal", "uniform")
# Where a parent word of several pieces sits: the middle of its pieces (their mean position), or its first piece.
PARENT_POSITIONS = ("middle", "first")


def parent_positions(parent_spans: Tensor, position: str = "middle") -> Tensor:
    """Each token's parent position, ``(B, n)`` float32, from ``parent_spans (B, n, 2)``: the
    inclusive first and last column of the pieces of the token's parent word (the batch's
    ``src_parent_spans``). ``middle``: their mean, ``(first + last) / 2`` (the pieces of a word
    are contiguous); ``first``: the first piece."""
    if position not in PARENT_POSITIONS:
        raise ValueError(f"unknown parent position {position!r}; one of {PARENT_POSITIONS}")
    spans = parent_spans.float()
    if position == "first":
        return spans[..., 0]
    return spans.mean(dim=-1)


def parent_weights(parents: Tensor, weight: str = "normal", sigma: float = 1.0, window: int = 1) -> Tensor:
    """The weights ``w (B, n, n)`` float32 of query ``i`` over key ``j`` for ``parents (B, n)``
    (each query's parent column): ``normal``, ``N(j; p_i, σ²)`` (``sigma`` = σ); ``uniform``,
    1 where ``|j - p_i| < window + 1``, else 0."""
    if weight not in PARENT_WEIGHTS:
        raise ValueError(f"unknown parent weight {weight!r}; one of {PARENT_WEIGHTS}")
    columns = torch.arange(parents.size(-1), device=parents.device, dtype=torch.float32)
    distance = columns - parents.float().unsqueeze(-1)  # (B, n, n): j - p_i
    if weight == "uniform":
        return (distance.abs() < window + 1).float()
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, not {sigma}")
    variance = sigma * sigma
    return torch.exp(-distance.square() / (2 * variance)) / math.sqrt(2 * math.pi * variance)


def parent_weight_flops(batch_size: int, length: int, weight: str = "normal", position: str = "middle") -> int:
    """The operations of :func:`parent_positions` and :func:`parent_weights` for a batch of
    ``batch_size`` rows of ``length`` columns, one per output element of each elementwise or
    reduction operation (casts and copies: none): the middle of the parent's pieces, a mean, 1
    per token; the Gaussian's ``j - p_i``, square, negation, ``/ 2σ²``, exp and ``/ sqrt(2πσ²)``,
    6 per query and key; the window's ``j - p_i``, absolute value and ``< c + 1``, 3. This is
    work that ``torch.utils.flop_counter`` (matrix products only) does not count."""
    if weight not in PARENT_WEIGHTS:
        raise ValueError(f"unknown parent weight {weight!r}; one of {PARENT_WEIGHTS}")
    if position not in PARENT_POSITIONS:
        raise ValueError(f"unknown parent position {position!r}; one of {PARENT_POSITIONS}")
    per_pair = 6 if weight == "normal" else 3
    per_token = 1 if position == "middle" else 0
    return batch_size * length * (per_pair * length + per_token)


def ignore_parents(weights: Tensor, num_heads: int, probability: float,
                   generator: torch.Generator | None = None) -> Tensor:
    """Parent-ignoring: ``weights (B, n, n)`` for ``num_heads`` heads, ``(B, num_heads, n, n)``,
    where each query row of each head is, with ``probability``, all ones instead (that token's
    scores are left as they are in that head)."""
    batch_size, length, _ = weights.shape
    ignored = torch.rand(batch_size, num_heads, length, device=weights.device, generator=generator) < probability
    return weights.unsqueeze(1).masked_fill(ignored.unsqueeze(-1), 1.0)


class ParentScaledSelfAttention(HeadProjections):
    """Multi-head self-attention whose first ``num_parent_heads`` heads multiply their scaled
    scores by parent weights (:func:`parent_weights`) before the softmax, followed by ``W^O``
    (the residual, layer norm and feed-forward belong to the layer).

    q/k/v/out projections, their names and initialisation are fairseq's ``MultiheadAttention``'s
    (:class:`~tree_fairseq.modules.head_projections.HeadProjections`: a fairseq transformer
    layer's state dict loads into it). ``parent_ignoring`` is the probability of
    :func:`ignore_parents` in training."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_parent_heads: int,
        dropout: float = 0.0,
        parent_ignoring: float = 0.0,
        bias: bool = True,
    ):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias)
        if not 0 <= num_parent_heads <= num_heads:
            raise ValueError(f"{num_parent_heads} parent-scaled heads of {num_heads}: between 0 and {num_heads}")
        if not 0 <= parent_ignoring <= 1:
            raise ValueError(f"parent-ignoring {parent_ignoring} is not a probability")
        self.num_parent_heads = num_parent_heads
        self.parent_ignoring = parent_ignoring

    def scaling_flops(self, batch_size: int, length: int, backward: bool) -> int:
        """The operations that parent-scale the scores of a batch of ``batch_size`` rows of
        ``length`` columns beyond what standard heads do, one per output element of each
        elementwise operation (copies: none): the product ``S ⊙ w`` in the ``P`` heads,
        ``B·P·n²`` (``backward``: as many again, the gradient through the product; the weights
        take none); in training with parent-ignoring, the draw's comparison per query and head and
        the replacement by ones per weight. This is work that ``torch.utils.flop_counter`` (matrix
        products only) does not count."""
        heads = self.num_parent_heads
        flops = batch_size * heads * length * length * (2 if backward else 1)
        if heads and self.training and self.parent_ignoring > 0:
            flops += batch_size * heads * length * (length + 1)
        return flops

    def forward(
        self, x: Tensor, weights: Tensor, padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x: ``(B, n, d)``; weights: ``w (B, n, n)`` of :func:`parent_weights`; padding_mask:
        ``(B, n)`` bool, True at padding, or None.

        Returns the output ``(B, n, d)`` and, if ``need_weights``, the attention probabilities
        ``(B, H, n, n)`` before dropout.

        Without autograd (and without ``need_weights``) the heads are attended one at a time and
        in place (:meth:`_attend_head_by_head`); with autograd, all heads at once, out of place."""
        queries, keys, values = self.project(x)
        head_weights = self._head_weights(weights)
        if not need_weights and not (torch.is_grad_enabled() and any(
                t.requires_grad for t in (queries, keys, values, weights))):
            attended = self._attend_head_by_head(queries, keys, values, head_weights, padding_mask)
            del queries, keys, values  # not needed for the output projection
            return self.out_proj(self._merge_heads(attended)), None
        scores = (queries @ keys.transpose(-1, -2)).float()  # (B, H, n, n): S = q·k / sqrt(d)
        parent_heads = self.num_parent_heads
        if parent_heads:
            scores = torch.cat([scores[:, :parent_heads] * head_weights, scores[:, parent_heads:]], dim=1)
        if padding_mask is not None:
            # Every query keeps a real key: a batch holds no empty sentence (EOS at least).
            scores = scores.masked_fill(padding_mask[:, None, None, :], float("-inf"))
        probs = scores.softmax(dim=-1)
        attended = F.dropout(probs, p=self.dropout, training=self.training).to(values.dtype) @ values
        return self.out_proj(self._merge_heads(attended)), probs if need_weights else None

    def _head_weights(self, weights: Tensor) -> Tensor:
        """The weights of the ``P`` parent-scaled heads, ``(B, P, n, n)``: ``weights`` for each
        (a view), or in training with parent-ignoring each head's own draw
        (:func:`ignore_parents`)."""
        if self.num_parent_heads and self.training and self.parent_ignoring > 0:
            return ignore_parents(weights, self.num_parent_heads, self.parent_ignoring)
        return weights.unsqueeze(1).expand(-1, self.num_parent_heads, -1, -1)

    def _attend_head_by_head(self, queries: Tensor, keys: Tensor, values: Tensor, head_weights: Tensor,
                             padding_mask: Tensor | None) -> Tensor:
        """The heads' outputs ``softmax(S') V`` ``(B, H, n, dh)`` without autograd, one head at a
        time and in place: the operations of :meth:`forward`'s autograd path, elementwise the
        same, with one head's ``(B, n, n)`` scores and probabilities alive at a time instead of
        the three ``(B, H, n, n)`` tensors of scores, scaled scores and probabilities (in
        training, attention dropout draws its mask head by head, so other draws than the
        autograd path's)."""
        attended = values.new_empty(values.shape)
        key_padding = None if padding_mask is None else padding_mask[:, None, :]
        for head in range(self.num_heads):
            scores = (queries[:, head] @ keys[:, head].transpose(-1, -2)).float()  # (B, n, n)
            if head < self.num_parent_heads:
                scores.mul_(head_weights[:, head])
            if key_padding is not None:
                scores.masked_fill_(key_padding, float("-inf"))
            probs = F.dropout(scores.softmax(dim=-1), p=self.dropout, training=self.training)
            del scores
            torch.matmul(probs.to(values.dtype), values[:, head], out=attended[:, head])
            del probs  # before the next head's scores
        return attended
