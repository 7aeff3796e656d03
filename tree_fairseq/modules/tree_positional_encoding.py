"""Tree positional encodings (Shiv & Quirk, NeurIPS 2019, "Novel positional encodings to enable
tree-based transformers"), section 3; docs/methods.md, section 3, compares the code with the paper
row by row.

A position in a tree is the path from the root. The paper writes it as a stack of one-hot child
indices, the most recent step first, truncated to depth ``k``, for trees of degree ``n``:
``x ∈ {0, 1}^{k·n}``, the root being the empty stack ``0``. Moving along an edge is affine:

    D_i x = [e_i ; x[:-n]]     (eq. 2) down to child i: push e_i on the front, the oldest step falls off
    U x   = [x[n:] ; 0_n]      (eq. 3) up to the parent: pop the front

so ``U D_i x = x`` (eq. 1) for every position of depth < k. The parameterised encoding weights the
one-hot at stack position ``l`` (``l = 0`` the most recent step) by ``p^l``
(``x' = x ⊙ (1_n ; p_n ; p_n² ; …)``), learns ``p = tanh(θ)``, multiplies by ``sqrt(1 - p²)`` "to
approximately normalize it" and then by ``sqrt(d_model) / 2``, as section 3.2 prints it::

    w[p, l] = p^l · sqrt(1 - p²) · sqrt(d_model) / 2

Several ``p`` are learned and their encodings concatenated (``d_pos = P·k·n``).

**Norm against fairseq's sinusoidal encodings.** A position ``L`` steps below the root (``L <= k``)
has, per ``p``, the squared norm ``c² (1 - p²) Σ_{l<L} p^{2l} = c² (1 - p^{2L})``, with ``c`` the
constant factor: zero at the root, ``c²`` for deep positions. With all ``P`` weights,
``‖enc‖² = c² Σ_p (1 - p^{2L}) <= P·c²``. fairseq's sinusoidal embedding of the same ``d_model``
has ``d/2`` sine–cosine pairs of norm 1, hence the norm ``sqrt(d/2)`` at every position. So:

- the paper's ``c = sqrt(d)/2`` gives each ``p`` at most ``1/√2`` of the sinusoidal norm, and the
  whole encoding at most ``sqrt(P/2)`` times it: at ``d = 512, k = 32`` (``P = 8``, no projection)
  up to 32.0 against 16.0; at the paper's ``d = 256, d_pos = 2048`` (``P = 32``) up to 45.3
  against 11.3 before the projection, which then sets the scale (at its Xavier-uniform
  initialisation ``E‖Wx‖² = 2d/(d_pos + d)·‖x‖²``, about 0.47 in norm: ≈ 21);
- the option ``scale="authors_code"`` (``--tree-pe-scale authors_code``),
  ``c = sqrt(d/2)``, the reading of the authors' implementation and this plugin's earlier form,
  is ``√2`` larger: each ``p`` at most exactly the sinusoidal norm, the whole up to ``sqrt(P)``
  times it.

Choices the paper leaves open, made here:

- **Binarisation, left-child right-sibling (LCRS), degree n = 2**, not a maximum degree. Our trees
  have any arity (flat NPs with 5+ children, a BPE node over many pieces, a root over a whole
  clause): a maximum degree must either be large, which spends the ``k·n`` budget on degree instead
  of depth, or clip the child index, which gives siblings the same encoding. Under LCRS step 0
  (``FIRST_CHILD``) goes from a node to its first child and step 1 (``NEXT_SIBLING``) from a node
  to its next sibling: every position of any tree is unique up to the truncation, the budget goes
  to depth, and a decoder needs only the paper's two binary moves, whatever the arity of what it
  generates. The price: a child's index becomes depth (the 5th child is 5 steps below its
  parent's first child), so in flat nodes the ancestors leave the window of ``k`` steps sooner.
- **Initialisation**: ``θ`` is drawn from ``U(0.7, 0.999)`` (``p ≈ 0.60 … 0.76``); the paper
  does not print one.
- **Sizes**: ``P`` learned ``p`` (default ``d // (k·n)``, at least 1) give a ``P·k·n = d_pos``
  vector, ordered ``(p, stack position, child)``; a bias-free linear map, learned, projects it to
  ``d`` when ``d_pos ≠ d`` (the paper uses ``d_pos = 2048`` at ``d_model = 256`` without saying
  how the two meet).
- **EOS** is the root's right sibling (path ``[NEXT_SIBLING]``): the source is the forest
  [tree, EOS]. It cannot be the zero encoding, which is the root's (the empty stack).
  A one-word sentence has no node: its word is the root.
- **Padding** gets the empty path, hence the zero encoding; callers mask it anyway.

Paths are kept as child indices, ``(..., k)`` long, most recent step first, ``-1`` past the
root: exact, small, cheap to reorder with a beam. ``one_hot_stack`` turns them into the paper's
``x``; :func:`push_child` and :func:`pop_child` are ``D_i`` and ``U`` on them.

Batch layout (the data layer's): leaves ``(B, n)`` with EOS last, left- or right-padded; node
spans ``(B, m, 2)`` inclusive absolute leaf columns, bottom-up, right-padded with ``(-1, -1)``;
masks True at padding.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

FIRST_CHILD = 0
NEXT_SIBLING = 1
DEGREE = 2  # of the LCRS binarisation
SCALES = ("paper", "authors_code")


def tree_items(
    spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The nodes and leaves of a batch as one list of items per sentence, ``[nodes; leaves]``
    (item ``x < m`` is node ``x``, item ``m + j`` is leaf ``j``).

    Returns ``start, end`` (B, m + n) inclusive leaf columns and ``real`` (B, m + n) bool.
    """
    batch_size, num_leaves = leaf_padding_mask.shape
    column = torch.arange(num_leaves, device=spans.device).expand(batch_size, num_leaves)
    start = torch.cat([spans[..., 0], column], dim=1)
    end = torch.cat([spans[..., 1], column], dim=1)
    real = torch.cat([~node_padding_mask, ~leaf_padding_mask], dim=1)
    return start, end, real


def tree_parents(spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor) -> Tensor:
    """The parent node of every item of :func:`tree_items`: the smallest real node span strictly
    containing it. Returns ``(B, m + n)`` long node indices, ``-1`` where there is none (the root,
    EOS, the word of a one-word sentence, padding).

    Spans are unique, so a node strictly contains an item iff it contains it and is not it; the
    nodes containing an item are nested, so the smallest is unique.
    """
    num_nodes = spans.size(1)
    start, end, real = tree_items(spans, leaf_padding_mask, node_padding_mask)
    if num_nodes == 0:
        return torch.full_like(start, -1)
    real_node = real[:, :num_nodes]
    not_itself = ~torch.eye(num_nodes, start.size(1), dtype=torch.bool, device=spans.device)
    contains = (
        (spans[..., 0, None] <= start.unsqueeze(1))
        & (end.unsqueeze(1) <= spans[..., 1, None])
        & real_node.unsqueeze(-1)
        & real.unsqueeze(1)
        & not_itself
    )  # (B, m, m + n)
    width = (spans[..., 1] - spans[..., 0]).unsqueeze(-1)  # (B, m, 1)
    never = torch.iinfo(width.dtype).max
    smallest, parent = width.expand_as(contains).masked_fill(~contains, never).min(dim=1)
    return parent.masked_fill(smallest == never, -1)


def tree_paths(
    spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor, max_depth: int
) -> tuple[Tensor, Tensor]:
    """LCRS paths from the root of every node and leaf of a batch, computed once per batch.

    Returns ``node_paths (B, m, k)`` and ``leaf_paths (B, n, k)``, long: ``FIRST_CHILD`` /
    ``NEXT_SIBLING`` steps, the most recent first, truncated to ``k = max_depth``, ``-1`` past
    the root. The root's path is empty (all ``-1``), EOS's is ``[NEXT_SIBLING]``, padding's empty.

    In the LCRS tree an item's parent is its previous sibling (step ``NEXT_SIBLING``) or, for a
    first child, its parent (step ``FIRST_CHILD``). Top-level items (root, EOS) are siblings of
    one another. The path is then read by following these parents ``k`` times, each step one
    gather over the whole batch.
    """
    num_nodes = spans.size(1)
    batch_size, num_leaves = leaf_padding_mask.shape
    device = spans.device
    start, end, real = tree_items(spans, leaf_padding_mask, node_padding_mask)
    parent = tree_parents(spans, leaf_padding_mask, node_padding_mask)  # (B, I)
    num_items = parent.size(1)

    # ending[b, g, c]: the item of sibling group g (a node, or num_nodes for the top level)
    # that ends at leaf column c. Siblings are disjoint, so there is at most one.
    group = parent.masked_fill(parent < 0, num_nodes)
    ending = torch.full((batch_size, num_nodes + 1, num_leaves), -1, dtype=torch.long, device=device)
    b, x = real.nonzero(as_tuple=True)
    ending[b, group[b, x], end[b, x]] = x
    row = torch.arange(batch_size, device=device).unsqueeze(1)
    previous = ending[row, group, (start - 1).clamp(min=0)]
    previous = previous.masked_fill((start == 0) | ~real, -1)  # (B, I)

    has_previous = previous >= 0
    first_child = ~has_previous & (parent >= 0)
    step = torch.full_like(parent, -1)
    step[has_previous] = NEXT_SIBLING
    step[first_child] = FIRST_CHILD
    binary_parent = torch.where(has_previous, previous, parent).masked_fill(~real, -1)

    current = torch.arange(num_items, device=device).expand(batch_size, num_items).masked_fill(~real, -1)
    paths = []
    for _ in range(max_depth):
        on_path = current >= 0
        index = current.clamp(min=0)
        paths.append(step.gather(1, index).masked_fill(~on_path, -1))
        current = binary_parent.gather(1, index).masked_fill(~on_path, -1)
    paths = torch.stack(paths, dim=-1)
    return paths[:, :num_nodes], paths[:, num_nodes:]


def root_paths(*shape: int, max_depth: int, device=None) -> Tensor:
    """Empty paths (the root's position), ``(*shape, max_depth)`` long."""
    return torch.full((*shape, max_depth), -1, dtype=torch.long, device=device)


def push_child(paths: Tensor, child: Tensor | int) -> Tensor:
    """``D_i``: the path of child ``child`` (int, or long ``(...)``) of the positions ``paths``
    ``(..., k)``. The step goes on the front; a step past depth ``k`` falls off the end."""
    child = torch.as_tensor(child, dtype=paths.dtype, device=paths.device)
    child = child.expand(paths.shape[:-1]).unsqueeze(-1)
    return torch.cat([child, paths[..., :-1]], dim=-1)


def pop_child(paths: Tensor) -> Tensor:
    """``U``: the path of the parent of the positions ``paths`` ``(..., k)``. Exact inverse of
    :func:`push_child` for paths shorter than ``k``; the root stays the root."""
    return torch.cat([paths[..., 1:], torch.full_like(paths[..., :1], -1)], dim=-1)


def one_hot_stack(paths: Tensor, degree: int = DEGREE) -> Tensor:
    """The paper's ``x``: ``(..., k)`` paths -> ``(..., k, degree)`` float stack of one-hot child
    indices, zero rows past the root."""
    return F.one_hot(paths.clamp(min=0), degree).float() * (paths >= 0).unsqueeze(-1)


class TreePositionalEncoding(nn.Module):
    """The parameterised tree positional encoding: ``(..., k)`` paths -> ``(..., embed_dim)``.

    ``max_depth`` is ``k``; ``degree`` is ``n`` (2 for the LCRS paths of :func:`tree_paths`);
    ``num_weights`` is the number ``P`` of learned ``p``; ``scale`` one of :data:`SCALES`. The
    encoding before the projection is ``enc[..., p, l, i] = x[..., l, i] · w[p, l]`` with ``w`` of
    :meth:`depth_weights`.
    """

    def __init__(
        self,
        embed_dim: int,
        max_depth: int = 32,
        degree: int = DEGREE,
        num_weights: int | None = None,
        scale: str = "paper",
    ):
        super().__init__()
        if scale not in SCALES:
            raise ValueError(f"unknown tree positional encoding scale {scale!r}; one of {SCALES}")
        stack_dim = max_depth * degree
        self.embed_dim = embed_dim
        self.max_depth = max_depth
        self.degree = degree
        self.scale = scale
        self.num_weights = num_weights or max(1, embed_dim // stack_dim)
        self.theta = nn.Parameter(torch.empty(self.num_weights))  # p = tanh(θ)
        encoding_dim = self.num_weights * stack_dim
        self.projection = None
        if encoding_dim != embed_dim:
            self.projection = nn.Linear(encoding_dim, embed_dim, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.uniform_(self.theta, 0.7, 0.999)
        if self.projection is not None:
            nn.init.xavier_uniform_(self.projection.weight)

    def depth_weights(self) -> Tensor:
        """``w[p, l] = p^l · sqrt(1 - p²) · sqrt(d)/2`` (section 3.2), or with
        ``scale="authors_code"`` ``p^l · sqrt((1 - p²) · d/2)``; ``(P, k)``. Powers by cumulative
        product: the gradient of ``p ** 0`` at ``p = 0`` would be NaN."""
        p = torch.tanh(self.theta).unsqueeze(-1)  # (P, 1)
        powers = torch.cat([torch.ones_like(p), p.expand(-1, self.max_depth - 1).cumprod(dim=-1)], dim=-1)
        if self.scale == "paper":
            return powers * torch.sqrt(1 - p.square()) * (self.embed_dim ** 0.5 / 2)
        return powers * torch.sqrt((1 - p.square()) * self.embed_dim / 2)

    def forward(self, paths: Tensor) -> Tensor:
        """paths ``(..., k)`` long -> encodings ``(..., embed_dim)``; zero for empty paths."""
        if paths.size(-1) != self.max_depth:
            raise ValueError(f"paths have depth {paths.size(-1)}, the encoding {self.max_depth}")
        weights = self.depth_weights()  # (P, k)
        stack = one_hot_stack(paths, self.degree).to(weights.dtype)  # (..., k, n)
        encoding = (stack.unsqueeze(-3) * weights.unsqueeze(-1)).flatten(-3)  # (..., P·k·n)
        return self.projection(encoding) if self.projection is not None else encoding
