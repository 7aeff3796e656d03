"""Subtree masking and the tree self-/cross-attention modules: mask semantics, padding, batch
invariance, bf16 autocast and the cross-attention cache."""

import pytest
import torch
from test_hierarchical_accumulation import hand_made_batch, naive_accumulation, random_batch

from tree_fairseq.modules.hierarchical_accumulation import HierarchicalEmbedding, build_tree_structure
from tree_fairseq.modules.tree_attention import (
    TreeCrossAttention,
    TreeSelfAttention,
    key_padding_mask,
    subtree_mask,
    tree_attention_mask,
)

DIM, HEADS = 16, 4


def test_subtree_mask_of_hand_made_tree():
    # (ROOT (NP w0 w1) (VP w2 (NP w3 w4))) EOS; keys: 4 nodes, padded node | padded leaf, w0-w4, EOS.
    structure = build_tree_structure(*hand_made_batch())
    node_query = [
        "10000" "0110000",  # NP(w0 w1)
        "01000" "0000110",  # NP(w3 w4)
        "01100" "0001110",  # VP
        "11110" "0111110",  # ROOT: the whole tree, not EOS
        "00000" "0000000",  # padded node: nothing
    ]
    leaf_query = ["00000" "0111111"] * 7  # every leaf query, padded or not: the real leaves
    visible = torch.tensor([[c == "1" for c in row] for row in node_query + leaf_query])
    assert torch.equal(subtree_mask(structure)[0], ~visible)
    assert key_padding_mask(structure)[0].tolist() == [False] * 4 + [True, True] + [False] * 6


@pytest.mark.parametrize("subtree_masking", [True, False])
def test_tree_attention_mask(subtree_masking):
    structure = build_tree_structure(*hand_made_batch())
    mask = tree_attention_mask(structure, subtree_masking)
    blocked = subtree_mask(structure) if subtree_masking else key_padding_mask(structure).unsqueeze(1)
    assert mask.dtype == torch.float32 and mask.shape == (blocked.size(0), 1, blocked.size(1), blocked.size(2))
    # Every row has a finite entry; a row blocked everywhere (the padded node) sees its first key only.
    fully_blocked = blocked.all(-1)
    expected = blocked.clone()
    expected[..., 0] &= ~fully_blocked
    assert torch.equal(mask[:, 0] == float("-inf"), expected)
    assert torch.all(mask[:, 0][~expected] == 0)
    assert fully_blocked.any() == subtree_masking
    assert tree_attention_mask(structure, subtree_masking, torch.bfloat16).dtype == torch.bfloat16


@pytest.mark.parametrize("subtree_masking", [True, False])
def test_fused_self_attention_equals_explicit(subtree_masking):
    torch.manual_seed(0)
    attention = TreeSelfAttention(DIM, HEADS, subtree_masking=subtree_masking).eval()
    _, _, leaves, nodes, structure = batch_tensors(7)
    new_leaves, new_nodes = attention(leaves, nodes, structure)
    shared_mask = tree_attention_mask(structure, subtree_masking)
    torch.testing.assert_close(attention(leaves, nodes, structure, shared_mask), (new_leaves, new_nodes))
    # The explicit masked softmax of the same keys and values.
    keys, values = attention._keys_and_values(leaves, nodes, structure)
    padding = key_padding_mask(structure)
    blocked = subtree_mask(structure).unsqueeze(1) if subtree_masking else padding[:, None, None, :]
    expected, _ = attention._attend(torch.cat([nodes, leaves], 1), keys, values, blocked)
    expected = expected.masked_fill(padding.unsqueeze(-1), 0)
    torch.testing.assert_close(torch.cat([new_nodes, new_leaves], 1), expected, atol=1e-5, rtol=1e-5)


def test_cross_attention_without_weights_equals_with_weights():
    torch.manual_seed(0)
    attention = TreeCrossAttention(DIM, HEADS).eval()
    trees, _, leaves, nodes, structure = batch_tensors(8)
    query = torch.randn(len(trees), 3, DIM)
    fused, no_weights = attention(query, leaves, nodes, structure)
    explicit, _ = attention(query, leaves, nodes, structure, need_weights=True)
    assert no_weights is None
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


def batch_tensors(seed: int, dim: int = DIM):
    trees, spans, leaf_padding_mask, node_padding_mask, offsets = random_batch(seed)
    generator = torch.Generator().manual_seed(seed)
    leaves = torch.randn(*leaf_padding_mask.shape, dim, generator=generator)
    nodes = torch.randn(*node_padding_mask.shape, dim, generator=generator)
    structure = build_tree_structure(spans, leaf_padding_mask, node_padding_mask)
    return trees, offsets, leaves, nodes, structure


def single_sentence(b, trees, offsets, leaves, nodes):
    """Sentence ``b`` alone, without padding: its leaves, nodes and structure."""
    words, spans = trees[b]
    columns = slice(offsets[b], offsets[b] + words + 1)
    spans_tensor = torch.tensor(spans, dtype=torch.long).view(1, -1, 2)
    no_padding = torch.zeros(1, words + 1, dtype=torch.bool), torch.zeros(1, len(spans), dtype=torch.bool)
    structure = build_tree_structure(spans_tensor, *no_padding)
    return leaves[b : b + 1, columns], nodes[b : b + 1, : len(spans)], structure, columns


@pytest.mark.parametrize("hierarchical_embeddings", [True, False])
@pytest.mark.parametrize("subtree_masking", [True, False])
def test_self_attention_is_batch_invariant(hierarchical_embeddings, subtree_masking):
    torch.manual_seed(0)
    attention = TreeSelfAttention(
        DIM, HEADS, subtree_masking=subtree_masking, hierarchical_embeddings=hierarchical_embeddings
    ).eval()
    trees, offsets, leaves, nodes, structure = batch_tensors(0)
    new_leaves, new_nodes = attention(leaves, nodes, structure)
    for b in range(len(trees)):
        alone_leaves, alone_nodes, alone_structure, columns = single_sentence(b, trees, offsets, leaves, nodes)
        expected_leaves, expected_nodes = attention(alone_leaves, alone_nodes, alone_structure)
        m = alone_nodes.size(1)
        torch.testing.assert_close(new_leaves[b : b + 1, columns], expected_leaves, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(new_nodes[b : b + 1, :m], expected_nodes, atol=1e-5, rtol=1e-5)


def test_padded_queries_give_zero_and_no_nan():
    torch.manual_seed(0)
    attention = TreeSelfAttention(DIM, HEADS)
    _, _, leaves, nodes, structure = batch_tensors(1)
    leaves.requires_grad_(True)
    new_leaves, new_nodes = attention(leaves, nodes, structure)
    assert torch.isfinite(new_leaves).all() and torch.isfinite(new_nodes).all()
    assert torch.all(new_leaves[structure.leaf_padding_mask] == 0)
    assert torch.all(new_nodes[structure.node_padding_mask] == 0)
    (new_leaves.sum() + new_nodes.sum()).backward()
    assert torch.isfinite(leaves.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in attention.parameters())


def test_subtree_masking_encodes_bottom_up():
    torch.manual_seed(0)
    trees, offsets, leaves, nodes, structure = batch_tensors(2)
    masked, unmasked = TreeSelfAttention(DIM, HEADS), TreeSelfAttention(DIM, HEADS, subtree_masking=False)
    unmasked.load_state_dict(masked.state_dict())
    other_nodes = torch.randn_like(nodes)

    def new_leaves(attention, nodes):
        return attention(leaves, nodes, structure)[0]

    # Leaves see leaves only: node states cannot reach them.
    torch.testing.assert_close(new_leaves(masked, nodes), new_leaves(masked, other_nodes))
    assert not torch.allclose(new_leaves(unmasked, nodes), new_leaves(unmasked, other_nodes))
    # A node sees its subtree only: leaves outside its span cannot reach it.
    b = len(trees) - 1
    start, end = (column + offsets[b] for column in trees[b][1][0])  # the lowest node of the last sentence
    assert end - start + 1 < trees[b][0]
    other_leaves = leaves.clone()
    other_leaves[b, :start] += 1
    other_leaves[b, end + 1 :] += 1

    def first_node(attention, leaves):
        return attention(leaves, nodes, structure)[1][b, 0]

    torch.testing.assert_close(first_node(masked, leaves), first_node(masked, other_leaves))
    assert not torch.allclose(first_node(unmasked, leaves), first_node(unmasked, other_leaves))


def test_without_nodes_self_attention_is_standard_attention():
    torch.manual_seed(0)
    attention = TreeSelfAttention(DIM, HEADS)
    reference = torch.nn.MultiheadAttention(DIM, HEADS, batch_first=True)
    with torch.no_grad():
        projections = attention.q_proj, attention.k_proj, attention.v_proj
        reference.in_proj_weight.copy_(torch.cat([proj.weight for proj in projections]))
        reference.in_proj_bias.copy_(torch.cat([proj.bias for proj in projections]))
        reference.out_proj.load_state_dict(attention.out_proj.state_dict())
    leaf_padding_mask = torch.tensor([[False] * 5, [True, True, False, False, False]])
    no_spans, no_nodes = torch.empty(2, 0, 2, dtype=torch.long), torch.empty(2, 0, dtype=torch.bool)
    structure = build_tree_structure(no_spans, leaf_padding_mask, no_nodes)
    leaves = torch.randn(2, 5, DIM)
    new_leaves, new_nodes = attention(leaves, torch.empty(2, 0, DIM), structure)
    expected, _ = reference(leaves, leaves, leaves, key_padding_mask=leaf_padding_mask)
    assert new_nodes.shape == (2, 0, DIM)
    real = ~leaf_padding_mask
    torch.testing.assert_close(new_leaves[real], expected[real], atol=1e-5, rtol=1e-5)


def test_layers_can_share_hierarchical_embeddings():
    shared = HierarchicalEmbedding(DIM // HEADS, 8)
    first = TreeSelfAttention(DIM, HEADS, shared_hierarchical_embedding=shared)
    second = TreeCrossAttention(DIM, HEADS, shared_hierarchical_embedding=shared)
    assert first.hierarchical_embedding is second.hierarchical_embedding is shared
    assert TreeSelfAttention(DIM, HEADS, hierarchical_embeddings=False).hierarchical_embedding is None


def test_cross_attention_cached_equals_uncached():
    torch.manual_seed(0)
    attention = TreeCrossAttention(DIM, HEADS).eval()
    trees, _, leaves, nodes, structure = batch_tensors(3)
    query = torch.randn(len(trees), 6, DIM)
    full, full_weights = attention(query, leaves, nodes, structure, need_weights=True)
    memory = attention.tree_memory(leaves, nodes, structure)
    steps = [attention.attend(query[:, t : t + 1], memory, need_weights=True) for t in range(query.size(1))]
    torch.testing.assert_close(torch.cat([out for out, _ in steps], 1), full)
    torch.testing.assert_close(torch.cat([w for _, w in steps], 1), full_weights)
    # Reordering the cache (beam search) equals recomputing it on the reordered batch.
    order = torch.tensor([4, 4, 1, 0])
    reordered, _ = attention.attend(query[order], memory.index_select(order))
    recomputed, _ = attention(query[order], leaves[order], nodes[order], structure.index_select(order))
    torch.testing.assert_close(reordered, recomputed)


def test_cross_attention_weights():
    torch.manual_seed(0)
    attention = TreeCrossAttention(DIM, HEADS)
    trees, _, leaves, nodes, structure = batch_tensors(4)
    out, weights = attention(torch.randn(len(trees), 3, DIM), leaves, nodes, structure, need_weights=True)
    num_nodes = nodes.size(1)
    assert out.shape == (len(trees), 3, DIM)
    assert weights.shape == (len(trees), 3, num_nodes + leaves.size(1))
    torch.testing.assert_close(weights.sum(-1), torch.ones(len(trees), 3))
    assert torch.all(weights[key_padding_mask(structure).unsqueeze(1).expand_as(weights)] == 0)
    # Sentences with nodes put some mass on them; the one-word sentence has none to attend.
    node_mass = weights[..., :num_nodes].sum(-1)  # (B, T)
    has_nodes = torch.tensor([len(spans) > 0 for _, spans in trees])
    assert torch.all(node_mass[has_nodes] > 0) and torch.all(node_mass[~has_nodes] == 0)


def test_cross_attention_is_batch_invariant():
    torch.manual_seed(0)
    attention = TreeCrossAttention(DIM, HEADS, kdim=8).eval()
    trees, offsets, leaves, nodes, structure = batch_tensors(5, dim=8)
    query = torch.randn(len(trees), 4, DIM)
    out, weights = attention(query, leaves, nodes, structure, need_weights=True)
    for b in range(len(trees)):
        alone_leaves, alone_nodes, alone_structure, columns = single_sentence(b, trees, offsets, leaves, nodes)
        expected, expected_weights = attention(
            query[b : b + 1], alone_leaves, alone_nodes, alone_structure, need_weights=True
        )
        torch.testing.assert_close(out[b : b + 1], expected, atol=1e-5, rtol=1e-5)
        m = alone_nodes.size(1)
        node_weights, leaf_weights = weights[b : b + 1, :, :m], weights[b : b + 1, :, nodes.size(1) :]
        kept = torch.cat([node_weights, leaf_weights[..., columns]], -1)
        torch.testing.assert_close(kept, expected_weights, atol=1e-5, rtol=1e-5)


def test_bf16_autocast_has_no_nan():
    torch.manual_seed(0)
    self_attention, cross_attention = TreeSelfAttention(DIM, HEADS), TreeCrossAttention(DIM, HEADS)
    trees, _, leaves, nodes, structure = batch_tensors(6)
    query = torch.randn(len(trees), 5, DIM)

    def run():
        return (*self_attention(leaves, nodes, structure), cross_attention(query, leaves, nodes, structure)[0])

    reference = run()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outputs = run()
    for out, ref in zip(outputs, reference):
        assert out.dtype == torch.bfloat16
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out.float(), ref, atol=0.1, rtol=0.1)


# Eqs. 12-18 literally, for one sentence at a time


def naive_self_attention(attention, leaves, nodes, spans):
    """Eqs. 12-18 (and ``· W^O`` of eqs. 19-20) for one sentence without padding, head by head:
    the affinities of eqs. 12-15 (scaled per head), ``N̄' = V(U(F(L W^V, N W^V, R) + E), w)`` with
    ``w = L·u_s`` (eq. 16, :func:`naive_accumulation`), the subtree mask ``μ`` (eq. 11) and the
    softmax over ``[N̄'; L W^V]`` (eqs. 17-18). leaves ``(n, d)``, nodes ``(m, d)``; returns the new
    nodes and leaves."""
    num_leaves, num_nodes = leaves.size(0), nodes.size(0)
    heads, head_dim = attention.num_heads, attention.head_dim

    def project(linear, x):
        return x @ linear.weight.T + (linear.bias if linear.bias is not None else 0)

    def visible(query, key):  # μ: query and key index [N; L]
        if query < num_nodes:
            start, end = spans[query]
            if key < num_nodes:
                return start <= spans[key][0] and spans[key][1] <= end
            return start <= key - num_nodes <= end
        return key >= num_nodes

    x = torch.cat([nodes, leaves])
    q, k, v = project(attention.q_proj, x), project(attention.k_proj, x), project(attention.v_proj, x)
    u = attention.leaf_weight.weight  # (1 or H, d)
    outputs = []
    for h in range(heads):
        columns = slice(h * head_dim, (h + 1) * head_dim)
        w = leaves @ u[h if u.size(0) > 1 else 0]  # (n,)
        node_values = naive_accumulation(v[num_nodes:, columns], v[:num_nodes, columns], w, spans,
                                         attention.hierarchical_embedding)
        values = torch.cat([node_values, v[num_nodes:, columns]])
        out = torch.zeros(num_nodes + num_leaves, head_dim, dtype=x.dtype)
        for i in range(num_nodes + num_leaves):
            keys = [j for j in range(num_nodes + num_leaves) if visible(i, j)]
            scores = torch.stack([q[i, columns] @ k[j, columns] / head_dim**0.5 for j in keys])
            out[i] = sum(p * values[j] for p, j in zip(scores.softmax(0), keys))
        outputs.append(out)
    out = project(attention.out_proj, torch.cat(outputs, dim=1))
    return out[:num_nodes], out[num_nodes:]


@pytest.mark.parametrize("leaf_weight_per_head", [False, True])
def test_self_attention_is_the_printed_equations(leaf_weight_per_head):
    torch.manual_seed(0)
    attention = TreeSelfAttention(DIM, HEADS, num_hierarchical_embeddings=5,
                                  leaf_weight_per_head=leaf_weight_per_head).double().eval()
    # eq. 16: u_s ∈ R^d, one weight per leaf for every head; the option gives each head its own u
    assert attention.leaf_weight.weight.shape == ((HEADS if leaf_weight_per_head else 1), DIM)
    trees, offsets, leaves, nodes, structure = batch_tensors(2)
    leaves, nodes = leaves.double(), nodes.double()
    checked = 0
    for b in range(len(trees)):
        alone_leaves, alone_nodes, alone_structure, _ = single_sentence(b, trees, offsets, leaves, nodes)
        new_leaves, new_nodes = attention(alone_leaves, alone_nodes, alone_structure)
        expected_nodes, expected_leaves = naive_self_attention(attention, alone_leaves[0], alone_nodes[0], trees[b][1])
        torch.testing.assert_close(new_nodes[0], expected_nodes)
        torch.testing.assert_close(new_leaves[0], expected_leaves)
        checked += len(trees[b][1]) > 2
    assert checked > 0


def test_checkpoint_with_one_leaf_weight_per_head_loads():
    torch.manual_seed(0)
    per_head = TreeSelfAttention(DIM, HEADS, leaf_weight_per_head=True).eval()
    state = {f"self_attn.{key}": value for key, value in per_head.state_dict().items()}
    shared = TreeSelfAttention(DIM, HEADS).eval()
    shared.upgrade_state_dict_named(state, "self_attn")
    shared.load_state_dict({key.removeprefix("self_attn."): value for key, value in state.items()})
    assert shared.leaf_weight_per_head and shared.leaf_weight.weight.shape == (HEADS, DIM)
    _, _, leaves, nodes, structure = batch_tensors(3)
    torch.testing.assert_close(shared(leaves, nodes, structure), per_head(leaves, nodes, structure))


def test_checkpoint_with_a_shared_leaf_weight_is_refused_by_a_per_head_module():
    """The reverse of the switch above: a shared-u checkpoint into --leaf-weight-per-head is refused
    in one line naming the option (not expanded into another model); a row count that is neither is named."""
    shared = TreeSelfAttention(DIM, HEADS)
    state = {f"self_attn.{key}": value for key, value in shared.state_dict().items()}
    per_head = TreeSelfAttention(DIM, HEADS, leaf_weight_per_head=True)
    with pytest.raises(ValueError) as refused:
        per_head.upgrade_state_dict_named(state, "self_attn")
    assert str(refused.value).startswith("--leaf-weight-per-head: self_attn.leaf_weight.weight has 1 row, ")
    assert per_head.leaf_weight_per_head and per_head.leaf_weight.weight.shape == (HEADS, DIM)
    state["self_attn.leaf_weight.weight"] = torch.zeros(HEADS - 1, DIM)
    for module in (shared, per_head):
        with pytest.raises(ValueError, match=f"^self_attn.leaf_weight.weight has {HEADS - 1} rows: 1 .* or {HEADS} "):
            module.upgrade_state_dict_named(state, "self_attn")
