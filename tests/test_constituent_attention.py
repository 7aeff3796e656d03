"""Constituent attention (Wang et al., 2019): the neighbouring attention and the prior against
direct formulas (the neighbour score divided by d = d_model / 2 as the paper sets it), the
hierarchical constraint, padding and batch invariance, bf16 autocast, and Algorithm 1 (minimum
layer m = 3 by default) on hand-made link probabilities."""

import pytest
import torch

from tree_fairseq.modules.constituent_attention import (
    ConstituentAttention,
    ConstituentSelfAttention,
    constituent_prior,
    hierarchical_constraint,
    neighbouring_attention,
    unsupervised_parse,
)

DIM, HEADS = 16, 4
LENGTHS = (1, 2, 5, 9, 12)
LEFT_PAD = (False, True, False, True, True)


def padding_mask(lengths=LENGTHS, left_pad=LEFT_PAD) -> tuple[torch.Tensor, list[slice]]:
    """``(B, n)`` mask for sentences of ``lengths`` tokens, padded left or right, and the
    columns of each sentence."""
    width = max(lengths)
    mask = torch.ones(len(lengths), width, dtype=torch.bool)
    columns = []
    for b, (length, left) in enumerate(zip(lengths, left_pad)):
        start = width - length if left else 0
        mask[b, start : start + length] = False
        columns.append(slice(start, start + length))
    return mask, columns


def direct_prior(links: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``C_ij = Π_{k=i}^{j-1} a_k`` by a loop over k, ``C_ii = 1``, 0 on padded rows/columns."""
    batch_size, length = mask.shape
    prior = torch.zeros(batch_size, length, length, dtype=torch.float64)
    for b in range(batch_size):
        for i in range(length):
            for j in range(length):
                if mask[b, i] or mask[b, j]:
                    continue
                product = torch.tensor(1.0, dtype=torch.float64)
                for k in range(min(i, j), max(i, j)):
                    product = product * links[b, k].double()
                prior[b, i, j] = product
    return prior


def test_prior_matches_direct_product():
    torch.manual_seed(0)
    mask, _ = padding_mask()
    links = torch.rand(len(LENGTHS), mask.size(1) - 1)
    links[3, 4] = 0.0  # a hard break: log 0 must not give NaN
    links[4, 2] = 1.0
    prior = constituent_prior(links, mask)
    expected = direct_prior(links, mask)
    torch.testing.assert_close(prior.double(), expected, atol=1e-6, rtol=1e-5)
    assert torch.isfinite(prior).all()
    assert torch.equal(prior, prior.transpose(1, 2))
    real = ~mask
    assert torch.all(prior.diagonal(dim1=1, dim2=2)[real] == 1) and torch.all(prior[mask] == 0)
    # Across the hard break nothing is shared; the first sentence (one token) is its own constituent.
    columns = range(mask.size(1) - LENGTHS[3], mask.size(1))
    assert all(prior[3, i, j] == 0 for i in columns if i <= 4 for j in columns if j > 4)
    assert prior[0, 0, 0] == 1 and prior[0, 0, 1:].eq(0).all()


def test_prior_is_exact_for_strong_constituents_in_long_sentences():
    # Hundreds of weak links first make the prefix sum large; later links of 0.999 must still
    # give C close to 0.999^(j-i).
    length = 400
    links = torch.full((1, length - 1), 1e-3)
    links[0, 300:] = 0.999
    prior = constituent_prior(links, torch.zeros(1, length, dtype=torch.bool))
    span = torch.arange(1, 50, dtype=torch.float64)
    torch.testing.assert_close(prior[0, 300, 301:350].double(), 0.999**span, atol=0, rtol=1e-6)


def test_prior_gradient_is_finite_at_zero_and_one():
    links = torch.tensor([[0.0, 1.0, 0.5, 0.0]], requires_grad=True)
    constituent_prior(links, torch.zeros(1, 5, dtype=torch.bool)).sum().backward()
    assert torch.isfinite(links.grad).all()
    assert links.grad[0, 2] > 0  # C grows with every link inside it


def direct_links(queries, keys, mask, divisor=None):
    """The neighbouring attention as the paper prints it, token by token: eq. 5 with
    ``d = d_model / 2`` (section 5.1), eq. 6 over the real neighbours, eq. 7. ``divisor``
    replaces ``d``."""
    batch_size, length, dim = queries.shape
    links = torch.zeros(batch_size, length - 1)
    for b in range(batch_size):
        p = {}
        for i in range(length):
            if mask[b, i]:
                continue
            neighbours = [j for j in (i - 1, i + 1) if 0 <= j < length and not mask[b, j]]
            d = dim / 2 if divisor is None else divisor
            scores = torch.stack([queries[b, i] @ keys[b, j] / d for j in neighbours]) if neighbours else None
            for j, prob in zip(neighbours, scores.softmax(0) if neighbours else []):
                p[i, j] = prob
        for k in range(length - 1):
            if (k, k + 1) in p:
                links[b, k] = torch.sqrt(p[k, k + 1] * p[k + 1, k])
    return links


def test_neighbouring_attention_matches_direct_formula():
    torch.manual_seed(0)
    mask, _ = padding_mask()
    queries, keys = torch.randn(2, len(LENGTHS), mask.size(1), DIM).mul(3).unbind(0)
    links = neighbouring_attention(queries, keys, mask)
    torch.testing.assert_close(links, direct_links(queries, keys, mask), atol=1e-6, rtol=1e-5)
    touches_padding = mask[:, :-1] | mask[:, 1:]
    assert torch.all(links[touches_padding] == 0) and torch.all(links[~touches_padding] > 0)
    # Two tokens only: each has one neighbour, which it attends with probability 1.
    assert links[1, -1] == pytest.approx(1.0)


def test_neighbour_score_scale_is_half_d_model_by_default_and_d_model_as_an_option():
    torch.manual_seed(0)
    mask, _ = padding_mask()
    queries, keys = torch.randn(2, len(LENGTHS), mask.size(1), DIM).mul(3).unbind(0)
    half = direct_links(queries, keys, mask, divisor=DIM / 2)
    full = direct_links(queries, keys, mask, divisor=DIM)
    assert not torch.allclose(half, full, atol=1e-3)  # the two readings differ on these inputs
    torch.testing.assert_close(neighbouring_attention(queries, keys, mask, "half-d-model"), half, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(neighbouring_attention(queries, keys, mask, "d-model"), full, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="scale"):
        neighbouring_attention(queries, keys, mask, "sqrt")
    # The module: the same projections, both readings.
    x = torch.randn(len(LENGTHS), mask.size(1), DIM)
    module = ConstituentAttention(DIM)
    assert module.score_scale == "half-d-model"
    q, k = module.query(x).detach(), module.key(x).detach()
    torch.testing.assert_close(module(x, mask).links.detach(), direct_links(q, k, mask, DIM / 2), atol=1e-6, rtol=1e-5)
    module.score_scale = "d-model"
    torch.testing.assert_close(module(x, mask).links.detach(), direct_links(q, k, mask, DIM), atol=1e-6, rtol=1e-5)


def test_hierarchical_constraint_never_decreases_links():
    torch.manual_seed(0)
    mask, _ = padding_mask()
    layers = [ConstituentAttention(DIM) for _ in range(6)]
    x = torch.randn(len(LENGTHS), mask.size(1), DIM)
    previous = torch.zeros(len(LENGTHS), mask.size(1) - 1)
    links = None
    for layer in layers:
        x = x + torch.randn_like(x)  # a different input per layer, as between encoder layers
        links, prior = layer(x, mask, links)
        assert torch.all(links >= previous) and torch.all(links <= 1)
        assert torch.all(links[mask[:, :-1] | mask[:, 1:]] == 0)
        previous = links
    # The rule itself: a^l - a^{l-1} = (1 - a^{l-1}) · â^l >= 0, and a^0 = 0.
    old, new = torch.rand(2, 3, 7).unbind(0)
    torch.testing.assert_close(hierarchical_constraint(old, new), old + (1 - old) * new)
    assert torch.equal(hierarchical_constraint(None, new), new)


def stack(attention_layers, self_attention_layers, x, mask):
    links, outputs = None, []
    for constituent, self_attention in zip(attention_layers, self_attention_layers):
        links, prior = constituent(x, mask, links)
        out, weights = self_attention(x, prior, mask, need_weights=True)
        x = x + out
        outputs.append((links, prior, weights))
    return x, outputs


@pytest.mark.parametrize("renormalize", [False, True])
def test_batch_invariance_and_padding(renormalize):
    torch.manual_seed(0)
    attention_layers = [ConstituentAttention(DIM) for _ in range(2)]
    self_attention_layers = [ConstituentSelfAttention(DIM, HEADS, renormalize=renormalize).eval() for _ in range(2)]
    mask, columns = padding_mask()
    x = torch.randn(len(LENGTHS), mask.size(1), DIM)
    x[mask] = 1e4  # padding content must not leak anywhere
    out, layers = stack(attention_layers, self_attention_layers, x, mask)
    assert torch.isfinite(out).all()
    assert torch.all(out[mask] == 1e4)  # padded positions got zero updates
    for b, cols in enumerate(columns):
        alone_mask = torch.zeros(1, LENGTHS[b], dtype=torch.bool)
        alone_out, alone_layers = stack(attention_layers, self_attention_layers, x[b : b + 1, cols], alone_mask)
        torch.testing.assert_close(out[b : b + 1, cols], alone_out, atol=1e-5, rtol=1e-5)
        link_cols = slice(cols.start, cols.stop - 1)
        for (links, prior, weights), (alone_links, alone_prior, alone_weights) in zip(layers, alone_layers):
            torch.testing.assert_close(links[b : b + 1, link_cols], alone_links, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(prior[b : b + 1, cols, cols], alone_prior, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(weights[b : b + 1, :, cols, cols], alone_weights, atol=1e-5, rtol=1e-5)
    weights = layers[-1][2]  # (B, H, n, n)
    assert torch.all(weights[mask.unsqueeze(1).unsqueeze(-1).expand_as(weights)] == 0)
    row_sums = weights.sum(-1)[(~mask).unsqueeze(1).expand(-1, HEADS, -1)]
    if renormalize:
        torch.testing.assert_close(row_sums, torch.ones_like(row_sums))
    else:
        assert torch.all(row_sums <= 1 + 1e-6) and torch.all(row_sums > 0)


@pytest.mark.parametrize("renormalize", [False, True])
def test_prior_restricts_attention_to_constituents(renormalize):
    torch.manual_seed(0)
    attention = ConstituentSelfAttention(DIM, HEADS, renormalize=renormalize).eval()
    mask = torch.zeros(1, 6, dtype=torch.bool)
    links = torch.tensor([[1.0, 1.0, 0.0, 1.0, 1.0]])  # two hard constituents, tokens 0-2 and 3-5
    prior = constituent_prior(links, mask)
    x = torch.randn(1, 6, DIM)
    out, weights = attention(x, prior, mask, need_weights=True)
    assert torch.all(weights[..., :3, 3:] == 0) and torch.all(weights[..., 3:, :3] == 0)
    # Inside a hard constituent the prior is 1: E is the softmax there, cut off at the border.
    plain = torch.nn.functional.softmax(
        attention.q_proj(x).view(1, 6, HEADS, -1).transpose(1, 2)
        @ attention.k_proj(x).view(1, 6, HEADS, -1).permute(0, 2, 3, 1)
        * (DIM // HEADS) ** -0.5,
        dim=-1,
    )
    if renormalize:
        plain = plain[..., :3, :3] / plain[..., :3, :3].sum(-1, keepdim=True)
    torch.testing.assert_close(weights[..., :3, :3], plain[..., :3, :3])
    changed = x.clone()
    changed[0, 3:] += 1
    changed_out = attention(changed, prior, mask)[0][0, :3]
    if renormalize:  # the second constituent cannot reach the first at all
        torch.testing.assert_close(changed_out, out[0, :3])
    else:  # its keys still take their share of the softmax, which the prior then drops
        assert not torch.allclose(changed_out, out[0, :3])


def test_bf16_autocast_has_no_nan():
    torch.manual_seed(0)
    attention_layers = [ConstituentAttention(DIM) for _ in range(2)]
    self_attention_layers = [ConstituentSelfAttention(DIM, HEADS) for _ in range(2)]
    mask, _ = padding_mask()
    x = torch.randn(len(LENGTHS), mask.size(1), DIM, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, layers = stack(attention_layers, self_attention_layers, x, mask)
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(t).all() for layer in layers for t in layer)
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all()


def node_spans(tree) -> set[tuple[int, int]]:
    return {(node.start, node.end) for node in tree.nodes}


def test_parse_splits_at_the_weakest_link():
    tree = unsupervised_parse(torch.tensor([[0.9, 0.1, 0.95]]), leaves=["a", "b", "c", "d"], min_layer=0)
    assert tree.leaves == ("a", "b", "c", "d")
    assert node_spans(tree) == {(0, 3), (0, 1), (2, 3)}
    tree.check()
    assert tree.to_bracketed() == "(X (X a b) (X c d))"


def test_parse_without_a_weak_link_gives_a_flat_constituent():
    assert node_spans(unsupervised_parse(torch.tensor([[0.9, 0.85, 0.95, 0.81]]), min_layer=0)) == {(0, 4)}
    # The threshold is strict: a link of exactly 0.8 is split.
    assert node_spans(unsupervised_parse(torch.tensor([[0.9, 0.8, 0.95]]), min_layer=0)) == {(0, 3), (0, 1), (2, 3)}


def test_parse_descends_layers():
    links = torch.tensor(
        [
            [0.5, 0.2, 0.6, 0.1],  # layer 0
            [0.9, 0.95, 0.85, 0.9],  # layer 1: no link below the threshold
        ]
    )
    # Layer 1 cannot split, layer 0 splits at link 3, then at link 1.
    assert node_spans(unsupervised_parse(links, min_layer=0)) == {(0, 4), (0, 3), (0, 1), (2, 3)}
    # With minimum layer 1 the whole sentence stays one flat constituent.
    assert node_spans(unsupervised_parse(links, min_layer=1)) == {(0, 4)}
    # A lower threshold lets layer 1 split at its weakest link (link 2) and layer 0 the halves.
    assert node_spans(unsupervised_parse(links, min_layer=0, threshold=0.86)) == {(0, 4), (0, 2), (0, 1), (3, 4)}


def test_parse_goes_one_layer_down_after_a_split():
    links = torch.tensor(
        [
            [0.7, 0.2, 0.9, 0.9],  # layer 0
            [0.85, 0.95, 0.9, 0.9],  # layer 1
            [0.9, 0.9, 0.3, 0.9],  # layer 2: split the sentence at link 2
        ]
    )
    # The left half (tokens 0-2) is parsed from layer 1 (no weak link) and then layer 0 (link 1);
    # on layer 2 it would have been one flat constituent.
    assert node_spans(unsupervised_parse(links, min_layer=0)) == {(0, 4), (0, 2), (0, 1), (3, 4)}
    # Minimum layer 1: the left half stops at layer 1, flat.
    assert node_spans(unsupervised_parse(links, min_layer=1)) == {(0, 4), (0, 2), (3, 4)}
    # Minimum layer 2: every split uses layer 2; the left half's links (0.9, 0.9) exceed the threshold.
    assert node_spans(unsupervised_parse(links, min_layer=2)) == {(0, 4), (0, 2), (3, 4)}
    tree = unsupervised_parse(links, min_layer=2)
    tree.check()


def test_parse_of_tiny_sentences_and_bad_arguments():
    assert unsupervised_parse(torch.empty(4, 0)).nodes == ()  # one token
    assert node_spans(unsupervised_parse(torch.tensor([[0.99]]), min_layer=0)) == {(0, 1)}  # two tokens
    ties = torch.tensor([[0.3, 0.3, 0.9]])
    assert node_spans(unsupervised_parse(ties, min_layer=0)) == {(0, 3), (1, 3), (2, 3)}  # ties: the first
    with pytest.raises(ValueError, match="min_layer"):
        unsupervised_parse(torch.rand(2, 4), min_layer=2)
    with pytest.raises(ValueError, match="min_layer 3 is not one of the 3 layers"):  # the default m = 3
        unsupervised_parse(torch.rand(3, 4))
    with pytest.raises(ValueError, match="leaves"):
        unsupervised_parse(torch.rand(2, 4), leaves=["a", "b"], min_layer=0)


def algorithm_1(links, min_layer: int, threshold: float = 0.8):
    """Algorithm 1 as printed, recursively: BuildTree(l, s, e), from the top layer; a span is
    ``(s, e)``, a tree a pair of trees or a span."""

    def build_tree(layer, start, end):
        if end - start < 2:
            return (start, end)
        span = links[layer, start:end]
        split = start + int(torch.argmin(span))
        last = max(layer - 1, min_layer)
        if links[layer, split] > threshold:
            if layer == min_layer:
                return (start, end)
            return build_tree(last, start, end)
        return (build_tree(last, start, split), build_tree(last, split + 1, end))

    return build_tree(links.size(0) - 1, 0, links.size(1))


def printed_spans(tree) -> set[tuple[int, int]]:
    """The constituents of >= 2 tokens of Algorithm 1's nested output (a span ``(s, e)`` or a
    pair of trees)."""
    spans = set()

    def visit(node):
        if isinstance(node[0], int):
            if node[1] > node[0]:
                spans.add(node)
            return node
        (start, _), (_, end) = visit(node[0]), visit(node[1])
        spans.add((start, end))
        return start, end

    visit(tree)
    return spans


def test_default_minimum_layer_is_the_papers_m_3():
    links = torch.tensor(
        [
            [0.1, 0.9, 0.2, 0.9, 0.3, 0.9],  # layer 0: many weak links
            [0.5, 0.9, 0.5, 0.9, 0.5, 0.9],  # layer 1
            [0.85, 0.95, 0.6, 0.95, 0.85, 0.95],  # layer 2
            [0.85, 0.95, 0.7, 0.95, 0.85, 0.95],  # layer 3 = m: one weak link
            [0.9, 0.99, 0.9, 0.99, 0.9, 0.99],  # layer 4: none
        ]
    )
    default = node_spans(unsupervised_parse(links))
    # From layer 4 down to layer 3, which splits at link 2; the halves stay on layer 3, flat.
    assert default == {(0, 6), (0, 2), (3, 6)}
    assert default == node_spans(unsupervised_parse(links, min_layer=3)) == printed_spans(algorithm_1(links, 3))
    assert node_spans(unsupervised_parse(links, min_layer=0)) == printed_spans(algorithm_1(links, 0)) != default


def test_parse_matches_algorithm_1_as_printed_on_random_links():
    generator = torch.Generator().manual_seed(0)
    for trial in range(200):
        num_layers, num_tokens = 1 + trial % 6, 2 + trial % 11
        # increasing over layers, as the hierarchical constraint makes them
        links = torch.rand(num_layers, num_tokens - 1, generator=generator).sqrt().cummax(0).values
        for min_layer in range(num_layers):
            expected = printed_spans(algorithm_1(links, min_layer))
            assert node_spans(unsupervised_parse(links, min_layer=min_layer)) == expected, (links, min_layer)


def test_parse_of_a_trained_looking_model_is_a_valid_tree():
    torch.manual_seed(0)
    attention_layers = [ConstituentAttention(DIM) for _ in range(4)]
    x = torch.randn(1, 20, DIM)
    mask = torch.zeros(1, 20, dtype=torch.bool)
    links, per_layer = None, []
    for layer in attention_layers:
        links, _ = layer(x, mask, links)
        per_layer.append(links[0])
    tree = unsupervised_parse(torch.stack(per_layer), min_layer=1)
    tree.check()
    assert (0, 19) in node_spans(tree) and len(tree.nodes) >= 2


@pytest.mark.parametrize("renormalize", [False, True])
def test_inference_without_autograd_gives_the_training_path_outputs(renormalize):
    """Without autograd the prior and the attention are computed in place and head by head (so
    that inference memory grows as the transformer's): the same numbers as the autograd path."""
    torch.manual_seed(0)
    constituents = ConstituentAttention(DIM).eval()
    attention = ConstituentSelfAttention(DIM, HEADS, renormalize=renormalize).eval()
    mask, _ = padding_mask()
    x = torch.randn(len(LENGTHS), mask.size(1), DIM)
    with torch.no_grad():
        links, prior = constituents(x, mask)
        out, weights = attention(x, prior, mask)
    assert weights is None
    with torch.enable_grad():
        grad_links, grad_prior = constituents(x.clone().requires_grad_(), mask)
        grad_out, _ = attention(x.clone().requires_grad_(), grad_prior, mask)
    assert grad_prior.requires_grad and grad_out.requires_grad  # the other path was taken
    torch.testing.assert_close(links, grad_links.detach(), atol=0, rtol=0)
    torch.testing.assert_close(prior, grad_prior.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(out, grad_out.detach(), atol=1e-6, rtol=1e-6)
    assert torch.all(out[mask] == 0)


def test_prior_without_autograd_is_exact_on_hard_breaks_and_strong_links():
    mask, _ = padding_mask()
    links = torch.rand(len(LENGTHS), mask.size(1) - 1, generator=torch.Generator().manual_seed(3))
    links[3, 4], links[4, 2], links[4, 5] = 0.0, 1.0, 1.0 - 1e-7
    with torch.no_grad():
        lean = constituent_prior(links, mask)
    reference = constituent_prior(links.clone().requires_grad_(), mask).detach()
    assert torch.equal(lean, reference)
