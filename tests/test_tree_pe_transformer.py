"""The ``tree_pe_transformer`` model (tree positional encodings in the encoder): options and
architectures, positions from the tree, and the decoder's attention over nodes. What every model owes
fairseq (batch invariance, incremental decoding, beam scores, fairseq-train + fairseq-generate) is
test_model_contract.py's."""

import functools

import pytest
import torch
from fairseq import options
from helpers import by_length, collate

import helpers
from tree_fairseq.models.tree_pe_transformer import TreePETransformerModel
from tree_fairseq.modules.tree_positional_encoding import tree_paths

ARCH = "tree_pe_transformer_tiny"
parse = functools.partial(helpers.parse, arch=ARCH)
build = functools.partial(helpers.build, arch=ARCH)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(tiny_databin):
    return build(tiny_databin)


# Options and architectures


def test_options_are_in_the_model_help():
    parser = options.get_training_parser()
    TreePETransformerModel.add_args(parser)
    text = parser.format_help()
    for flag in ("--tree-pe-max-depth", "--tree-pe-num-weights", "--tree-pe-scale", "--share-all-embeddings",
                 "--encoder-layers"):
        assert flag in text


@pytest.mark.parametrize("arch, dims", [
    ("tree_pe_transformer_iwslt_de_en", (512, 1024, 4, 6, 6)),
    ("tree_pe_transformer_tiny", (32, 64, 4, 2, 2)),
])
def test_architectures_set_defaults(tiny_databin, arch, dims):
    args = parse(tiny_databin, arch=arch)
    got = (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
           args.encoder_layers, args.decoder_layers)
    assert got == dims
    assert (args.tree_pe_max_depth, args.tree_pe_num_weights, args.tree_pe_scale) == (32, None, "paper")
    assert parse(tiny_databin, "--tree-pe-max-depth", "7", arch=arch).tree_pe_max_depth == 7
    assert parse(tiny_databin, "--tree-pe-scale", "authors_code", arch=arch).tree_pe_scale == "authors_code"


def test_paper_architecture(tiny_databin):
    """Section 5.1.1's tree transformer: 4 layers, d_model 256, d_ff 512, tree positions of
    d_pos = 2048 (32 p at k = 32, n = 2) projected to 256, dropout 0.1, the paper's scale."""
    args = parse(tiny_databin, arch="tree_pe_transformer_paper")
    got = (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_layers, args.decoder_embed_dim,
           args.decoder_ffn_embed_dim, args.decoder_layers, args.dropout)
    assert got == (256, 512, 4, 256, 512, 4, 0.1)
    assert (args.tree_pe_max_depth, args.tree_pe_num_weights, args.tree_pe_scale) == (32, 32, "paper")
    _, model = build(tiny_databin, arch="tree_pe_transformer_paper")
    positions = model.encoder.tree_positions
    assert positions.num_weights * positions.max_depth * positions.degree == 2048
    assert (positions.projection.in_features, positions.projection.out_features) == (2048, 256)
    assert len(model.encoder.layers) == 4 and model.encoder.layers[0].fc1.out_features == 512


def test_tree_positions_replace_sinusoidal_ones(tiny, tiny_databin):
    task, model = tiny
    encoder = model.encoder
    assert encoder.embed_positions is None
    assert model.decoder.embed_positions is not None  # the decoder reads a sentence
    assert encoder.embed_node_labels.num_embeddings == len(task.node_dictionary)
    assert id(encoder.embed_node_labels) not in {id(encoder.embed_tokens), id(model.decoder.embed_tokens)}
    # 32 // (2 · 32) weights -> one p, a 64-dimensional stack projected to 32
    assert encoder.tree_positions.num_weights == 1 and encoder.tree_positions.projection.in_features == 64
    assert encoder.tree_positions.scale == "paper"
    _, authors = build(tiny_databin, "--tree-pe-scale", "authors_code")
    assert authors.encoder.tree_positions.scale == "authors_code"

    batch = collate(task, by_length(task)[-3:])
    net_input = batch["net_input"]
    leaf_padding_mask = net_input["src_tokens"].eq(task.source_dictionary.pad())
    node_paths, leaf_paths = tree_paths(net_input["src_node_spans"], leaf_padding_mask,
                                        net_input["src_node_padding_mask"], 32)
    encoder_input = {k: v for k, v in net_input.items() if k != "prev_output_tokens"}
    assert encoder.layernorm_embedding is None
    with torch.no_grad():
        out = encoder(**encoder_input, return_all_hiddens=True)
        positions = encoder.tree_positions(torch.cat([node_paths, leaf_paths], dim=1))
        expected = out["encoder_embedding"][0] + positions  # the layers' input
        expected = expected.masked_fill(out["encoder_padding_mask"][0].unsqueeze(-1), 0)
        torch.testing.assert_close(out["encoder_states"][0].transpose(0, 1), expected)
    assert len(out["encoder_states"]) == 1 + len(encoder.layers)


def test_the_tree_changes_the_encoding(tiny):
    """The same words under another tree: the leaves' encodings change with their positions."""
    task, model = tiny
    index = next(i for i in by_length(task) if task.dataset("test").node_sizes[i] >= 2)
    net_input = {k: v for k, v in collate(task, [index])["net_input"].items() if k != "prev_output_tokens"}
    flat = {**net_input, "src_node_labels": net_input["src_node_labels"][:, -1:],
            "src_node_spans": net_input["src_node_spans"][:, -1:],
            "src_node_padding_mask": net_input["src_node_padding_mask"][:, -1:]}  # the root only
    with torch.no_grad():
        leaves = model.encoder(**net_input)["encoder_out"][0][-net_input["src_tokens"].size(1):]
        flat_leaves = model.encoder(**flat)["encoder_out"][0][-net_input["src_tokens"].size(1):]
    assert not torch.allclose(leaves, flat_leaves, atol=1e-3)


def test_decoder_attends_to_nodes_and_hands_back_leaf_weights(tiny):
    task, model = tiny
    batch = collate(task, by_length(task)[-3:])
    net_input = batch["net_input"]
    with torch.no_grad():
        encoder_out = model.encoder.forward_torchscript(net_input)
        items = encoder_out["encoder_out"][0].size(0)
        assert items == net_input["src_node_labels"].size(1) + net_input["src_tokens"].size(1)
        _, extra = model.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out)
        assert extra["attn"][0].shape == (*net_input["prev_output_tokens"].shape, net_input["src_tokens"].size(1))
        # the nodes reach the decoder: changing their states changes its output
        changed = {**encoder_out, "encoder_out": [encoder_out["encoder_out"][0].clone()]}
        changed["encoder_out"][0][0] += 1.0
        logits = model.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out)[0]
        changed_logits = model.decoder(net_input["prev_output_tokens"], encoder_out=changed)[0]
    assert not torch.allclose(logits, changed_logits, atol=1e-4)


# Batch invariance and incremental decoding


def test_training_step_reaches_every_part(tiny_databin):
    task, model = build(tiny_databin, "--share-all-embeddings")
    model.train()
    batch = collate(task, by_length(task)[-4:])
    logits = model(**batch["net_input"])[0]
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["target"].flatten(),
                                             ignore_index=task.target_dictionary.pad())
    loss.backward()
    encoder = model.encoder
    for parameter in (encoder.embed_node_labels.weight, encoder.tree_positions.theta,
                      encoder.tree_positions.projection.weight, encoder.layers[0].self_attn.q_proj.weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0

