"""Tree positional encodings (Shiv & Quirk 2019): the LCRS paths of a batch against paths built
step by step from the root with the paper's D_i on one-hot stacks, the algebra of push and pop,
the depth weighting and scale as printed, the norm against fairseq's sinusoidal encoding, padding,
batch invariance and bf16 autocast."""

import math

import pytest
import torch
from fairseq.modules import SinusoidalPositionalEmbedding
from helpers import pad_batch, random_tree_batch

from tree_fairseq.modules.tree_geometry import tree_parents
from tree_fairseq.modules.tree_positional_encoding import (
    FIRST_CHILD,
    NEXT_SIBLING,
    TreePositionalEncoding,
    one_hot_stack,
    pop_child,
    push_child,
    root_paths,
    tree_paths,
)


def random_trees(seed: int, word_counts=(1, 3, 7, 12, 16), left_pad=(False, True, False, True, True)):
    """A padded batch of random trees with 2 to 6 children per node, flat nodes included:
    ``trees, spans, leaf_padding_mask, node_padding_mask, offsets`` (see ``pad_batch``)."""
    return random_tree_batch(seed, word_counts, left_pad, max_children=6)


def sibling_groups(num_words: int, spans: list[tuple[int, int]]) -> dict:
    """``{parent: [children left to right]}`` of one sentence, by plain Python: items are
    ``("node", i)`` and ``("leaf", j)``, EOS is ``("leaf", num_words)``, the top level is ``None``."""
    items = [("node", i) for i in range(len(spans))] + [("leaf", j) for j in range(num_words + 1)]

    def span(item):
        return spans[item[1]] if item[0] == "node" else (item[1], item[1])

    groups = {}
    for item in items:
        s, e = span(item)
        around = [i for i, (ps, pe) in enumerate(spans) if ps <= s and e <= pe and ("node", i) != item]
        parent = ("node", min(around, key=lambda i: spans[i][1] - spans[i][0])) if around else None
        groups.setdefault(parent, []).append(item)
    return {parent: sorted(children, key=lambda item: span(item)[0]) for parent, children in groups.items()}


def down(stack: torch.Tensor, child: int, degree: int) -> torch.Tensor:
    """The paper's ``D_i`` on a flat one-hot stack ``x`` of size ``k·n``: ``[e_i ; x[:-n]]``."""
    return torch.cat([torch.nn.functional.one_hot(torch.tensor(child), degree).float(), stack[:-degree]])


def up(stack: torch.Tensor, degree: int) -> torch.Tensor:
    """The paper's ``U``: ``[x[n:] ; 0]``."""
    return torch.cat([stack[degree:], torch.zeros(degree)])


def stacks_step_by_step(num_words: int, spans: list[tuple[int, int]], max_depth: int) -> dict:
    """The flat one-hot stack of every item, walking down from the root with ``D_i`` in the LCRS
    binarisation: a first child is ``D_0`` of its parent, a later one ``D_1`` of its previous
    sibling; the top level (root, EOS) is a sibling list under no parent."""
    groups = sibling_groups(num_words, spans)
    stacks = {}

    def visit(parent, parent_stack):
        previous = None
        for child in groups.get(parent, []):
            if previous is None:
                stack = parent_stack if parent is None else down(parent_stack, FIRST_CHILD, 2)
            else:
                stack = down(stacks[previous], NEXT_SIBLING, 2)
            stacks[child] = stack
            visit(child, stack)
            previous = child

    visit(None, torch.zeros(max_depth * 2))
    return stacks


def encode_stack(encoding: TreePositionalEncoding, stack: torch.Tensor) -> torch.Tensor:
    """The parameterised encoding of one flat stack: block ``l`` of every ``p`` times ``w[p, l]``."""
    weights = encoding.depth_weights()  # (P, k)
    weighted = (stack.view(1, encoding.max_depth, encoding.degree) * weights.unsqueeze(-1)).flatten()
    return encoding.projection(weighted) if encoding.projection is not None else weighted


def hand_made_batch():
    """(ROOT w0 (X w1 w2) w3) EOS, left-padded by two leaves, plus one padded node."""
    spans = torch.tensor([[[3, 4], [2, 5], [-1, -1]]])
    leaf_padding_mask = torch.tensor([[True, True] + [False] * 5])
    node_padding_mask = torch.tensor([[False, False, True]])
    return spans, leaf_padding_mask, node_padding_mask


def test_parents_and_paths_of_hand_made_tree():
    batch = hand_made_batch()
    # Items [X, ROOT, pad | pad, pad, w0, w1, w2, w3, EOS].
    assert tree_parents(*batch)[0].tolist() == [1, -1, -1, -1, -1, 1, 0, 0, 1, -1]
    node_paths, leaf_paths = tree_paths(*batch, max_depth=5)
    empty = [-1] * 5
    # X is w0's next sibling: [NEXT_SIBLING, FIRST_CHILD]; w2 is w1's next sibling; and so on.
    assert node_paths[0].tolist() == [[1, 0, -1, -1, -1], empty, empty]
    assert leaf_paths[0].tolist() == [
        empty,
        empty,
        [0, -1, -1, -1, -1],  # w0: first child of ROOT
        [0, 1, 0, -1, -1],  # w1: first child of X
        [1, 0, 1, 0, -1],  # w2
        [1, 1, 0, -1, -1],  # w3: next sibling of X
        [1, -1, -1, -1, -1],  # EOS: next sibling of ROOT
    ]
    # Truncated to k = 2, the most recent steps stay.
    assert tree_paths(*batch, max_depth=2)[1][0, 4].tolist() == [1, 0]


@pytest.mark.parametrize("max_depth", [3, 24])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_encodings_equal_step_by_step_from_the_root(seed, max_depth):
    torch.manual_seed(seed)
    trees, spans, leaf_padding_mask, node_padding_mask, offsets = random_trees(seed)
    node_paths, leaf_paths = tree_paths(spans, leaf_padding_mask, node_padding_mask, max_depth)
    encoding = TreePositionalEncoding(24, max_depth=max_depth, num_weights=3)  # projected: 3·k·2 ≠ 24
    node_encodings, leaf_encodings = encoding(node_paths), encoding(leaf_paths)
    for b, (words, sentence_spans) in enumerate(trees):
        stacks = stacks_step_by_step(words, sentence_spans, max_depth)
        assert len(stacks) == len(sentence_spans) + words + 1
        for (kind, index), stack in stacks.items():
            if kind == "node":
                path, encoded = node_paths[b, index], node_encodings[b, index]
            else:
                path, encoded = leaf_paths[b, index + offsets[b]], leaf_encodings[b, index + offsets[b]]
            assert torch.equal(one_hot_stack(path).flatten(), stack)
            torch.testing.assert_close(encoded, encode_stack(encoding, stack), atol=1e-6, rtol=1e-6)


def test_every_position_is_unique_below_the_truncation():
    trees, spans, leaf_padding_mask, node_padding_mask, _ = random_trees(5, word_counts=(20, 9))
    node_paths, leaf_paths = tree_paths(spans, leaf_padding_mask, node_padding_mask, max_depth=64)
    encoding = TreePositionalEncoding(32, max_depth=64)
    for b, (words, sentence_spans) in enumerate(trees):
        real = torch.cat([node_paths[b, : len(sentence_spans)], leaf_paths[b][~leaf_padding_mask[b]]])
        assert real.size(0) == len(sentence_spans) + words + 1
        assert len({tuple(path) for path in real.tolist()}) == real.size(0)
        vectors = encoding(real)
        assert torch.cdist(vectors, vectors).add(torch.eye(len(vectors))).min() > 1e-3


def random_paths(count: int, max_depth: int, degree: int, generator: torch.Generator, full: bool = False):
    """``count`` random paths of depth < max_depth (or exactly max_depth when ``full``)."""
    depth = (
        torch.full((count,), max_depth)
        if full
        else torch.randint(0, max_depth, (count,), generator=generator)
    )
    steps = torch.randint(0, degree, (count, max_depth), generator=generator)
    return steps.masked_fill(torch.arange(max_depth) >= depth.unsqueeze(1), -1)


@pytest.mark.parametrize("degree", [2, 5])
def test_down_to_a_child_then_up_returns_the_parent(degree):
    generator = torch.Generator().manual_seed(0)
    max_depth = 6
    encoding = TreePositionalEncoding(20, max_depth=max_depth, degree=degree, num_weights=2)
    paths = random_paths(200, max_depth, degree, generator)
    children = torch.randint(0, degree, (200,), generator=generator)
    assert torch.equal(pop_child(push_child(paths, children)), paths)
    torch.testing.assert_close(encoding(pop_child(push_child(paths, children))), encoding(paths))
    # push and pop are the paper's D_i and U on the one-hot stacks.
    for path, child in zip(paths[:20], children[:20].tolist()):
        stack = one_hot_stack(path, degree).flatten()
        pushed = one_hot_stack(push_child(path, child), degree).flatten()
        assert torch.equal(pushed, down(stack, child, degree))
        assert torch.equal(one_hot_stack(pop_child(path), degree).flatten(), up(stack, degree))
    # At depth k the oldest step falls off: up after down is no longer the identity.
    full = random_paths(50, max_depth, degree, generator, full=True)
    back = pop_child(push_child(full, 0))
    assert torch.equal(back[:, :-1], full[:, :-1]) and torch.all(back[:, -1] == -1)
    # The root stays the root; a step below the root is the one-hot of the child alone.
    root = root_paths(3, max_depth=max_depth)
    assert torch.equal(pop_child(root), root)
    assert push_child(root, 1)[:, 0].tolist() == [1, 1, 1] and torch.all(push_child(root, 1)[:, 1:] == -1)


def test_down_and_up_are_affine_on_the_weighted_encoding():
    """Unprojected, enc(D_i x) = [w_0 e_i ; p · enc(x)[:-n]] and enc(U x) = [enc(x)[n:] / p ; 0]
    per learned p: moving in the tree is an affine map of the encoding, as the paper requires."""
    generator = torch.Generator().manual_seed(1)
    max_depth, degree, num_weights = 5, 3, 4
    encoding = TreePositionalEncoding(max_depth * degree * num_weights, max_depth=max_depth, degree=degree)
    assert encoding.projection is None and encoding.num_weights == num_weights
    p = torch.tanh(encoding.theta).view(num_weights, 1, 1)
    w0 = encoding.depth_weights()[:, 0].view(num_weights, 1, 1)
    paths = random_paths(100, max_depth, degree, generator)
    children = torch.randint(0, degree, (100,), generator=generator)
    enc = encoding(paths).view(100, num_weights, max_depth, degree)
    pushed = encoding(push_child(paths, children)).view(100, num_weights, max_depth, degree)
    e_i = torch.nn.functional.one_hot(children, degree).float().view(100, 1, 1, degree)
    torch.testing.assert_close(pushed[:, :, :1], w0 * e_i.expand(-1, num_weights, -1, -1))
    torch.testing.assert_close(pushed[:, :, 1:], p * enc[:, :, :-1])
    popped = encoding(pop_child(paths)).view(100, num_weights, max_depth, degree)
    torch.testing.assert_close(popped[:, :, :-1], enc[:, :, 1:] / p)
    assert torch.all(popped[:, :, -1] == 0)


def test_depth_weights_as_printed():
    """Section 3.2, written literally: the one-hot chunk of stack position l weighted by p^l,
    p = tanh(θ), times sqrt(1 - p²), times sqrt(d_model) / 2; the authors' code's reading has
    sqrt((1 - p²) · d_model / 2)."""
    d_model, k = 64, 8
    encoding = TreePositionalEncoding(d_model, max_depth=k, degree=2, num_weights=4)
    authors = TreePositionalEncoding(d_model, max_depth=k, degree=2, num_weights=4, scale="authors_code")
    authors.load_state_dict(encoding.state_dict())
    assert encoding.scale == "paper"
    weights, authors_weights = encoding.depth_weights(), authors.depth_weights()
    for j, theta in enumerate(encoding.theta.tolist()):
        p = math.tanh(theta)
        for l in range(k):
            paper = p**l * math.sqrt(1 - p * p) * math.sqrt(d_model) / 2
            assert weights[j, l].item() == pytest.approx(paper, rel=1e-5)
            assert authors_weights[j, l].item() == pytest.approx(p**l * math.sqrt((1 - p * p) * d_model / 2), rel=1e-5)
    with pytest.raises(ValueError):
        TreePositionalEncoding(d_model, scale="sqrt_d")


@pytest.mark.parametrize("scale, per_p", [("paper", 64 / 4), ("authors_code", 64 / 2)])
def test_norms_against_fairseqs_sinusoidal_encoding(scale, per_p):
    """A position L steps deep has, per p, the squared norm c² (1 - p^{2L}), c² = d/4 (paper)
    or d/2 (authors' code), zero at the root; fairseq's sinusoidal embedding of the same d has
    the squared norm d/2 at every position: per p, at most half of it (paper) or all of it."""
    d_model, k = 64, 8
    encoding = TreePositionalEncoding(d_model, max_depth=k, degree=2, num_weights=4, scale=scale)
    p = torch.tanh(encoding.theta).detach()
    generator = torch.Generator().manual_seed(0)
    for depth in range(k + 1):
        paths = random_paths(10, k, 2, generator, full=True).masked_fill(torch.arange(k) >= depth, -1)
        with torch.no_grad():
            squared = encoding(paths).view(10, 4, 2 * k).square().sum(-1)  # (10, P)
        torch.testing.assert_close(squared, (per_p * (1 - p ** (2 * depth))).expand(10, 4))
    sinusoidal = SinusoidalPositionalEmbedding(d_model, padding_idx=0, init_size=50)
    positions = sinusoidal(torch.ones(1, 40, dtype=torch.long)).squeeze(0)  # positions 1 .. 40
    torch.testing.assert_close(positions.square().sum(-1), torch.full((40,), d_model / 2))
    assert per_p == d_model / (4 if scale == "paper" else 2)
    # The root and padding (empty paths) encode as zero.
    assert torch.all(encoding(root_paths(2, max_depth=k)) == 0)


def test_gradients_reach_theta_and_projection_even_at_p_zero():
    encoding = TreePositionalEncoding(10, max_depth=4, num_weights=2)
    with torch.no_grad():
        encoding.theta[0] = 0.0  # p = 0: 0 ** 0 has a NaN gradient, the cumulative product has not
    paths = random_paths(30, 4, 2, torch.Generator().manual_seed(2))
    encoding(paths).square().sum().backward()
    assert torch.isfinite(encoding.theta.grad).all() and encoding.theta.grad.abs().sum() > 0
    assert encoding.projection.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("seed", [0, 3])
def test_paths_and_encodings_are_batch_invariant(seed):
    trees, spans, leaf_padding_mask, node_padding_mask, offsets = random_trees(seed)
    encoding = TreePositionalEncoding(16, max_depth=12)
    node_paths, leaf_paths = tree_paths(spans, leaf_padding_mask, node_padding_mask, 12)
    for b, (words, sentence_spans) in enumerate(trees):
        for left in (False, True):
            alone_spans, alone_leaf_mask, alone_node_mask, _ = pad_batch([(words, sentence_spans)], [left])
            alone_nodes, alone_leaves = tree_paths(alone_spans, alone_leaf_mask, alone_node_mask, 12)
            columns = slice(offsets[b], offsets[b] + words + 1)
            assert torch.equal(alone_nodes[0], node_paths[b, : len(sentence_spans)])
            assert torch.equal(alone_leaves[0], leaf_paths[b, columns])
            difference = encoding(alone_leaves[0]) - encoding(leaf_paths[b, columns])
            assert difference.abs().max() <= 1e-5
        # Padding has the empty path.
        assert torch.all(node_paths[b, len(sentence_spans) :] == -1)
        assert torch.all(leaf_paths[b][leaf_padding_mask[b]] == -1)


def test_batch_without_nodes():
    leaf_padding_mask = torch.tensor([[False, False], [True, False]])  # a word + EOS; EOS alone
    node_paths, leaf_paths = tree_paths(
        torch.empty(2, 0, 2, dtype=torch.long), leaf_padding_mask, torch.empty(2, 0, dtype=torch.bool), 3
    )
    assert node_paths.shape == (2, 0, 3)
    assert leaf_paths.tolist() == [[[-1, -1, -1], [1, -1, -1]], [[-1, -1, -1], [-1, -1, -1]]]


def test_bf16_autocast_and_padding():
    _, spans, leaf_padding_mask, node_padding_mask, _ = random_trees(4)
    node_paths, leaf_paths = tree_paths(spans, leaf_padding_mask, node_padding_mask, 8)
    encoding = TreePositionalEncoding(24, max_depth=8)  # 1·8·2 = 16 ≠ 24: projected
    paths = torch.cat([node_paths, leaf_paths], 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = encoding(paths)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    # Padding and the roots have empty paths and a zero encoding; every other position is nonzero.
    padding = torch.cat([node_padding_mask, leaf_padding_mask], 1)
    empty = paths[..., 0] < 0
    assert torch.all(empty[padding]) and int(empty[~padding].sum()) == len(padding)  # one root each
    assert torch.all(out[empty] == 0) and torch.all(out[~empty].abs().sum(-1) > 0)
    with pytest.raises(ValueError):
        encoding(node_paths[..., :4])
