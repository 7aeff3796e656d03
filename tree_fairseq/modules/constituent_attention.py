"""Constituent attention (Wang, Lee and Chen, EMNLP 2019, "Tree Transformer: Integrating Tree
Structures into Self-Attention", arXiv 1909.06639, sections 4-6 and Algorithm 1). docs/methods.md
(section 2) lists every equation and setting of the paper against this code.

Each layer ``l`` (numbered from 0, as the paper's figures number them) induces soft constituents
from its input and restricts self-attention to them:

- neighbouring attention (section 5.1): token i scores its two neighbours,
  ``s_{i,i±1} = q_i · k_{i±1} / d`` (eq. 5, link query/key projections of size ``d_model``, the
  scale ``d = d_model / 2`` as the paper sets it), and normalises over them,
  ``p_{i,i+1}, p_{i,i-1} = softmax(s_{i,i+1}, s_{i,i-1})`` (eq. 6); the link probability of the
  pair is ``â_i = sqrt(p_{i,i+1} · p_{i+1,i})`` (eq. 7);
- hierarchical constraint (section 5.2, eq. 8): ``a^l_k = a^{l-1}_k + (1 - a^{l-1}_k) · â^l_k``
  with ``a^{-1} = 0``, so links only strengthen going up and constituents only merge;
- constituent prior (eqs. 3-4): ``C_ij = Π_{k=i}^{j-1} a_k`` for ``i < j``, ``C_ji = C_ij``,
  computed as the exponential of a sum of logs;
- attention (eq. 2): ``E = C ⊙ softmax(QKᵀ / sqrt(d_head))``, one ``C`` shared by all heads.

Readings, and choices the paper leaves open, made here:

- the diagonal is the empty product, ``C_ii = 1``: a token always lies in its own constituent,
  so its own attention weight is never scaled down. (The authors' code leaves ``C_ii`` near 0,
  about 3e-5 in the first layer: a token hardly attends to itself; not followed.)
- ``E`` is not renormalised, as the paper's equation reads and the authors' code does: a row of ``E``
  sums to at most 1, and the mass a token would give outside its constituent is dropped, not
  moved inside it. ``ConstituentSelfAttention(renormalize=True)`` divides each row by its sum
  instead (an ablation).
- ``C`` comes from a prefix sum ``S_j = Σ_{k<j} log a_k``: ``C_ij = exp(-|S_j - S_i|)``, O(n²)
  with no n×n product (the authors' code multiplies two n×n matrices, O(n³)). ``S`` and the
  differences are taken in float64: in float32 ``S`` of a long sentence is large and
  ``S_j - S_i`` loses the digits that matter when the constituent is strong (C near 1).
  ``log 0`` is avoided by clamping ``a`` at the smallest normal float64 (≈ 2.2e-308) before
  the log: a product across a link of 0 is then exactly 0 in float32, and the gradient finite.
- ``â`` is computed in log space, ``log â = (log p_{i,i+1} + log p_{i+1,i}) / 2`` with the
  two-way softmax as a log-sigmoid, so neither the square root at 0 nor an underflowing
  softmax can give an infinite gradient (the authors' code adds 1e-9 under the square root).
- the score of eq. 5 is divided by ``d = d_model / 2`` as the paper sets it (the authors' code
  divides by a constant 256, the same for their ``d_model = 512``);
  ``neighbouring_attention(..., scale="d-model")`` divides by ``d_model`` instead, this plugin's
  earlier reading. The layer norm the authors' code applies to the input of the neighbouring
  attention is left to the calling layer (a post-norm encoder's input is already normalised).
- padding (left or right, real tokens contiguous): a token beside padding has one neighbour,
  which it then attends with probability 1, like the first and last tokens of the paper's
  sentences. A link touching padding has ``â = a = 0`` (padding is never in a real token's
  constituent); such links are left out of the prefix sum and ``C`` is 0 on padded rows and
  columns, so no value of a sentence depends on the others in the batch, and padded queries
  get zero attention and a zero output.
- memory: without autograd (inference) the prior is formed in place and the attention head by
  head, so one ``(B, n, n)`` of weights is alive at a time instead of several ``(B, H, n, n)``;
  the same operations, the same numbers (inference memory then grows with the sentence length as
  the transformer's does, within 1.1-1.5x from 16 to 512 tokens).

Algorithm 1 (unsupervised parsing) is :func:`unsupervised_parse`; see its docstring.
"""

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tree_fairseq.modules.head_projections import HeadProjections
from tree_fairseq.trees.tree import Node, Tree

INDUCED_LABEL = "X"  # the label of every induced constituent: Algorithm 1 gives none


def link_padding_mask(padding_mask: Tensor) -> Tensor:
    """``(B, n)`` token padding mask -> ``(B, n - 1)`` bool, True where link ``k`` (between
    tokens ``k`` and ``k + 1``) touches padding."""
    return padding_mask[:, :-1] | padding_mask[:, 1:]


# The divisor d of eq. 5 as a function of d_model: the paper's d_model / 2, or d_model.
NEIGHBOUR_SCORE_DIVISORS = {"half-d-model": lambda d_model: d_model / 2, "d-model": lambda d_model: d_model}


def neighbouring_attention(queries: Tensor, keys: Tensor, padding_mask: Tensor, scale: str = "half-d-model") -> Tensor:
    """The link probabilities ``â_k = sqrt(p_{k,k+1} · p_{k+1,k})`` (eqs. 5-7).

    queries, keys: ``(B, n, d_model)``; padding_mask: ``(B, n)`` bool; scale: the divisor ``d``
    of eq. 5, ``"half-d-model"`` (``d_model / 2``, the paper's) or ``"d-model"``. Returns
    ``(B, n - 1)`` in at least float32, 0 on links touching padding. A token with a single real
    neighbour gives it probability 1.
    """
    if scale not in NEIGHBOUR_SCORE_DIVISORS:
        raise ValueError(f"scale {scale!r} is not one of {sorted(NEIGHBOUR_SCORE_DIVISORS)}")
    dtype = torch.promote_types(queries.dtype, torch.float32)
    queries, keys = queries.to(dtype), keys.to(dtype)
    scale = 1.0 / NEIGHBOUR_SCORE_DIVISORS[scale](queries.size(-1))
    real_link = ~link_padding_mask(padding_mask)  # (B, n-1)
    right_score = (queries[:, :-1] * keys[:, 1:]).sum(-1) * scale  # (B, n-1) s_{k,k+1}
    left_score = (queries[:, 1:] * keys[:, :-1]).sum(-1) * scale  # (B, n-1) s_{k+1,k}
    # Token k also scores its left neighbour (s_{k,k-1}); token k+1 also its right one (s_{k+1,k+2}).
    left_of_first = F.pad(left_score, (1, 0))[:, :-1]
    has_left = F.pad(real_link, (1, 0), value=False)[:, :-1]
    right_of_second = F.pad(right_score, (0, 1))[:, 1:]
    has_right = F.pad(real_link, (0, 1), value=False)[:, 1:]
    # A two-way softmax is a sigmoid of the score difference; where the other neighbour is
    # missing the probability is 1 (log 0). torch.where keeps masked branches' gradients at 0.
    log_p_right = torch.where(has_left, F.logsigmoid(right_score - left_of_first), 0.0)  # log p_{k,k+1}
    log_p_left = torch.where(has_right, F.logsigmoid(left_score - right_of_second), 0.0)  # log p_{k+1,k}
    links = torch.exp(0.5 * (log_p_right + log_p_left))
    return links.masked_fill(~real_link, 0.0)


def hierarchical_constraint(previous: Tensor | None, current: Tensor) -> Tensor:
    """``a^l = a^{l-1} + (1 - a^{l-1}) · â^l`` (eq. 8); ``previous = None`` stands for
    ``a^{-1} = 0`` (below the first layer).

    previous, current: ``(B, n - 1)`` in [0, 1]. The result is in [0, 1] and ``>= previous``.
    """
    if previous is None:
        return current
    return previous + (1.0 - previous) * current


def constituent_prior(links: Tensor, padding_mask: Tensor) -> Tensor:
    """``C_ij = Π_{k=min(i,j)}^{max(i,j)-1} a_k`` (eq. 3), ``C_ii = 1``, from a prefix sum of
    ``log a`` (eq. 4).

    links: ``a (B, n - 1)``; padding_mask: ``(B, n)`` bool. Returns ``(B, n, n)`` in at least
    float32, symmetric, 0 on padded rows and columns.
    """
    dtype = torch.promote_types(links.dtype, torch.float32)
    real = ~padding_mask
    log_links = links.double().clamp_min(torch.finfo(torch.float64).tiny).log()
    log_links = log_links.masked_fill(link_padding_mask(padding_mask), 0.0)
    prefix = F.pad(log_links.cumsum(-1), (1, 0))  # (B, n)  S_j = Σ_{k<j} log a_k, non-increasing
    outside = ~(real.unsqueeze(2) & real.unsqueeze(1))
    if not (torch.is_grad_enabled() and prefix.requires_grad):
        # Without autograd, in place: one float64 and one float32 n × n per sentence at a time.
        # -|S_j - S_i| is exactly the difference chosen below (negation and abs are exact).
        prior = (prefix.unsqueeze(1) - prefix.unsqueeze(2)).abs_().neg_().to(dtype)
        return prior.exp_().masked_fill_(outside, 0.0)
    difference = prefix.unsqueeze(1) - prefix.unsqueeze(2)  # (B, n, n)  [i, j] = S_j - S_i
    upper = torch.ones(difference.shape[-2:], dtype=torch.bool, device=links.device).triu()
    # S_max(i,j) - S_min(i,j) = Σ log a over the links between i and j (<= 0); chosen by position,
    # not with abs(), so that the gradient at log a = 0 is the one-sided one.
    log_prior = torch.where(upper, difference, difference.transpose(1, 2))
    prior = log_prior.to(dtype).exp()
    return prior.masked_fill(outside, 0.0)


class Constituents(NamedTuple):
    """What the constituent attention module of one layer gives its layer and the next one."""

    links: Tensor  # (B, n - 1)  a^l: pass to the next layer as ``previous_links``
    prior: Tensor  # (B, n, n)  C


class ConstituentAttention(nn.Module):
    """The paper's Constituent Attention module of one layer: neighbouring attention,
    hierarchical constraint and constituent prior (section 5, Figure 1B). ``score_scale``: the
    divisor of eq. 5 (see :func:`neighbouring_attention`)."""

    def __init__(self, embed_dim: int, bias: bool = True, score_scale: str = "half-d-model"):
        super().__init__()
        if score_scale not in NEIGHBOUR_SCORE_DIVISORS:
            raise ValueError(f"score_scale {score_scale!r} is not one of {sorted(NEIGHBOUR_SCORE_DIVISORS)}")
        self.score_scale = score_scale
        self.query = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.key = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.query.weight)
        nn.init.xavier_uniform_(self.key.weight)

    def forward(self, x: Tensor, padding_mask: Tensor, previous_links: Tensor | None = None) -> Constituents:
        """x: the layer's input ``(B, n, d)``; padding_mask: ``(B, n)`` bool; previous_links:
        ``a^{l-1} (B, n - 1)``, None in the first layer. Returns ``a^l`` and ``C``."""
        current = neighbouring_attention(self.query(x), self.key(x), padding_mask, self.score_scale)
        links = hierarchical_constraint(previous_links, current)
        return Constituents(links, constituent_prior(links, padding_mask))


class ConstituentSelfAttention(HeadProjections):
    """Multi-head self-attention scaled by the constituent prior, ``E = C ⊙ softmax(QKᵀ/√d_h)``
    (eq. 2),
    followed by ``W^O`` (the residual, layer norm and feed-forward belong to the layer).

    q/k/v/out projections and their initialisation are fairseq's ``MultiheadAttention``'s
    (:class:`~tree_fairseq.modules.head_projections.HeadProjections`).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        renormalize: bool = False,
    ):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias)
        self.renormalize = renormalize

    def forward(
        self, x: Tensor, prior: Tensor, padding_mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x: ``(B, n, d)``; prior: ``C (B, n, n)``; padding_mask: ``(B, n)`` bool.

        Returns the output ``(B, n, d)`` (zero at padded positions) and, if ``need_weights``,
        ``E (B, H, n, n)`` before dropout.
        """
        queries, keys, values = self.project(x)
        if not need_weights and not (torch.is_grad_enabled() and (queries.requires_grad or prior.requires_grad)):
            attended = self._attend_head_by_head(queries, keys, values, prior, padding_mask)
            out = self.out_proj(self._merge_heads(attended))
            return out.masked_fill_(padding_mask.unsqueeze(-1), 0.0), None
        scores = (queries @ keys.transpose(-1, -2)).to(prior.dtype)  # (B, H, n, n)
        # Every query keeps at least one real key (a padded query sees the real keys; an
        # all-padding row cannot occur in a batch of non-empty sentences).
        probs = scores.masked_fill(padding_mask[:, None, None, :], float("-inf")).softmax(dim=-1)
        probs = probs * prior.unsqueeze(1)
        if self.renormalize:
            probs = probs / probs.sum(-1, keepdim=True).clamp_min(torch.finfo(probs.dtype).tiny)
        attended = F.dropout(probs, p=self.dropout, training=self.training).to(values.dtype) @ values
        out = self.out_proj(self._merge_heads(attended))
        out = out.masked_fill(padding_mask.unsqueeze(-1), 0.0)
        return out, (probs if need_weights else None)

    def _attend_head_by_head(self, queries: Tensor, keys: Tensor, values: Tensor, prior: Tensor,
                             padding_mask: Tensor) -> Tensor:
        """``E V`` ``(B, H, n, dh)`` without autograd, one head at a time and in place: the same
        operations as :meth:`forward`'s, with one ``(B, n, n)`` of weights alive instead of
        several ``(B, H, n, n)`` (inference memory grows as the transformer's)."""
        attended = values.new_empty(values.shape)
        key_padding = padding_mask[:, None, :]
        for head in range(self.num_heads):
            probs = (queries[:, head] @ keys[:, head].transpose(-1, -2)).to(prior.dtype)  # (B, n, n)
            probs = probs.masked_fill_(key_padding, float("-inf")).softmax(dim=-1)
            probs.mul_(prior)
            if self.renormalize:
                probs.div_(probs.sum(-1, keepdim=True).clamp_min(torch.finfo(probs.dtype).tiny))
            probs = F.dropout(probs, p=self.dropout, training=self.training)
            torch.matmul(probs.to(values.dtype), values[:, head], out=attended[:, head])
        return attended


def unsupervised_parse(
    link_probabilities: Tensor,
    leaves: Sequence[str] | None = None,
    min_layer: int = 3,
    threshold: float = 0.8,
) -> Tree:
    """Algorithm 1 ("Unsupervised Parsing with Multiple Layers") on one sentence.

    link_probabilities: ``a^l (L, n - 1)``, row ``l`` the link probabilities of layer ``l``
    (0 = lowest), of the sentence's own tokens only (the caller drops padding, and EOS when it
    is not to be parsed). leaves: the n tokens (default ``"0" … "n-1"``). min_layer: the
    paper's ``m``, with layers numbered from 0 as in the paper's figures; default 3, the best
    value of its Figure 4(a) (the authors' code uses 2); it needs at least ``m + 1`` layers.
    threshold: the paper's 0.8.

    ``BuildTree(l, s, e)`` over the tokens ``s..e`` (inclusive), starting at ``(L - 1, 0, n - 1)``:

    1. a span of one or two tokens is returned as it is (two tokens are a constituent);
    2. ``b = argmin_{s <= k < e} a^l_k``, the weakest link (the first on ties);
    3. if ``a^l_b > threshold`` the span is not split at layer l: at ``l = m`` it is returned
       as one flat constituent, otherwise ``BuildTree(l - 1, s, e)``;
    4. otherwise the span is a constituent split into ``BuildTree(max(l - 1, m), s, b)`` and
       ``BuildTree(max(l - 1, m), b + 1, e)``: after a split, both halves go one layer down.

    This is the paper's Algorithm 1. The authors' released code differs: after a split a half
    stays on the same layer unless all its links exceed 0.7; not followed.

    Returns a :class:`Tree` whose nodes (label ``X``) are the constituents of >= 2 tokens, the
    whole sentence included; flat constituents have more than two children.
    """
    links = torch.as_tensor(link_probabilities).detach().cpu()
    # The input's own precision: 0.8 in float32 must compare equal to a threshold of 0.8.
    links = links.to(torch.promote_types(links.dtype, torch.float32))
    if links.dim() != 2:
        raise ValueError(f"link probabilities must be (layers, n - 1), got shape {tuple(links.shape)}")
    num_layers, num_tokens = links.size(0), links.size(1) + 1
    if not 0 <= min_layer < num_layers:
        raise ValueError(f"min_layer {min_layer} is not one of the {num_layers} layers (layers are numbered "
                         f"from 0; Algorithm 1's default m = 3 needs at least 4)")
    if leaves is None:
        leaves = [str(i) for i in range(num_tokens)]
    if len(leaves) != num_tokens:
        raise ValueError(f"{len(leaves)} leaves but link probabilities for {num_tokens} tokens")

    spans = []
    pending = [(num_layers - 1, 0, num_tokens - 1)]  # BuildTree calls still to make
    while pending:
        layer, start, end = pending.pop()
        if end - start < 2:
            if end > start:
                spans.append((start, end))
            continue
        span = links[layer, start:end]
        split = int(torch.argmin(span))
        lower = max(layer - 1, min_layer)
        if span[split] > threshold:
            if layer == min_layer:
                spans.append((start, end))
            else:
                pending.append((layer - 1, start, end))
            continue
        spans.append((start, end))
        pending.append((lower, start + split + 1, end))
        pending.append((lower, start, start + split))
    return Tree(tuple(leaves), tuple(Node(INDUCED_LABEL, start, end) for start, end in spans))
