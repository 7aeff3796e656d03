"""The ``tree_composition_transformer`` model (attention composition, Ahmed et al. 2019): options
and architectures (the paper's model by default, the earlier model for its checkpoints), the
encoder's wiring against the module, its variants, batch invariance of the
encoder and of generation, incremental decoding against the full forward pass, and fairseq-train +
fairseq-generate end to end on the tiny data-bin."""

import functools

import pytest
import torch
from fairseq import options
from helpers import by_length, check_encoder_batch_invariance, collate

import helpers
from tree_fairseq.models.tree_composition_transformer import TreeCompositionTransformerModel
from tree_fairseq.modules.tree_composition import ResidualMeanComposition, TreeComposition, composition_schedule

ARCH = "tree_composition_transformer_tiny"
parse = functools.partial(helpers.parse, arch=ARCH)
build = functools.partial(helpers.build, arch=ARCH)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(tiny_databin):
    return build(tiny_databin, arch=ARCH)


def encoder_input(batch):
    return {k: v for k, v in batch["net_input"].items() if k != "prev_output_tokens"}


def test_options_are_in_the_model_help():
    parser = options.get_training_parser()
    TreeCompositionTransformerModel.add_args(parser)
    text = parser.format_help()
    flags = ("--composition-layers", "--composition-branches", "--composition-leaves", "--node-labels",
             "--composition-form", "--composition-branch-residual", "--share-all-embeddings")
    for flag in flags:
        assert flag in text


PAPER_DEFAULTS = {  # the paper's constituency model: embedding leaves, children only, eqs. 4-8
    "composition_layers": 1, "composition_branches": None, "composition_leaves": "embeddings",
    "node_labels": False, "composition_form": "paper", "composition_branch_residual": "input",
}


def composition_options(args) -> dict:
    return {name: getattr(args, name) for name in PAPER_DEFAULTS}


@pytest.mark.parametrize("arch, dims", [
    ("tree_composition_transformer", (512, 2048, 8, 0, 6)),
    ("tree_composition_transformer_paper", (300, 341, 6, 0, 6)),
    ("tree_composition_transformer_iwslt_de_en", (512, 1024, 4, 0, 6)),
    ("tree_composition_transformer_tiny", (32, 64, 4, 0, 2)),
])
def test_architectures_set_defaults(tiny_databin, arch, dims):
    """Every architecture is the paper's model by default; no encoder layers under the embedding
    leaves, fairseq's own number of them (6, the tiny 2) under contextual leaves."""
    args = parse(tiny_databin, arch=arch)
    got = (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
           args.encoder_layers, args.decoder_layers)
    assert got == dims
    assert composition_options(args) == PAPER_DEFAULTS
    assert parse(tiny_databin, "--composition-layers", "2", arch=arch).composition_layers == 2
    contextual = parse(tiny_databin, "--composition-leaves", "contextual", arch=arch)
    assert contextual.encoder_layers == (2 if arch.endswith("_tiny") else 6)


def test_paper_architecture_sizes(tiny_databin):
    """Section 3: d 300, six branches of 50, PCNN 341 wide (then 300), dropout 0.1."""
    args = parse(tiny_databin, arch="tree_composition_transformer_paper")
    assert (args.encoder_embed_dim // args.encoder_attention_heads, args.dropout) == (50, 0.1)
    _, model = build(tiny_databin, arch="tree_composition_transformer_paper")
    composition = model.encoder.compositions[0]
    assert (composition.num_branches, composition.branch_dim, composition.dropout) == (6, 50, 0.1)
    assert composition.ffn_in_weight.shape == (6, 300, 341) and composition.ffn_out_weight.shape == (6, 341, 300)


def test_earlier_checkpoint_args_get_the_earlier_model(tiny_databin):
    """The args of a checkpoint of the earlier model (``no_node_labels``, none of the new options)
    come back as that model: contextual leaves, node labels unless it said otherwise, the
    residual-mean composition."""
    for no_node_labels in (False, True):
        args = parse(tiny_databin, arch=ARCH)
        for name in PAPER_DEFAULTS:
            delattr(args, name)
        args.no_node_labels = no_node_labels
        args.encoder_layers = 2
        TreeCompositionTransformerModel.set_defaults(args)
        assert composition_options(args) == {
            **PAPER_DEFAULTS, "composition_leaves": "contextual", "node_labels": not no_node_labels,
            "composition_form": "residual_mean",
        }


def test_earlier_model_state_loads(tiny_databin):
    """The earlier model's parameter names and shapes are those of the flags that select it."""
    _, model = build(tiny_databin, "--composition-leaves", "contextual", "--node-labels",
                     "--composition-form", "residual_mean", arch=ARCH)
    names = {name for name, _ in model.named_parameters()}
    composition = {name.split("compositions.0.")[1] for name in names if "compositions.0." in name}
    assert composition == {
        "q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias",
        "out_weight", "out_bias", "ffn_in_weight", "ffn_in_bias", "ffn_out_weight", "ffn_out_bias",
        "kappa_logits", "alpha_logits", "layer_norm.weight", "layer_norm.bias",
    }
    assert "encoder.embed_node_labels.weight" in names and "encoder.layers.1.fc1.weight" in names


def test_embedding_leaves_take_no_encoder_layers(tiny_databin):
    with pytest.raises(ValueError, match="encoder-layers 0"):
        build(tiny_databin, "--encoder-layers", "2", arch=ARCH)


def test_encoder_composes_the_word_embeddings(tiny):
    """By default (the paper's model): one TreeComposition pass over the scaled word embeddings
    (no positions, no transformer layers), children only; no node-label table."""
    task, model = tiny
    encoder = model.encoder
    composition = encoder.compositions[0]
    assert isinstance(composition, TreeComposition) and composition.branch_residual == "input"
    assert composition.num_branches == 4 and len(encoder.compositions) == 1
    assert len(encoder.layers) == 0 and encoder.embed_positions is None and encoder.embed_node_labels is None
    assert not any("embed_node_labels" in name for name, _ in model.named_parameters())
    batch = collate(task, by_length(task)[-4:])
    inputs = encoder_input(batch)
    with torch.no_grad():
        out = encoder(**inputs)
        leaves = encoder.embed_scale * encoder.embed_tokens(inputs["src_tokens"])
        leaf_padding_mask = inputs["src_tokens"].eq(task.source_dictionary.pad())
        schedule = composition_schedule(inputs["src_node_spans"], leaf_padding_mask, inputs["src_node_padding_mask"])
        nodes, leaf_states = composition(leaves, schedule, None)
    m = inputs["src_node_labels"].size(1)
    torch.testing.assert_close(out["encoder_out"][0], torch.cat([nodes, leaf_states], dim=1).transpose(0, 1))
    assert out["encoder_padding_mask"][0][:, :m].equal(inputs["src_node_padding_mask"])
    assert out["encoder_padding_mask"][0][:, m:].equal(leaf_padding_mask)


@pytest.mark.parametrize("leaves", ["embeddings", "contextual"])
def test_the_papers_encoder_does_not_see_the_order_of_siblings(tiny_databin, leaves):
    """The paper's encoder (word-embedding leaves, no positions) composes each node's children as a
    set: swapping two sibling leaves gives the same node states and swaps the two leaf states, so
    nothing downstream can tell the two source orders apart (docs/methods.md, section 5, and the
    tree benchmark, docs/tree_benchmark.md). With ``--composition-leaves contextual`` (positions and
    transformer layers) the node states depend on the order."""
    flags = ("--composition-leaves", "contextual", "--encoder-layers", "2") if leaves == "contextual" else ()
    task, model = build(tiny_databin, *flags, arch=ARCH)
    a, b, c = (task.source_dictionary.index(word) for word in ("ka", "lo", "mi"))
    assert len({a, b, c, task.source_dictionary.unk()}) == 4
    eos = task.source_dictionary.eos()
    spans = torch.tensor([[[0, 1], [0, 2]]])  # (X (Y w0 w1) w2), bottom-up
    inputs = {"src_lengths": torch.tensor([4]), "src_node_labels": torch.full((1, 2), task.node_dictionary.unk()),
              "src_node_spans": spans, "src_node_padding_mask": torch.zeros(1, 2, dtype=torch.bool)}
    with torch.no_grad():
        first = model.encoder(torch.tensor([[a, b, c, eos]]), **inputs)["encoder_out"][0][:, 0]
        swapped = model.encoder(torch.tensor([[b, a, c, eos]]), **inputs)["encoder_out"][0][:, 0]
    # rows: nodes Y, X, then leaves w0, w1, w2, EOS
    same_nodes = torch.allclose(first[:2], swapped[:2], atol=1e-6)
    if leaves == "embeddings":
        assert same_nodes
        torch.testing.assert_close(first[[2, 3, 4, 5]], swapped[[3, 2, 4, 5]])
    else:
        assert not same_nodes


@pytest.mark.parametrize("form", ["paper", "residual_mean"])
def test_encoder_composes_the_transformer_leaves(tiny_databin, form):
    """With ``--composition-leaves contextual --node-labels``: one composition pass over the
    transformer encoder's leaves with the scaled label embeddings as node inputs."""
    task, model = build(tiny_databin, "--composition-leaves", "contextual", "--node-labels",
                        "--composition-form", form, arch=ARCH)
    encoder = model.encoder
    assert len(encoder.layers) == 2 and encoder.embed_positions is not None
    assert isinstance(encoder.compositions[0], TreeComposition if form == "paper" else ResidualMeanComposition)
    composition = encoder.compositions[0]
    assert composition.num_branches == 4 and len(encoder.compositions) == 1
    assert encoder.embed_node_labels.num_embeddings == len(task.node_dictionary)
    batch = collate(task, by_length(task)[-4:])
    inputs = encoder_input(batch)
    with torch.no_grad():
        out = encoder(**inputs)
        leaves = encoder.forward_scriptable(inputs["src_tokens"], inputs["src_lengths"])["encoder_out"][0]
        leaf_padding_mask = inputs["src_tokens"].eq(task.source_dictionary.pad())
        schedule = composition_schedule(inputs["src_node_spans"], leaf_padding_mask, inputs["src_node_padding_mask"])
        labels = encoder.embed_scale * encoder.embed_node_labels(inputs["src_node_labels"])
        nodes, leaf_states = composition(leaves.transpose(0, 1), schedule, labels)
    m = inputs["src_node_labels"].size(1)
    torch.testing.assert_close(out["encoder_out"][0], torch.cat([nodes, leaf_states], dim=1).transpose(0, 1))
    assert out["encoder_padding_mask"][0][:, :m].equal(inputs["src_node_padding_mask"])
    assert out["encoder_padding_mask"][0][:, m:].equal(leaf_padding_mask)


def test_node_labels_are_embedded_as_the_tokens(tiny_databin):
    """With ``--node-labels --layernorm-embedding``: the node inputs get fairseq's embedding layer
    norm after the scale, as the tokens do (and as in the other models reading node labels)."""
    task, model = build(tiny_databin, "--node-labels", "--layernorm-embedding", arch=ARCH)
    encoder = model.encoder.eval()
    assert encoder.layernorm_embedding is not None
    with torch.no_grad():
        encoder.layernorm_embedding.weight.uniform_(0.5, 1.5)
        encoder.layernorm_embedding.bias.normal_()
    batch = collate(task, by_length(task)[-4:])
    inputs = encoder_input(batch)
    with torch.no_grad():
        out = encoder(**inputs)
        leaves, _ = encoder.forward_embedding(inputs["src_tokens"])
        leaf_padding_mask = inputs["src_tokens"].eq(task.source_dictionary.pad())
        schedule = composition_schedule(inputs["src_node_spans"], leaf_padding_mask, inputs["src_node_padding_mask"])
        node_inputs = encoder.embed_scale * encoder.embed_node_labels(inputs["src_node_labels"])
        node_inputs = torch.nn.functional.layer_norm(
            node_inputs, (node_inputs.size(-1),), encoder.layernorm_embedding.weight, encoder.layernorm_embedding.bias
        )
        nodes, leaf_states = encoder.compositions[0](leaves, schedule, node_inputs)
    torch.testing.assert_close(out["encoder_out"][0], torch.cat([nodes, leaf_states], dim=1).transpose(0, 1))


@pytest.mark.parametrize("flags", [
    (), ("--node-labels",), ("--composition-layers", "2", "--composition-branches", "2"),
    ("--composition-branch-residual", "head"), ("--composition-leaves", "contextual"),
    ("--composition-leaves", "contextual", "--encoder-layers", "0"),
    ("--composition-form", "residual_mean", "--node-labels"),
])
def test_variants_build_and_run(tiny_databin, flags):
    task, model = build(tiny_databin, *flags, arch=ARCH)
    encoder = model.encoder
    if "--node-labels" not in flags:
        assert encoder.embed_node_labels is None
        assert not any("embed_node_labels" in name for name, _ in model.named_parameters())
    if "--composition-layers" in flags:
        assert len(encoder.compositions) == 2 and encoder.compositions[0].num_branches == 2
    if "contextual" not in flags or "--encoder-layers" in flags:
        assert len(encoder.layers) == 0
    check_encoder_batch_invariance(task, model)
    batch = collate(task, by_length(task)[-4:])
    model.train()
    logits = model(**batch["net_input"])[0]
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["target"].flatten(),
                                             ignore_index=task.target_dictionary.pad())
    loss.backward()
    assert torch.isfinite(loss)
    for composition in encoder.compositions:
        assert composition.q_proj.weight.grad.abs().sum() > 0
    if encoder.embed_node_labels is not None:
        assert encoder.embed_node_labels.weight.grad.abs().sum() > 0


def test_composition_layers_must_be_positive(tiny_databin):
    with pytest.raises(ValueError, match="composition-layers"):
        build(tiny_databin, "--composition-layers", "0", arch=ARCH)
