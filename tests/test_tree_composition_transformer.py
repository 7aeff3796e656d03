"""The ``tree_composition_transformer`` model (attention composition, Ahmed et al. 2019): options
and architectures, the encoder's wiring against the module, its variants, batch invariance of the
encoder and of generation, incremental decoding against the full forward pass, and fairseq-train +
fairseq-generate end to end on the tiny data-bin."""

import functools
import re

import pytest
import torch
from fairseq import options
from helpers import (
    by_length,
    check_beam_scores_equal_full_sequence_scores,
    check_encoder_batch_invariance,
    check_generation_batch_invariance,
    check_incremental_decoding,
    collate,
    train_and_generate,
)

import helpers
from tree_fairseq.models.tree_composition_transformer import TreeCompositionTransformerModel
from tree_fairseq.modules.tree_composition import composition_schedule

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
    for flag in ("--composition-layers", "--composition-branches", "--no-node-labels", "--share-all-embeddings"):
        assert flag in text


@pytest.mark.parametrize("arch, dims", [
    ("tree_composition_transformer_iwslt_de_en", (512, 1024, 4, 6, 6)),
    ("tree_composition_transformer_tiny", (32, 64, 4, 2, 2)),
])
def test_architectures_set_defaults(tiny_databin, arch, dims):
    args = parse(tiny_databin, arch=arch)
    got = (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
           args.encoder_layers, args.decoder_layers)
    assert got == dims
    assert (args.composition_layers, args.composition_branches, args.no_node_labels) == (1, None, False)
    assert parse(tiny_databin, "--composition-layers", "2", arch=arch).composition_layers == 2


def test_encoder_composes_the_transformer_leaves(tiny):
    """Nodes and leaves of the encoder output = one TreeComposition pass over the transformer
    encoder's leaves with the scaled label embeddings as node inputs."""
    task, model = tiny
    encoder = model.encoder
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


@pytest.mark.parametrize("flags", [
    ("--no-node-labels",), ("--composition-layers", "2", "--composition-branches", "2"), ("--encoder-layers", "0"),
])
def test_variants_build_and_run(tiny_databin, flags):
    task, model = build(tiny_databin, *flags, arch=ARCH)
    encoder = model.encoder
    if "--no-node-labels" in flags:
        assert encoder.embed_node_labels is None
        assert not any("embed_node_labels" in name for name, _ in model.named_parameters())
    if "--composition-layers" in flags:
        assert len(encoder.compositions) == 2 and encoder.compositions[0].num_branches == 2
    if "--encoder-layers" in flags:
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


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_encoder_output_is_batch_invariant(tiny_databin, left_pad_source):
    check_encoder_batch_invariance(*build(tiny_databin, arch=ARCH, left_pad_source=left_pad_source))


@pytest.mark.parametrize("beam", [1, 3])
def test_generation_is_batch_invariant(tiny, beam):
    check_generation_batch_invariance(*tiny, beam)


def test_incremental_decoding_matches_full_forward(tiny):
    task, model = tiny
    check_incremental_decoding(task, model, by_length(task)[10:13])


def test_beam_search_scores_equal_full_sequence_scores(tiny):
    task, model = tiny
    check_beam_scores_equal_full_sequence_scores(task, model, by_length(task)[20:26])


def test_fairseq_train_and_generate(tiny_databin, tmp_path):
    stdout = train_and_generate(tiny_databin, tmp_path, ARCH, "--share-all-embeddings")
    hypotheses = re.findall(r"^H-(\d+)\t", stdout, flags=re.M)
    assert sorted(map(int, hypotheses)) == list(range(40))
    assert "Generate test with beam=3: BLEU4" in stdout
