"""Attention composition (Ahmed et al. 2019): the height-batched bottom-up pass against a naive
per-node recursion with the same weights, batch invariance under left and right padding,
padding, gradients and bf16 autocast."""

import pytest
import torch
import torch.nn.functional as F
from helpers import pad_batch
from test_tree_positional_encoding import hand_made_batch, random_trees, sibling_groups

from tree_fairseq.modules.tree_composition import TreeComposition, composition_schedule, node_heights

DIM = 16


def naive_branch_attention(module: TreeComposition, rows: torch.Tensor) -> torch.Tensor:
    """``Σ_i α_i FFN_i(κ_i · softmax(C W_i^Q (C W_i^K)ᵀ / sqrt(d_b)) C W_i^V W_i^O)`` for one
    group ``rows (K, d)``, branch by branch."""
    kappa, alpha = module.kappa_logits.softmax(-1), module.alpha_logits.softmax(-1)
    out = torch.zeros_like(rows)
    for i in range(module.num_branches):
        block = slice(i * module.branch_dim, (i + 1) * module.branch_dim)
        projections = (module.q_proj, module.k_proj, module.v_proj)
        q, k, v = (rows @ proj.weight[block].T + proj.bias[block] for proj in projections)
        head = (q @ k.T / module.branch_dim**0.5).softmax(-1) @ v
        branch = kappa[i] * (head @ module.out_weight[i] + module.out_bias[i])
        ffn = F.relu(branch @ module.ffn_in_weight[i] + module.ffn_in_bias[i]) @ module.ffn_out_weight[i]
        out = out + alpha[i] * (ffn + module.ffn_out_bias[i])
    return out


def naive_composition(module, leaves, node_inputs, num_words, spans):
    """One sentence without padding, by recursion from the root: ``leaves (num_words + 1, d)``,
    ``node_inputs (len(spans), d)`` or None. Returns node states and leaf states."""
    groups = sibling_groups(num_words, spans)
    node_states = torch.zeros(len(spans), leaves.size(1))
    leaf_states = torch.zeros_like(leaves)

    def compose(parent) -> torch.Tensor:
        children = groups[parent]
        rows = [state(child) for child in children]
        if parent is not None and node_inputs is not None:
            rows = [node_inputs[parent[1]]] + rows
        rows = torch.stack(rows)
        composed = module.layer_norm(rows + naive_branch_attention(module, rows))
        for child, row in zip(children, composed[len(rows) - len(children) :]):
            if child[0] == "leaf":
                leaf_states[child[1]] = row
        return composed.mean(0)

    def state(item) -> torch.Tensor:
        if item[0] == "leaf":
            return leaves[item[1]]
        node_states[item[1]] = compose(item)
        return node_states[item[1]]

    compose(None)
    return node_states, leaf_states


def batch_inputs(seed: int, **kwargs):
    trees, spans, leaf_padding_mask, node_padding_mask, offsets = random_trees(seed, **kwargs)
    generator = torch.Generator().manual_seed(seed)
    leaves = torch.randn(*leaf_padding_mask.shape, DIM, generator=generator)
    node_inputs = torch.randn(*node_padding_mask.shape, DIM, generator=generator)
    schedule = composition_schedule(spans, leaf_padding_mask, node_padding_mask)
    return trees, offsets, leaves, node_inputs, schedule


def trained_like(module: TreeComposition, seed: int) -> TreeComposition:
    """Random κ, α and layer-norm parameters, so that the test sees them (they start uniform / 1 / 0)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in (module.kappa_logits, module.alpha_logits, *module.layer_norm.parameters()):
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return module.eval()


def test_schedule_of_hand_made_tree():
    # (ROOT w0 (X w1 w2) w3) EOS, left-padded by two leaves, one padded node; items
    # [X, ROOT, pad | pad, pad, w0, w1, w2, w3, EOS] = 0..9.
    batch = hand_made_batch()
    assert node_heights(*batch).tolist() == [[1, 2, 0]]
    steps = composition_schedule(*batch).steps
    assert [step.members.tolist() for step in steps] == [[[6, 7]], [[5, 0, 8]], [[1, 9]]]
    assert [step.parents.tolist() for step in steps] == [[0], [1], [-1]]
    assert not any(step.padding_mask.any() for step in steps)


def test_schedule_batches_each_height_over_the_batch():
    trees, spans, leaf_padding_mask, node_padding_mask, _ = random_trees(0)
    heights = node_heights(spans, leaf_padding_mask, node_padding_mask)
    steps = composition_schedule(spans, leaf_padding_mask, node_padding_mask).steps
    num_items = spans.size(1) + leaf_padding_mask.size(1)
    # Step h composes every node of height h, over all sentences; then the top level.
    assert len(steps) == int(heights.max()) + 1
    for height, step in enumerate(steps[:-1], start=1):
        sentence, node = step.parents // num_items, step.parents % num_items
        assert torch.all(heights[sentence, node] == height)
        assert len(step.parents) == int((heights == height).sum())
    composed = torch.cat([step.parents for step in steps[:-1]])
    assert len(set(composed.tolist())) == len(composed) == sum(len(spans) for _, spans in trees)
    # The top level: one group per sentence, its root (or only word) and EOS.
    top = steps[-1]
    assert torch.all(top.parents == -1) and top.members.shape == (len(trees), 2)


@pytest.mark.parametrize("with_node_inputs", [False, True])
@pytest.mark.parametrize("num_branches", [1, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_composition_equals_naive_recursion(seed, num_branches, with_node_inputs):
    torch.manual_seed(seed)
    trees, offsets, leaves, node_inputs, schedule = batch_inputs(seed)
    module = trained_like(TreeComposition(DIM, num_branches, ffn_dim=24), seed)
    node_inputs = node_inputs if with_node_inputs else None
    with torch.no_grad():
        node_states, leaf_states = module(leaves, schedule, node_inputs)
        for b, (words, spans) in enumerate(trees):
            columns = slice(offsets[b], offsets[b] + words + 1)
            inputs = node_inputs[b, : len(spans)] if with_node_inputs else None
            naive_nodes, naive_leaves = naive_composition(module, leaves[b, columns], inputs, words, spans)
            torch.testing.assert_close(node_states[b, : len(spans)], naive_nodes, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(leaf_states[b, columns], naive_leaves, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("with_node_inputs", [False, True])
def test_composition_is_batch_invariant(with_node_inputs):
    torch.manual_seed(0)
    trees, offsets, leaves, node_inputs, schedule = batch_inputs(3, word_counts=(2, 5, 14, 25, 30))
    module = trained_like(TreeComposition(DIM, 4), 3)
    with torch.no_grad():
        node_states, leaf_states = module(leaves, schedule, node_inputs if with_node_inputs else None)
        for b, (words, spans) in enumerate(trees[:3]):
            columns = slice(offsets[b], offsets[b] + words + 1)
            for left in (False, True):
                alone_spans, alone_leaf_mask, alone_node_mask, (offset,) = pad_batch([(words, spans)], [left])
                alone = composition_schedule(alone_spans, alone_leaf_mask, alone_node_mask)
                inputs = node_inputs[b : b + 1, : len(spans)] if with_node_inputs else None
                alone_nodes, alone_leaves = module(leaves[b : b + 1, columns], alone, inputs)
                assert (alone_nodes[0] - node_states[b, : len(spans)]).abs().max() <= 1e-5
                assert (alone_leaves[0] - leaf_states[b, columns]).abs().max() <= 1e-5


def test_padding_is_zero_and_finite():
    _, _, leaves, node_inputs, schedule = batch_inputs(4)
    # Garbage in the padding must not reach any real state.
    leaves = leaves.masked_fill(schedule.leaf_padding_mask.unsqueeze(-1), 1e4)
    node_inputs = node_inputs.masked_fill(schedule.node_padding_mask.unsqueeze(-1), float("nan"))
    module = TreeComposition(DIM, 2).eval()
    node_states, leaf_states = module(leaves, schedule, node_inputs)
    assert torch.isfinite(node_states).all() and torch.isfinite(leaf_states).all()
    assert torch.all(node_states[schedule.node_padding_mask] == 0)
    assert torch.all(leaf_states[schedule.leaf_padding_mask] == 0)
    # Every real leaf and node has a state: a layer-normalised row or a mean of such rows.
    assert torch.all(leaf_states[~schedule.leaf_padding_mask].abs().sum(-1) > 0)
    assert torch.all(node_states[~schedule.node_padding_mask].abs().sum(-1) > 0)


def test_gradients_reach_every_parameter_and_real_input():
    _, _, leaves, node_inputs, schedule = batch_inputs(1)
    leaves.requires_grad_(True)
    node_inputs.requires_grad_(True)
    module = TreeComposition(DIM, 4, dropout=0.1).train()
    node_states, leaf_states = module(leaves, schedule, node_inputs)
    weights = torch.randn_like(node_states), torch.randn_like(leaf_states)
    ((node_states * weights[0]).sum() + (leaf_states * weights[1]).sum()).backward()
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name
    real_leaves = leaves.grad.abs().sum(-1)
    assert torch.all(real_leaves[~schedule.leaf_padding_mask] > 0)
    assert torch.all(real_leaves[schedule.leaf_padding_mask] == 0)
    assert torch.all(node_inputs.grad.abs().sum(-1)[~schedule.node_padding_mask] > 0)


def test_bf16_autocast_forward():
    _, _, leaves, node_inputs, schedule = batch_inputs(2)
    module = TreeComposition(DIM, 4).eval()
    with torch.no_grad():
        reference, _ = module(leaves, schedule, node_inputs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            node_states, leaf_states = module(leaves, schedule, node_inputs)
    assert torch.isfinite(node_states.float()).all() and torch.isfinite(leaf_states.float()).all()
    real = ~schedule.node_padding_mask
    assert (node_states.float() - reference)[real].abs().max() < 0.2


def test_batch_without_nodes():
    leaf_padding_mask = torch.tensor([[False, False], [True, False]])  # a word + EOS; EOS alone
    schedule = composition_schedule(
        torch.empty(2, 0, 2, dtype=torch.long), leaf_padding_mask, torch.empty(2, 0, dtype=torch.bool)
    )
    assert len(schedule.steps) == 1  # the top level only
    node_states, leaf_states = TreeComposition(DIM, 2).eval()(torch.randn(2, 2, DIM), schedule)
    assert node_states.shape == (2, 0, DIM)
    assert torch.isfinite(leaf_states).all() and torch.all(leaf_states[1, 0] == 0)
