"""What every translation model of the package owes fairseq, checked the same way for each
registered tiny architecture and each task it trains with: its architecture defaults give way to
the command line, a sentence's encoder output and its translations do not depend on what it is
batched with, incremental decoding equals the full forward pass through beam reorders, beam
scores equal the full-sequence log-probabilities, and fairseq-train + fairseq-generate run end
to end and translate every test sentence. Method-specific checks stay in the per-model files."""

import re

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY

import helpers
from helpers import (
    by_length,
    check_beam_scores_equal_full_sequence_scores,
    check_encoder_batch_invariance,
    check_generation_batch_invariance,
    check_incremental_decoding,
    check_incremental_decoding_as_the_generator,
    train_and_generate,
)

pytestmark = pytest.mark.usefixtures("one_thread")

# Each tiny architecture of the package with the tasks (and data-bin fixtures) it trains with;
# models that read no tree also train on a plain fairseq data-bin with fairseq's own task.
WITH_TREES = ("tree_translation", "tiny_databin")
TEXT_ONLY = ("translation", "plain_databin")
CONTRACT = {
    "tree_transformer_tiny": [WITH_TREES],
    "tree_pe_transformer_tiny": [WITH_TREES],
    "tree_composition_transformer_tiny": [WITH_TREES],
    "constituent_transformer_tiny": [WITH_TREES, TEXT_ONLY],
    "treeformer_tiny": [WITH_TREES, TEXT_ONLY],
}
# Models of other tasks: sequence to tree (test_tree_decoder.py), tree to tree (test_tree_to_tree.py),
# the masked language model that induces trees (test_induce_trees.py), and PASCAL, whose data-bin also
# holds dependency parents (test_pascal.py runs these checks on one).
OTHER_TASKS = {"tree_pe_parser_tiny", "tree_pe_tree2tree_tiny", "constituent_encoder_lm_tiny", "pascal_transformer_tiny"}
CASES = [(arch, task, databin) for arch, pairs in CONTRACT.items() for task, databin in pairs]
IDS = [f"{arch}-{task}" for arch, task, _ in CASES]


def test_every_tiny_architecture_is_under_contract():
    tiny = {name for name, model in ARCH_MODEL_REGISTRY.items()
            if name.endswith("_tiny") and model.__module__.startswith("tree_fairseq.")}
    assert tiny == set(CONTRACT) | OTHER_TASKS


@pytest.fixture(scope="module", params=CASES, ids=IDS)
def case(request):
    arch, task, databin = request.param
    return arch, task, request.getfixturevalue(databin)


@pytest.fixture(scope="module")
def model(case):
    arch, task, databin = case
    return helpers.build(databin, arch=arch, task=task)


def test_the_command_line_wins_over_the_architecture_defaults(case):
    arch, task, databin = case
    args = helpers.parse(databin, "--dropout", "0.25", "--encoder-embed-dim", "48", "--decoder-layers", "1",
                         arch=arch, task=task)
    assert (args.dropout, args.encoder_embed_dim, args.decoder_layers) == (0.25, 48, 1)
    model = helpers.build(databin, "--encoder-embed-dim", "48", "--decoder-embed-dim", "48",
                          "--decoder-layers", "1", arch=arch, task=task)[1]
    assert len(model.decoder.layers) == 1
    assert model.encoder.embed_tokens.embedding_dim == 48


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_encoder_output_is_batch_invariant(case, left_pad_source):
    arch, task, databin = case
    check_encoder_batch_invariance(*helpers.build(databin, arch=arch, task=task, left_pad_source=left_pad_source))


@pytest.mark.parametrize("beam", [1, 3])
def test_generation_is_batch_invariant(model, beam):
    check_generation_batch_invariance(*model, beam)


def test_incremental_decoding_matches_full_forward(model):
    task, net = model
    check_incremental_decoding(task, net, by_length(task)[10:13])
    check_incremental_decoding_as_the_generator(task, net, by_length(task)[-3:])


def test_beam_search_scores_equal_full_sequence_scores(model):
    task, net = model
    check_beam_scores_equal_full_sequence_scores(task, net, by_length(task)[20:26])


@pytest.mark.slow
def test_fairseq_train_and_generate(case, tmp_path):
    arch, task, databin = case
    stdout = train_and_generate(databin, tmp_path, arch, "--share-all-embeddings", task=task, max_update=3,
                                generate_flags=("--print-alignment",))
    hypotheses = re.findall(r"^H-(\d+)\t", stdout, flags=re.M)
    assert sorted(map(int, hypotheses)) == list(range(40))
    assert len(re.findall(r"^A-\d+\t", stdout, flags=re.M)) == 40  # alignments index the source tokens
    assert "Generate test with beam=3: BLEU4" in stdout
