"""The Treeformer chart (Patel and Flanigan, "Forming Trees with Treeformers", arXiv 2207.06960):
a CKY-style encoder that builds a vector for every span from the vectors of its sub-spans.
docs/methods.md, section 4, lists each printed equation and setting against this code.

The chart's first row is the tokens, ``r_{i,i}`` (the output of the encoder below the chart).
For a span ``[i, j]`` with ``j > i`` every binary split ``i <= k < j`` proposes a composition of
its two halves (eq. 1), and the span's vector pools the proposals by scaled dot-product attention
of their keys to one learned vector ``w`` (eq. 2)::

    c^k_{i,j} = W·[r_{i,k}; r_{k+1,j}]                                  (eq. 1, W ∈ R^{d×2d})
    r_{i,j}   = Σ_k softmax_k(K c^k_{i,j} · Q w / √d) c^k_{i,j}         (eq. 2, K, Q ∈ R^{d×d}, w ∈ R^d)

One ``W``, ``K``, ``Q`` and ``w`` serve all spans. Options (this plugin's earlier forms):
``composition="gelu_layernorm"``, ``c = LayerNorm(GELU(W·[r_l; r_r] + b))``, and
``pooling="vector"``, ``softmax_k(u · c^k)`` with one learned ``u`` and no scaling.

Computation:

- height (§4): ``H = max_height`` (default 10, the paper's) is the longest span in tokens; the
  tokens are height 1, so the chart computes the spans of 2 … H tokens, one height at a time
  (H - 1 sequential steps), each step one batched tensor operation over all starts and splits
  of the whole batch (pytorch-struct style).
- by linearity (the paper's "precompute in O(n)"): ``W·[x; y] = W_L·x + W_R·y`` and
  ``K c · Q w / √d = c · u`` with ``u = Kᵀ Q w / √d``, so every cell is projected once when it is
  built, ``[W_L·r; u·W_L·r]`` and ``[W_R·r; u·W_R·r]``; a composition and its pooling score are
  then sums of two stored rows, and a span's vector is its weights times its halves' stored
  projections. (The ``gelu_layernorm`` option is not linear: its compositions are built and
  scored per split.) Memory ``O(n·H·d)`` per sentence: the cells, their projections and one
  height's ``n·h`` gathered halves at a time (in training too, with ``checkpoint_levels``, the
  default: each height is recomputed in the backward pass).
- longer spans are not built: a sentence longer than H has no root cell; tokens further apart
  than H - 1 meet only in the encoder's self-attention below the chart and in the decoder's
  attention over tokens and cells.
- padding (left or right): a span is a cell only if all its tokens are real; other cells are
  zero and masked. A real span's cell is built from real cells only, so a sentence's cells do
  not depend on the rest of the batch. To keep EOS out of every span, mark it as padding.

Output: :class:`Chart`, the cells above the tokens ``(B, n, L, d)`` with
``cells[b, i, h - 2] = r_{i, i+h-1}`` (the span of h tokens from i) and ``L = min(H, n) - 1``, and
a ``(B, n, L)`` padding mask. :meth:`Chart.flatten` gives the ``(B, L·n, d)`` memory and
``(B, L·n)`` key padding mask a decoder cross-attends to, concatenated with the tokens (the
chart's first row) by the caller.

Checkpoints of this module before it followed eqs. 1-2 and the paper's height count (no
``version`` entry: ``max_height`` counted the heights above the tokens, spans of up to H + 1
tokens) load with their forms and their span length; see :meth:`upgrade_state_dict_named`.
"""

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

COMPOSITIONS = ("linear", "gelu_layernorm")
POOLINGS = ("query_key", "vector")


class Chart(NamedTuple):
    """The span cells above the tokens; ``cells[b, i, h - 2]`` is the span of h tokens from i."""

    cells: Tensor  # (B, n, L, d), zero where masked
    padding_mask: Tensor  # (B, n, L) bool, True where the span runs past the sentence

    def flatten(self) -> tuple[Tensor, Tensor]:
        """``(B, L·n, d)`` cells height by height (index ``(h - 2)·n + i`` is the span of h tokens
        from i) and their ``(B, L·n)`` key padding mask."""
        batch_size, _, _, dim = self.cells.shape
        cells = self.cells.transpose(1, 2).reshape(batch_size, -1, dim)
        return cells, self.padding_mask.transpose(1, 2).reshape(batch_size, -1)

    def index_select(self, order: Tensor) -> "Chart":
        """The chart of the sentences ``order`` (LongTensor of batch indices), e.g. for beam search."""
        return Chart(self.cells.index_select(0, order), self.padding_mask.index_select(0, order))


def span_padding_mask(padding_mask: Tensor, max_height: int) -> Tensor:
    """``(B, n)`` token padding mask -> ``(B, n, L)`` bool, True where the span of h tokens from i
    (``h = 2 … H'``, ``H' = min(max_height, n)``, ``L = H' - 1``) holds padding or runs past the end."""
    batch_size, length = padding_mask.shape
    levels = max(min(max_height, length) - 1, 0)
    pads = F.pad(padding_mask.long().cumsum(-1), (1, 0))  # (B, n + 1) padded tokens before column
    start = torch.arange(length, device=padding_mask.device).unsqueeze(1)  # (n, 1)
    end = start + torch.arange(1, levels + 1, device=padding_mask.device)  # (n, L) inclusive
    inside = end < length
    pads_in_span = pads[:, end.clamp(max=length - 1) + 1] - pads[:, start.expand_as(end)]  # (B, n, L)
    return (pads_in_span > 0) | ~inside


def _at_least_float32(scores: Tensor) -> Tensor:
    """Softmax scores in float32 at least (bf16 / fp16 under autocast or a half model)."""
    return scores.to(torch.promote_types(scores.dtype, torch.float32))


class TreeformerChart(nn.Module):
    """The CKY-style chart encoder: eq. 1 composes every binary split, eq. 2 pools the splits,
    spans of up to ``max_height`` tokens; see the module docstring.

    ``composition`` (``linear``: eq. 1; ``gelu_layernorm``) and ``pooling`` (``query_key``:
    eq. 2; ``vector``) pick the forms. ``checkpoint_levels`` recomputes each height in the
    backward pass instead of keeping it, which holds the training memory to ``O(n·H·d)`` per
    sentence too (kept, it is ``O(n·H²·d)``: every height keeps ``n·h`` gathered halves).
    """

    #: 2: ``max_height`` is the longest span in tokens. Checkpoints without the entry (version 1)
    #: counted the heights above the tokens.
    VERSION = 2

    def __init__(
        self,
        embed_dim: int,
        max_height: int = 10,
        checkpoint_levels: bool = True,
        composition: str = "linear",
        pooling: str = "query_key",
    ):
        super().__init__()
        if max_height < 1:
            raise ValueError(f"max_height must be >= 1, got {max_height}")
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}, got {composition!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.embed_dim = embed_dim
        self.max_height = max_height
        self.max_span = max_height  # tokens; max_height + 1 for a version-1 checkpoint
        self.checkpoint_levels = checkpoint_levels
        self.register_buffer("version", torch.tensor([float(self.VERSION)]))
        self._build_composition(composition)
        self._build_pooling(pooling)
        self.reset_parameters()

    def _build_composition(self, composition: str, device=None, dtype=None):
        self.composition_form = composition
        linear = composition == "linear"
        self.compose = nn.Linear(2 * self.embed_dim, self.embed_dim, bias=not linear, device=device, dtype=dtype)
        self.compose_norm = None if linear else nn.LayerNorm(self.embed_dim, device=device, dtype=dtype)

    def _build_pooling(self, pooling: str, device=None, dtype=None):
        self.pooling_form = pooling
        dim = self.embed_dim
        if pooling == "query_key":
            self.pool_key = nn.Linear(dim, dim, bias=False, device=device, dtype=dtype)  # K
            self.pool_query = nn.Linear(dim, dim, bias=False, device=device, dtype=dtype)  # Q
            self.pool_w = nn.Parameter(torch.empty(dim, device=device, dtype=dtype))  # w
            self.pooling_query = None
        else:
            self.pool_key = self.pool_query = self.pool_w = None
            self.pooling_query = nn.Parameter(torch.empty(dim, device=device, dtype=dtype))  # u

    def reset_parameters(self):
        # The paper gives no initialisation. W: fairseq's xavier_uniform, which keeps the scale of
        # the cells of order 1 from height to height for layer-normalised tokens.
        nn.init.xavier_uniform_(self.compose.weight)
        if self.compose.bias is not None:
            nn.init.zeros_(self.compose.bias)
        if self.pooling_form == "query_key":
            # K c · Q w / √d of order 1 for cells of order 1, as in fairseq's attention.
            nn.init.xavier_uniform_(self.pool_key.weight)
            nn.init.xavier_uniform_(self.pool_query.weight)
            nn.init.normal_(self.pool_w)
        else:
            nn.init.normal_(self.pooling_query, std=self.embed_dim**-0.5)  # u · c of order 1

    def upgrade_state_dict_named(self, state_dict, name):
        """Load a checkpoint of another form (``compose_norm`` entries: ``gelu_layernorm``;
        ``pooling_query``: ``vector``) with that form, and one without a ``version`` entry with
        its span length (its ``max_height`` counted the heights above the tokens: spans of up to
        ``max_height + 1`` tokens). The entry is then added as 1, so a checkpoint saved again keeps
        that length."""
        prefix = f"{name}." if name else ""
        weight = state_dict.get(f"{prefix}compose.weight")
        if weight is None:
            return
        composition = "gelu_layernorm" if f"{prefix}compose_norm.weight" in state_dict else "linear"
        pooling = "vector" if f"{prefix}pooling_query" in state_dict else "query_key"
        if composition != self.composition_form:
            self._build_composition(composition, weight.device, weight.dtype)
        if pooling != self.pooling_form:
            self._build_pooling(pooling, weight.device, weight.dtype)
        version = state_dict.setdefault(f"{prefix}version", torch.tensor([1.0]))
        self.max_span = self.max_height + (1 if float(version[0]) < 2 else 0)

    def pooling_vector(self) -> Tensor:
        """``u`` of the pooling score ``c · u``: ``Kᵀ Q w / √d`` (eq. 2), or the learned ``u`` (``vector``)."""
        if self.pooling_form == "vector":
            return self.pooling_query
        return self.pool_key.weight.t() @ self.pool_query(self.pool_w) / math.sqrt(self.embed_dim)

    def _projections(self, cells: Tensor, pooling_vector: Tensor) -> tuple[Tensor, Tensor]:
        """``W_L·r`` and ``W_R·r`` of ``(B, n, d)`` cells (no bias: it is added once per
        composition); for the linear composition each with its pooling score ``u·W_L·r`` or
        ``u·W_R·r`` appended: ``(B, n, d + 1)``."""
        dim = self.embed_dim
        weight_left, weight_right = self.compose.weight[:, :dim], self.compose.weight[:, dim:]  # (d, d)
        if self.compose_norm is None:
            weight_left = torch.cat([weight_left, (pooling_vector @ weight_left).unsqueeze(0)])  # (d + 1, d)
            weight_right = torch.cat([weight_right, (pooling_vector @ weight_right).unsqueeze(0)])
        return F.linear(cells, weight_left), F.linear(cells, weight_right)

    def _level(self, cell_padding_mask: Tensor, pooling_vector: Tensor, *projections: Tensor) -> Tensor:
        """The cells of the spans of h tokens, for every start i: ``(B, n, d)``.

        cell_padding_mask: ``(B, n)`` for these spans; pooling_vector: ``u`` ``(d,)``;
        projections: the left projections (:meth:`_projections`) of the spans of ``1 … h - 1``
        tokens, then their right projections, each ``(B, n, d)`` or ``(B, n, d + 1)``.
        """
        splits_count = len(projections) // 2  # h - 1
        length = cell_padding_mask.size(1)
        device = cell_padding_mask.device
        splits = torch.arange(1, splits_count + 1, device=device)  # s: tokens in the left half
        columns = torch.arange(length, device=device).unsqueeze(1)  # (n, 1)
        # Split s of the span of h tokens from i: the left half, s tokens from i, is row s - 1 at
        # column i; the right half, h - s tokens from i + s, is row h - s - 1 at column i + s
        # (clamped where the span runs past the end).
        left = torch.stack(projections[:splits_count], dim=2)  # (B, n, h - 1, d [+ 1])
        right_rows = torch.stack(projections[splits_count:], dim=2)
        right = right_rows[:, (columns + splits).clamp(max=length - 1), splits_count - splits]  # (B, n, h - 1, d [+ 1])
        if self.compose_norm is None:
            # Linear: c = W_L·r_l + W_R·r_r and c·u = u·W_L·r_l + u·W_R·r_r, so Σ_k α_k c_k is
            # the weights times each half's projections.
            scores = _at_least_float32(left[..., -1] + right[..., -1])  # (B, n, h - 1)
            weights = scores.softmax(dim=-1).to(left.dtype).unsqueeze(-2)  # (B, n, 1, h - 1)
            cells = (weights @ left[..., :-1]).squeeze(-2) + (weights @ right[..., :-1]).squeeze(-2)
        else:
            compositions = self.compose_norm(F.gelu(left + right + self.compose.bias))  # (B, n, h - 1, d)
            scores = _at_least_float32(compositions @ pooling_vector.to(compositions.dtype))  # (B, n, h - 1)
            weights = scores.softmax(dim=-1).to(compositions.dtype)
            cells = (weights.unsqueeze(-1) * compositions).sum(dim=2)
        # Cells running past the sentence were built from padding: zero them before any use.
        return cells.masked_fill(cell_padding_mask.unsqueeze(-1), 0.0)

    def forward(self, leaves: Tensor, padding_mask: Tensor) -> Chart:
        """leaves: the tokens ``r_{i,i}`` ``(B, n, d)``; padding_mask: ``(B, n)`` bool. Returns the :class:`Chart`."""
        batch_size, length, dim = leaves.shape
        cell_padding_mask = span_padding_mask(padding_mask, self.max_span)  # (B, n, L)
        levels = cell_padding_mask.size(-1)
        if not levels:
            return Chart(leaves.new_zeros(batch_size, length, 0, dim), cell_padding_mask)
        pooling_vector = self.pooling_vector()
        as_left, as_right = self._projections(leaves, pooling_vector)
        left_projections, right_projections = [as_left], [as_right]  # per row, (B, n, d [+ 1]) each
        rows = []
        for level in range(levels):  # the spans of level + 2 tokens
            inputs = (cell_padding_mask[:, :, level], pooling_vector, *left_projections, *right_projections)
            if self.checkpoint_levels and torch.is_grad_enabled():
                cells = checkpoint(self._level, *inputs, use_reentrant=False)
            else:
                cells = self._level(*inputs)
            rows.append(cells)
            if level + 1 < levels:
                as_left, as_right = self._projections(cells, pooling_vector)
                left_projections.append(as_left)
                right_projections.append(as_right)
        return Chart(torch.stack(rows, dim=2), cell_padding_mask)
