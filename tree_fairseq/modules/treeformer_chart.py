"""The Treeformer chart (Patel and Flanigan, "Forming Trees with Treeformers", arXiv 2207.06960):
a CKY-style encoder that builds a vector for every span from the vectors of its sub-spans.

For a span ``[i, j]`` with ``j > i`` every binary split ``i <= k < j`` proposes a composition of
its two halves, and the span's vector pools the proposals with attention against a learned
query ``u``::

    c^k_{i,j} = LayerNorm(GELU(W·[r_{i,k}; r_{k+1,j}] + b))
    α^k_{i,j} = softmax_k(u · c^k_{i,j})
    r_{i,j}   = Σ_k α^k_{i,j} c^k_{i,j}

with ``r_{i,i}`` the leaves (the output of the encoder below the chart).

Choices, made here:

- the composition is one linear map of the concatenated halves, ``W·[r_left; r_right] + b``,
  followed by GELU and layer norm (the nonlinearity and the norm are this implementation's
  choice): the norm keeps the scale of ``r`` the same at every height, so the pooling scores
  of short and long spans are comparable. The pooling scores are unscaled dot products with
  ``u``; one ``W``, ``b`` and ``u`` serve all heights.
- ``W·[x; y] = W_L·x + W_R·y``: ``W_L·r`` and ``W_R·r`` are computed once per cell when the cell
  is built, and a composition is then a sum of two stored vectors. A span of height h has h
  splits, so this saves the ``O(n·H²·d²)`` of multiplying per split; what remains is
  ``O(n·H·d²)`` for the projections and ``O(n·H²·d)`` for the splits.
- height: the chart holds the spans of ``h + 1`` leaves for ``h = 1 … H`` (``H = max_height``,
  default 10), i.e. H levels above the leaves, built in H sequential steps, each one batched
  tensor operation over all starts and splits of the whole batch (pytorch-struct style).
  Memory ``O(n·H·d)`` per sentence: the chart cells, the two stored projections per cell and
  one level's ``n·h`` compositions at a time (in training too, with ``checkpoint_levels``,
  the default: each level's compositions are recomputed in the backward pass).
- longer spans are not built: a sentence longer than H + 1 has no root cell and the chart
  gives no sentence vector; tokens further apart than H meet only in the encoder's
  self-attention below the chart and in the decoder's attention over tokens and cells. (A
  caller that needs one vector can pool the cells.)
- padding (left or right): a span is a cell only if all its leaves are real; other cells are
  zero and masked. A real span's cell is built from real cells only, so a sentence's cells do
  not depend on the rest of the batch. To keep EOS out of every span, mark it as padding.

Output: :class:`Chart`, cells ``(B, n, H', d)`` with ``cells[b, i, h - 1] = r_{i, i+h}`` and
``H' = min(H, n - 1)``, and a ``(B, n, H')`` padding mask. :meth:`Chart.flatten` gives the
``(B, H'·n, d)`` memory and ``(B, H'·n)`` key padding mask a decoder cross-attends to
(concatenated with the tokens by the caller).
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint


class Chart(NamedTuple):
    """The span cells of a batch; ``cells[b, i, h - 1]`` is the span ``[i, i + h]``."""

    cells: Tensor  # (B, n, H', d), zero where masked
    padding_mask: Tensor  # (B, n, H') bool, True where the span runs past the sentence

    def flatten(self) -> tuple[Tensor, Tensor]:
        """``(B, H'·n, d)`` cells level by level (index ``(h - 1)·n + i`` is ``[i, i + h]``) and
        their ``(B, H'·n)`` key padding mask."""
        batch_size, _, _, dim = self.cells.shape
        cells = self.cells.transpose(1, 2).reshape(batch_size, -1, dim)
        return cells, self.padding_mask.transpose(1, 2).reshape(batch_size, -1)

    def index_select(self, order: Tensor) -> "Chart":
        """The chart of the sentences ``order`` (LongTensor of batch indices), e.g. for beam search."""
        return Chart(self.cells.index_select(0, order), self.padding_mask.index_select(0, order))


def span_padding_mask(padding_mask: Tensor, max_height: int) -> Tensor:
    """``(B, n)`` token padding mask -> ``(B, n, H')`` bool, True where the span
    ``[i, i + h]`` (``h = 1 … H'``, ``H' = min(max_height, n - 1)``) holds padding or runs
    past the end."""
    batch_size, length = padding_mask.shape
    height = max(min(max_height, length - 1), 0)
    pads = F.pad(padding_mask.long().cumsum(-1), (1, 0))  # (B, n + 1) padded tokens before column
    start = torch.arange(length, device=padding_mask.device).unsqueeze(1)  # (n, 1)
    end = start + torch.arange(1, height + 1, device=padding_mask.device)  # (n, H') inclusive
    inside = end < length
    pads_in_span = pads[:, end.clamp(max=length - 1) + 1] - pads[:, start.expand_as(end)]  # (B, n, H')
    return (pads_in_span > 0) | ~inside


class TreeformerChart(nn.Module):
    """The CKY-style chart encoder (composition of all binary splits, attention pooling against
    a learned query, spans up to ``max_height + 1`` leaves); see the module docstring.

    ``checkpoint_levels`` recomputes each level's compositions in the backward pass instead of
    keeping them, which holds the training memory to ``O(n·H·d)`` per sentence too (kept, they
    are ``O(n·H²·d)``: every level keeps ``n·h`` compositions for its backward).
    """

    def __init__(self, embed_dim: int, max_height: int = 10, checkpoint_levels: bool = True):
        super().__init__()
        if max_height < 1:
            raise ValueError(f"max_height must be >= 1, got {max_height}")
        self.embed_dim = embed_dim
        self.max_height = max_height
        self.checkpoint_levels = checkpoint_levels
        self.compose = nn.Linear(2 * embed_dim, embed_dim)  # W·[left; right] + b
        self.compose_norm = nn.LayerNorm(embed_dim)
        self.pooling_query = nn.Parameter(torch.empty(embed_dim))  # u
        nn.init.xavier_uniform_(self.compose.weight)
        nn.init.zeros_(self.compose.bias)
        # u · c of order 1 for layer-normalised c.
        nn.init.normal_(self.pooling_query, std=embed_dim**-0.5)

    def composition(self, left: Tensor, right: Tensor) -> Tensor:
        """``c = LayerNorm(GELU(W·[left; right] + b))`` for ``(..., d)`` halves."""
        return self.compose_norm(F.gelu(self.compose(torch.cat([left, right], dim=-1))))

    def _projections(self, cells: Tensor) -> tuple[Tensor, Tensor]:
        """``W_L·r`` and ``W_R·r`` of ``(B, n, d)`` cells (no bias: it is added once per composition)."""
        dim = cells.size(-1)
        return F.linear(cells, self.compose.weight[:, :dim]), F.linear(cells, self.compose.weight[:, dim:])

    def _level(self, cell_padding_mask: Tensor, *projections: Tensor) -> Tensor:
        """The cells of height h, ``r_{i,i+h}`` for every start i: ``(B, n, d)``.

        cell_padding_mask: ``(B, n)`` for this height; projections: ``W_L·r`` of the levels
        ``0 … h-1``, then ``W_R·r`` of the same levels, each ``(B, n, d)``.
        """
        height = len(projections) // 2
        length = cell_padding_mask.size(1)
        device = cell_padding_mask.device
        splits = torch.arange(1, height + 1, device=device)  # s: leaves in the left half
        columns = torch.arange(length, device=device).unsqueeze(1)  # (n, 1)
        # Split s of [i, i + h]: left [i, i + s - 1] is level s - 1 at column i, right
        # [i + s, i + h] is level h - s at column i + s (clamped where the span runs past the end).
        left = torch.stack(projections[:height], dim=2)  # (B, n, h, d)
        right_levels = torch.stack(projections[height:], dim=2)  # (B, n, h, d)
        right = right_levels[:, (columns + splits).clamp(max=length - 1), height - splits]  # (B, n, h, d)
        compositions = self.compose_norm(F.gelu(left + right + self.compose.bias))  # (B, n, h, d)
        scores = (compositions @ self.pooling_query.to(compositions.dtype)).float()  # (B, n, h)
        weights = scores.softmax(dim=-1).to(compositions.dtype)
        cells = (weights.unsqueeze(-1) * compositions).sum(dim=2)
        # Cells running past the sentence were built from padding: zero them before any use.
        return cells.masked_fill(cell_padding_mask.unsqueeze(-1), 0.0)

    def forward(self, leaves: Tensor, padding_mask: Tensor) -> Chart:
        """leaves: ``r_{i,i} (B, n, d)``; padding_mask: ``(B, n)`` bool. Returns the :class:`Chart`."""
        batch_size, length, dim = leaves.shape
        cell_padding_mask = span_padding_mask(padding_mask, self.max_height)  # (B, n, H')
        height = cell_padding_mask.size(-1)
        as_left, as_right = self._projections(leaves)
        left_projections, right_projections = [as_left], [as_right]  # per level, (B, n, d) each
        levels = []
        for h in range(1, height + 1):
            inputs = (cell_padding_mask[:, :, h - 1], *left_projections, *right_projections)
            if self.checkpoint_levels and torch.is_grad_enabled():
                cells = checkpoint(self._level, *inputs, use_reentrant=False)
            else:
                cells = self._level(*inputs)
            levels.append(cells)
            if h < height:
                as_left, as_right = self._projections(cells)
                left_projections.append(as_left)
                right_projections.append(as_right)
        if not levels:
            return Chart(leaves.new_zeros(batch_size, length, 0, dim), cell_padding_mask)
        return Chart(torch.stack(levels, dim=2), cell_padding_mask)
