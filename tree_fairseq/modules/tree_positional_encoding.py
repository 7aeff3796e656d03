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
``x``; :func:`push_child` and :func:`pop_child` are ``D_i`` and ``U`` on them. The paths of a
batch of trees (:func:`tree_paths`) and of the slots of a tree being generated
(:func:`sequence_slot_paths`) are both read by :func:`walk_up` from each item's LCRS step and link.

Generating a tree. A target tree is a sequence of symbols, each announcing its number of children,
in depth-first or breadth-first order. The partial tree after some symbols is a list of *frames*,
one per node with children still to come: the path of its next open slot and how many slots it
has left (:class:`PartialTrees`). A symbol fills the slot of the newest frame (depth first) or the
oldest (breadth first), which moves on to its next sibling and closes after its last; a node with
``k`` children opens a frame at its first child (:func:`add_symbols`). Once no slot is open, the
next position is the root's right sibling, EOS's (:func:`next_slot_paths`). Each step is ``O(1)``
tensor operations for a whole beam; :func:`sequence_slot_paths` gives the same paths for whole
sequences at once, for training.

Batch layout (the data layer's): leaves ``(B, n)`` with EOS last, left- or right-padded; node
spans ``(B, m, 2)`` inclusive absolute leaf columns, bottom-up, right-padded with ``(-1, -1)``;
masks True at padding.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tree_fairseq.modules.tree_geometry import tree_items, tree_parents

FIRST_CHILD = 0
NEXT_SIBLING = 1
DEGREE = 2  # of the LCRS binarisation
SCALES = ("paper", "authors_code")


def tree_paths(
    spans: Tensor, leaf_padding_mask: Tensor, node_padding_mask: Tensor, max_depth: int
) -> tuple[Tensor, Tensor]:
    """LCRS paths from the root of every node and leaf of a batch, computed once per batch.

    Returns ``node_paths (B, m, k)`` and ``leaf_paths (B, n, k)``, long: ``FIRST_CHILD`` /
    ``NEXT_SIBLING`` steps, the most recent first, truncated to ``k = max_depth``, ``-1`` past
    the root. The root's path is empty (all ``-1``), EOS's is ``[NEXT_SIBLING]``, padding's empty.

    In the LCRS tree an item's parent is its previous sibling (step ``NEXT_SIBLING``) or, for a
    first child, its parent (step ``FIRST_CHILD``). Top-level items (root, EOS) are siblings of
    one another. The path is then read by following these parents ``k`` times (:func:`walk_up`).
    """
    num_nodes = spans.size(1)
    batch_size, num_leaves = leaf_padding_mask.shape
    device = spans.device
    start, end, real = tree_items(spans, leaf_padding_mask, node_padding_mask)
    parent = tree_parents(spans, leaf_padding_mask, node_padding_mask)  # (B, I)

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

    paths = walk_up(step, binary_parent, max_depth, real)
    return paths[:, :num_nodes], paths[:, num_nodes:]


def walk_up(step: Tensor, link: Tensor, max_depth: int, real: Tensor | None = None) -> Tensor:
    """The paths of the items of an LCRS-binarised tree, read by following each item's link up
    ``k = max_depth`` times, each time one gather over the whole batch.

    step: ``(B, I)`` long, the step (``FIRST_CHILD`` / ``NEXT_SIBLING``) from an item's link down
    to the item, ``-1`` for a root; link: ``(B, I)`` long, the item it is reached from (its
    binary parent), ``-1`` for a root; real: ``(B, I)`` bool, False for items whose path is empty
    (padding), or None for all real. Returns ``(B, I, k)`` long paths, the most recent step
    first, ``-1`` past the root.
    """
    batch_size, num_items = step.shape
    current = torch.arange(num_items, device=step.device).expand(batch_size, num_items)
    if real is not None:
        current = current.masked_fill(~real, -1)
    paths = []
    for _ in range(max_depth):
        on_path = current >= 0
        index = current.clamp(min=0)
        paths.append(step.gather(1, index).masked_fill(~on_path, -1))
        current = link.gather(1, index).masked_fill(~on_path, -1)
    return torch.stack(paths, dim=-1)


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


# Generating a tree: the positions of the slots of a partial tree


class PartialTrees(NamedTuple):
    """A batch of partial trees, as the frames of their nodes with children still to come (see
    "Generating a tree" in the module docstring). Frames ``first .. end - 1`` of each row are
    live."""

    paths: Tensor  # (B, F, k) long: the path of each frame's next open slot
    remaining: Tensor  # (B, F) long: open slots left in each frame
    first: Tensor  # (B,) long
    end: Tensor  # (B,) long

    @classmethod
    def empty(cls, batch_size: int, max_depth: int, device=None) -> "PartialTrees":
        """No symbol yet: one frame with one slot, the root."""
        zeros = torch.zeros(batch_size, dtype=torch.long, device=device)
        return cls(root_paths(batch_size, 1, max_depth=max_depth, device=device),
                   torch.ones(batch_size, 1, dtype=torch.long, device=device), zeros, zeros + 1)

    def index_select(self, order: Tensor) -> "PartialTrees":
        return PartialTrees(*(x.index_select(0, order) for x in self))


def current_frame(trees: PartialTrees, breadth_first: bool) -> Tensor:
    """``(B,)``: the frame whose slot the next symbol fills (a valid index even where no frame is
    live, i.e. the tree is complete)."""
    frame = trees.first if breadth_first else trees.end - 1
    return frame.clamp(min=0, max=trees.paths.size(1) - 1)


def next_slot_paths(trees: PartialTrees, breadth_first: bool) -> Tensor:
    """``(B, k)``: the path of the slot the next symbol fills; once the tree is complete (no live
    frame), the root's right sibling, EOS's position."""
    rows = torch.arange(trees.paths.size(0), device=trees.paths.device)
    slot = trees.paths[rows, current_frame(trees, breadth_first)]
    after_root = push_child(torch.full_like(slot, -1), NEXT_SIBLING)
    return torch.where((trees.first < trees.end).unsqueeze(-1), slot, after_root)


def add_symbols(trees: PartialTrees, arity: Tensor, breadth_first: bool) -> PartialTrees:
    """The partial trees after one more symbol per row, of ``arity`` ``(B,)`` children; rows
    with ``arity < 0`` (BOS, EOS, padding) or with a complete tree are unchanged."""
    paths, remaining, first, end = trees
    rows = torch.arange(paths.size(0), device=paths.device)
    filled = (arity >= 0) & (first < end)
    frame = current_frame(trees, breadth_first)
    slot = paths[rows, frame]  # (B, k): the path of the symbol added
    left = remaining[rows, frame] - 1
    paths, remaining = paths.clone(), remaining.clone()
    paths[rows, frame] = torch.where(filled.unsqueeze(-1), push_child(slot, NEXT_SIBLING), slot)
    remaining[rows, frame] = torch.where(filled, left, remaining[rows, frame])
    closed = (filled & (left == 0)).long()
    first, end = (first + closed, end) if breadth_first else (first, end - closed)

    opens = filled & (arity > 0)
    if bool((end >= paths.size(1)).any()):  # room for one more frame per row
        paths = torch.cat([paths, torch.full_like(paths, -1)], dim=1)
        remaining = torch.cat([remaining, torch.zeros_like(remaining)], dim=1)
    paths[rows, end] = torch.where(opens.unsqueeze(-1), push_child(slot, FIRST_CHILD), paths[rows, end])
    remaining[rows, end] = torch.where(opens, arity, remaining[rows, end])
    return PartialTrees(paths, remaining, first, end + opens.long())


def sequence_slot_paths(arity: Tensor, breadth_first: bool, max_depth: int) -> Tensor:
    """What :func:`add_symbols` and :func:`next_slot_paths` give step by step, for whole
    sequences at once: arity ``(B, T)`` (``-1`` for BOS, EOS, padding) -> the path ``(B, T, k)``
    of the slot the next symbol fills after each step. For training, where the whole target is
    known: ``O(k)`` gathers and ``(B, T + 1, T)`` masks instead of ``T`` sequential steps.

    Query ``i`` is the state after the first ``i`` tokens (``i = 0``: the root slot). A symbol
    is *live* if it comes before the tree is complete; ``open[i]`` counts the open slots. The
    slot of query ``i`` was opened by the latest live node ``j < i`` whose slots include it:
    depth first, node ``j`` pushes its ``a_j`` slots on a stack of ``open[j] − 1``, so slot
    ``open[i]`` (counting from the bottom) is node ``j``'s child ``open[j] + a_j − 1 − open[i]``;
    breadth first, slots are filled in the order they are opened, node ``j`` opening numbers
    ``S_j .. S_j + a_j − 1`` with ``S_j = 1 + Σ_{i<j} a_i``, and query ``i`` fills slot number
    (live symbols before ``i``). A first child is ``FIRST_CHILD`` below its node's slot, a later
    child ``NEXT_SIBLING`` after its previous sibling's (the latest live symbol of the same node);
    the path is then read by :func:`walk_up`, as :func:`tree_paths` reads its own.
    """
    batch_size, length = arity.shape
    device = arity.device
    delta = torch.where(arity >= 0, arity - 1, 0)
    open_after = 1 + delta.cumsum(-1)  # exact until the tree is complete
    done_after = ((open_after == 0) & (arity >= 0)).long().cummax(-1).values.bool()
    done_before = torch.cat([done_after.new_zeros(batch_size, 1), done_after[:, :-1]], dim=1)
    live = (arity >= 0) & ~done_before  # (B, T)
    open_before = open_after - delta
    # per query i = 0 .. T: open slots, and whether the tree is complete
    open_slots = torch.cat([open_before[:, :1], open_after.masked_fill(done_after, 0)], dim=1)  # (B, Q)
    complete = torch.cat([done_before[:, :1], done_after], dim=1)

    node = live & (arity > 0)  # (B, T) symbols that open slots
    earlier = torch.ones(length + 1, length, dtype=torch.bool, device=device).tril(-1)  # [i, j]: j < i
    if breadth_first:
        filled = torch.cat([live.new_zeros(batch_size, 1), live], dim=1).long().cumsum(-1)  # (B, Q) slot numbers
        first_slot = 1 + torch.cat([arity.new_zeros(batch_size, 1), (arity.clamp(min=0) * live).cumsum(-1)[:, :-1]],
                                   dim=1)  # (B, T): S_j
        opened_by = ((first_slot.unsqueeze(1) <= filled.unsqueeze(2))
                     & (filled.unsqueeze(2) < (first_slot + arity).unsqueeze(1)))  # (B, Q, T)
        child_index = filled.unsqueeze(2) - first_slot.unsqueeze(1)
    else:
        opened_by = ((open_before.unsqueeze(1) <= open_slots.unsqueeze(2))
                     & (open_slots.unsqueeze(2) <= (open_before + arity - 1).unsqueeze(1)))
        child_index = (open_before + arity - 1).unsqueeze(1) - open_slots.unsqueeze(2)
    opened_by = opened_by & node.unsqueeze(1) & earlier & ~complete.unsqueeze(2)
    column = torch.arange(length, device=device)
    parent = torch.where(opened_by, column, -1).amax(-1)  # (B, Q): the node j, -1 for the root slot or done
    index = child_index.gather(2, parent.clamp(min=0).unsqueeze(2)).squeeze(2)
    # the previous sibling: the latest live symbol before i whose own slot (query t) has the same node
    sibling_of = (parent[:, :-1].unsqueeze(1) == parent.unsqueeze(2)) & live.unsqueeze(1) & earlier  # (B, Q, T)
    previous = torch.where(sibling_of, column, -1).amax(-1)

    has_parent = parent >= 0
    step = torch.full_like(parent, -1)
    step[has_parent & (index == 0)] = FIRST_CHILD
    step[has_parent & (index > 0)] = NEXT_SIBLING
    step[complete] = NEXT_SIBLING  # EOS: the root's right sibling
    # links to queries: symbol t's slot is query t
    link = torch.where(index == 0, parent, previous).masked_fill(~has_parent, -1).masked_fill(complete, 0)
    return walk_up(step, link, max_depth)[:, 1:]


def sequence_symbol_paths(arity: Tensor, breadth_first: bool, max_depth: int) -> Tensor:
    """The position of the symbol each input holds (the paper's section 4), for whole sequences:
    arity ``(B, T)`` (``-1`` for BOS, EOS, padding) -> ``(B, T, k)``. A symbol sits at the slot
    the partial tree before it had open (:func:`sequence_slot_paths` one step earlier, the root
    slot first); BOS, EOS and padding at the empty path, whose encoding is zero."""
    slots = sequence_slot_paths(arity, breadth_first, max_depth)  # (B, T, k): after each input
    before = torch.cat([root_paths(arity.size(0), 1, max_depth=max_depth, device=arity.device),
                        slots[:, :-1]], dim=1)
    return before.masked_fill((arity < 0).unsqueeze(-1), -1)


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
