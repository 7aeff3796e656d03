"""Attention composition (Ahmed et al. 2019): one group's composition against the paper's
eqs. 4-8 written out branch by branch and row by row, the height-batched bottom-up pass against a
naive per-node recursion with the same weights (the paper's form and the earlier residual-mean
form), batch invariance under left and right padding, padding, gradients and bf16 autocast."""

import pytest
import torch
import torch.nn.functional as F
from helpers import pad_batch
from test_tree_positional_encoding import hand_made_batch, random_trees, sibling_groups

from tree_fairseq.modules.tree_composition import (
    ResidualMeanComposition,
    TreeComposition,
    composition_schedule,
)
from tree_fairseq.modules.tree_geometry import node_heights

DIM = 16
FORMS = ("paper", "paper-head", "residual_mean")


def make(form: str, num_branches: int = 4, **kwargs):
    if form == "residual_mean":
        return ResidualMeanComposition(DIM, num_branches, **kwargs)
    return TreeComposition(DIM, num_branches, branch_residual="head" if form == "paper-head" else "input", **kwargs)


def layer_norm_by_hand(y: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalise one vector: zero mean, unit (biased) variance."""
    mean = sum(y) / len(y)
    variance = sum((value - mean) ** 2 for value in y) / len(y)
    return (y - mean) / (variance + eps) ** 0.5


def paper_composition(
    module: TreeComposition, x: torch.Tensor, keep: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eqs. 4-8 as printed, for one group's rows ``x (c, d)``: every branch and every row in its own
    loop iteration. Returns each row's ``tanh((x̃ + x) W + b)`` and their sum ``P̃``. ``keep``
    ``(c, M, d)``, if given, is the dropout on each branch's PCNN output (0 or 1 / (1 - p))."""
    c, d, d_b = x.size(0), module.embed_dim, module.branch_dim
    x_tilde = torch.zeros(c, d)
    for i in range(module.num_branches):
        block = slice(i * d_b, (i + 1) * d_b)
        w_q, w_k, w_v = (proj.weight[block].T for proj in (module.q_proj, module.k_proj, module.v_proj))  # (d, d_b)
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        b_i = torch.softmax(q @ k.T / d_b**0.5, dim=-1) @ v  # eq. 4, (c, d_b)
        b_bar = torch.zeros(c, d)
        for r in range(c):  # eq. 5, row by row
            residual = x[r] if module.branch_residual == "input" else F.pad(b_i[r], (i * d_b, d - (i + 1) * d_b))
            y = b_i[r] @ module.branch_weight[i] + residual
            normed = layer_norm_by_hand(y) * module.branch_norm_weight[i] + module.branch_norm_bias[i]
            b_bar[r] = normed * module.kappa[i]
        hidden = torch.relu(b_bar @ module.ffn_in_weight[i] + module.ffn_in_bias[i])  # eq. 6
        pcnn = hidden @ module.ffn_out_weight[i] + module.ffn_out_bias[i]
        if keep is not None:
            pcnn = pcnn * keep[:, i]
        x_tilde = x_tilde + module.alpha[i] * pcnn  # eq. 7
    rows = torch.stack([torch.tanh((x_tilde[r] + x[r]) @ module.output_proj.weight.T + module.output_proj.bias)
                        for r in range(c)])
    parent = torch.zeros(d)
    for r in range(c):  # eq. 8, EwS
        parent = parent + rows[r]
    return rows, parent


def residual_mean_composition(module: ResidualMeanComposition, rows: torch.Tensor):
    """The earlier form for one group ``rows (K, d)``: ``H = LayerNorm(x + Σ_i α_i FFN_i(κ_i ·
    softmax(x W_i^Q (x W_i^K)ᵀ / sqrt(d_b)) x W_i^V W_i^O)))`` branch by branch, parent = mean of H."""
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
    composed = module.layer_norm(rows + out)
    return composed, composed.mean(0)


def naive_group(module, rows):
    if isinstance(module, TreeComposition):
        return paper_composition(module, rows)
    return residual_mean_composition(module, rows)


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
        composed, pooled = naive_group(module, torch.stack(rows))
        for child, row in zip(children, composed[len(rows) - len(children) :]):
            if child[0] == "leaf":
                leaf_states[child[1]] = row
        return pooled

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


def trained_like(module, seed: int):
    """Random κ, α, layer-norm and output-bias parameters, so that the test sees them (they start
    at 1/M, 1, 0)."""
    generator = torch.Generator().manual_seed(seed)
    names = ("kappa", "alpha", "branch_norm_weight", "branch_norm_bias", "output_proj.bias", "ffn_in_bias",
             "kappa_logits", "alpha_logits", "layer_norm.weight", "layer_norm.bias", "out_bias")
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if name in names:
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


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("num_branches", [1, 4])
def test_group_composition_is_equations_4_to_8(form, num_branches):
    """One batch of groups of 1 to 5 rows (the rest padding with garbage in it) against the
    equations written out: the rows' states and the parents' states, the padding rows' zero."""
    torch.manual_seed(num_branches)
    module = trained_like(make(form, num_branches, ffn_dim=24), num_branches)
    sizes = torch.tensor([1, 2, 3, 5])
    padding_mask = torch.arange(5) >= sizes.unsqueeze(1)  # (G, K)
    rows = torch.randn(4, 5, DIM).masked_fill(padding_mask.unsqueeze(-1), 0)
    with torch.no_grad():
        states, parents = module.compose(rows, padding_mask)
        for g, size in enumerate(sizes.tolist()):
            naive_rows, naive_parent = naive_group(module, rows[g, :size])
            torch.testing.assert_close(states[g, :size], naive_rows, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(parents[g], naive_parent, atol=1e-5, rtol=1e-5)
    if form != "residual_mean":
        assert torch.all(states[padding_mask] == 0)


@pytest.mark.parametrize("form", ["paper", "paper-head"])
def test_dropout_masks_are_drawn_over_the_padded_rows(form):
    """In training, each branch's PCNN output is dropped (eq. 6's dropout) with the mask a seeded
    ``F.dropout`` draws over the padded rows laid out branch-major ``(M, G, K, d)``: the rows are
    computed without their padding, but a seeded run keeps the masks of the padded computation."""
    torch.manual_seed(5)
    module = trained_like(make(form, 4, ffn_dim=24, dropout=0.4), 4).train()
    sizes = torch.tensor([1, 3, 2, 5])
    padding_mask = torch.arange(5) >= sizes.unsqueeze(1)
    rows = torch.randn(4, 5, DIM).masked_fill(padding_mask.unsqueeze(-1), 0)
    torch.manual_seed(11)
    keep = F.dropout(torch.ones(4, 4, 5, DIM), p=0.4, training=True).permute(1, 2, 0, 3)  # (G, K, M, d)
    torch.manual_seed(11)
    with torch.no_grad():
        states, parents = module.compose(rows, padding_mask)
        dropped = 0
        for g, size in enumerate(sizes.tolist()):
            naive_rows, naive_parent = paper_composition(module, rows[g, :size], keep[g, :size])
            torch.testing.assert_close(states[g, :size], naive_rows, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(parents[g], naive_parent, atol=1e-5, rtol=1e-5)
            dropped += int((keep[g, :size] == 0).sum())
    assert dropped > 0 and torch.all(states[padding_mask] == 0)
    module.eval()
    with torch.no_grad():
        assert not torch.allclose(module.compose(rows, padding_mask)[0], states, atol=1e-3)


def test_paper_parent_is_a_sum_of_tanh_rows():
    """Eq. 8: the parent is the element-wise sum of its rows' tanh, so it grows with the children
    (no mean, no layer norm after the sum): with equal rows it is the row times their number."""
    module = trained_like(TreeComposition(DIM, 4), 0)
    row = torch.randn(1, 1, DIM)
    with torch.no_grad():
        one_state, one = module.compose(row, torch.tensor([[False]]))
        three_states, three = module.compose(row.expand(1, 3, DIM), torch.zeros(1, 3, dtype=torch.bool))
    assert one.abs().max() <= 1
    torch.testing.assert_close(three, 3 * one)
    torch.testing.assert_close(three_states[0], one_state[0].expand(3, DIM))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("with_node_inputs", [False, True])
@pytest.mark.parametrize("num_branches", [1, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_composition_equals_naive_recursion(seed, num_branches, with_node_inputs, form):
    torch.manual_seed(seed)
    trees, offsets, leaves, node_inputs, schedule = batch_inputs(seed)
    module = trained_like(make(form, num_branches, ffn_dim=24), seed)
    node_inputs = node_inputs if with_node_inputs else None
    with torch.no_grad():
        node_states, leaf_states = module(leaves, schedule, node_inputs)
        for b, (words, spans) in enumerate(trees):
            columns = slice(offsets[b], offsets[b] + words + 1)
            inputs = node_inputs[b, : len(spans)] if with_node_inputs else None
            naive_nodes, naive_leaves = naive_composition(module, leaves[b, columns], inputs, words, spans)
            torch.testing.assert_close(node_states[b, : len(spans)], naive_nodes, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(leaf_states[b, columns], naive_leaves, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("with_node_inputs", [False, True])
def test_composition_is_batch_invariant(with_node_inputs, form):
    torch.manual_seed(0)
    trees, offsets, leaves, node_inputs, schedule = batch_inputs(3, word_counts=(2, 5, 14, 25, 30))
    module = trained_like(make(form), 3)
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


@pytest.mark.parametrize("form", FORMS)
def test_padding_is_zero_and_finite(form):
    _, _, leaves, node_inputs, schedule = batch_inputs(4)
    # Garbage in the padding must not reach any real state.
    leaves = leaves.masked_fill(schedule.leaf_padding_mask.unsqueeze(-1), 1e4)
    node_inputs = node_inputs.masked_fill(schedule.node_padding_mask.unsqueeze(-1), float("nan"))
    module = make(form, 2).eval()
    node_states, leaf_states = module(leaves, schedule, node_inputs)
    assert torch.isfinite(node_states).all() and torch.isfinite(leaf_states).all()
    assert torch.all(node_states[schedule.node_padding_mask] == 0)
    assert torch.all(leaf_states[schedule.leaf_padding_mask] == 0)
    # Every real leaf and node has a state: a row of tanh or layer norm, or a sum or mean of them.
    assert torch.all(leaf_states[~schedule.leaf_padding_mask].abs().sum(-1) > 0)
    assert torch.all(node_states[~schedule.node_padding_mask].abs().sum(-1) > 0)


@pytest.mark.parametrize("form", FORMS)
def test_gradients_reach_every_parameter_and_real_input(form):
    _, _, leaves, node_inputs, schedule = batch_inputs(1)
    leaves.requires_grad_(True)
    node_inputs.requires_grad_(True)
    module = make(form, 4, dropout=0.1).train()
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


@pytest.mark.parametrize("form", FORMS)
def test_bf16_autocast_forward(form):
    _, _, leaves, node_inputs, schedule = batch_inputs(2)
    module = make(form, 4).eval()
    with torch.no_grad():
        reference, _ = module(leaves, schedule, node_inputs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            node_states, leaf_states = module(leaves, schedule, node_inputs)
    assert torch.isfinite(node_states.float()).all() and torch.isfinite(leaf_states.float()).all()
    real = ~schedule.node_padding_mask
    assert (node_states.float() - reference)[real].abs().max() < 0.2


@pytest.mark.parametrize("form", FORMS)
def test_batch_without_nodes(form):
    leaf_padding_mask = torch.tensor([[False, False], [True, False]])  # a word + EOS; EOS alone
    schedule = composition_schedule(
        torch.empty(2, 0, 2, dtype=torch.long), leaf_padding_mask, torch.empty(2, 0, dtype=torch.bool)
    )
    assert len(schedule.steps) == 1  # the top level only
    node_states, leaf_states = make(form, 2).eval()(torch.randn(2, 2, DIM), schedule)
    assert node_states.shape == (2, 0, DIM)
    assert torch.isfinite(leaf_states).all() and torch.all(leaf_states[1, 0] == 0)
