"""Tree to tree with tree positional encodings on both sides (Shiv & Quirk 2019, section 5.1): the
seeded For -> Lam generator (determinism, the translation by hand, trees in normal form), and the
``tree_pe_tree2tree`` model with ``--task tree_to_tree`` on a For2Lam data-bin made by
tree-fairseq-preprocess: tree positions in the encoder and the decoder, incremental decoding
against the full forward pass, only whole trees generated, fairseq-train + fairseq-generate end to
end."""

import random
import re
from argparse import Namespace
from pathlib import Path

import pytest
import torch
from helpers import build, by_length, check_incremental_decoding, collate, parse, train_and_generate

from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.models.tree_pe_transformer import TreePEEncoder, TreeSlotPositions
from tree_fairseq.trees.for2lam_corpus import Sizes, for2lam_pairs, for_tree, lam_tree, random_program
from tree_fairseq.trees.linearize import delinearize, linearize

ARCH = "tree_pe_tree2tree_tiny"
TASK = "tree_to_tree"
pytestmark = pytest.mark.usefixtures("one_thread")


# The generator


def test_pairs_are_seeded():
    assert [(f.leaves, lam.nodes) for f, lam in for2lam_pairs(7, 20)] == [
        (f.leaves, lam.nodes) for f, lam in for2lam_pairs(7, 20)]
    assert [f.leaves for f, _ in for2lam_pairs(7, 20)] != [f.leaves for f, _ in for2lam_pairs(8, 20)]


def test_translation_by_hand():
    """x = 1 ; if x < 2 then y = x + 1 ; else y = 0 ; endif for a = 0 to y do x = a ; endfor return x"""
    program = (
        [("assign", "x", ("num", "1")),
         ("if", ("<", ("var", "x"), ("num", "2")), [("assign", "y", ("+", ("var", "x"), ("num", "1")))],
          [("assign", "y", ("num", "0"))]),
         ("for", "a", ("num", "0"), ("var", "y"), [("assign", "x", ("var", "a"))])],
        ("var", "x"),
    )
    source = for_tree(program)
    assert " ".join(source.leaves) == (
        "x = 1 ; if x < 2 then y = x + 1 ; else y = 0 ; endif for a = 0 to y do x = a ; endfor return x")
    assert source.to_bracketed(tags=False) == (
        "(Program (Assign x = 1 ;) (If if (Cond x < 2) then (Block (Assign y = (Op x + 1) ;) else) "
        "(Block (Assign y = 0 ;) endif)) (For for a = 0 to y do (Block (Assign x = a ;) endfor)) (Return return x))")
    loop = "LetRec(4) loop a If(3) Lt(2) a y Let(3) x a App(2) loop Plus(2) a 1 x App(2) loop 0"
    assert " ".join(linearize(lam_tree(program))) == (
        f"Let(3) x 1 If(3) Lt(2) x 2 Let(3) y Plus(2) x 1 {loop} Let(3) y 0 {loop}")


@pytest.mark.parametrize("sizes", [Sizes(), Sizes(2, 3, 2)])
def test_trees_are_in_normal_form_and_round_trip(sizes):
    rng = random.Random(3)
    for _ in range(200):
        program = random_program(rng, sizes)
        source, target = for_tree(program), lam_tree(program)
        source.check()
        target.check()
        for order in ("depth_first", "breadth_first"):
            assert delinearize(linearize(target, order), order) == target


# The model


def write_for2lam(directory: Path) -> Path:
    """``{split}.for`` (tokens), ``{split}.tree.for`` (their trees) and ``{split}.lam`` (the Lam
    trees linearised depth first), binarised by tree-fairseq-preprocess."""
    for split, count, seed in (("train", 200, 1), ("valid", 20, 2), ("test", 24, 3)):
        pairs = for2lam_pairs(seed, count)
        (directory / f"{split}.for").write_text("".join(" ".join(f.leaves) + "\n" for f, _ in pairs))
        (directory / f"{split}.tree.for").write_text("".join(f.to_bracketed(tags=False) + "\n" for f, _ in pairs))
        (directory / f"{split}.lam").write_text("".join(" ".join(linearize(t)) + "\n" for _, t in pairs))
    destdir = directory / "bin"
    preprocess_cli.main([
        "--source-lang", "for", "--target-lang", "lam", "--trainpref", str(directory / "train"),
        "--validpref", str(directory / "valid"), "--testpref", str(directory / "test"),
        "--destdir", str(destdir), "--workers", "1",
    ])
    return destdir


@pytest.fixture(scope="module")
def for2lam_databin(tmp_path_factory):
    return write_for2lam(tmp_path_factory.mktemp("for2lam"))


@pytest.fixture(scope="module")
def tiny(for2lam_databin):
    return build(for2lam_databin, arch=ARCH, task=TASK)


def test_tree_positions_on_both_sides(for2lam_databin, tiny):
    task, model = tiny
    assert isinstance(model.encoder, TreePEEncoder)
    assert isinstance(model.decoder.embed_positions, TreeSlotPositions)
    args = parse(for2lam_databin, arch="tree_pe_tree2tree_paper", task=TASK)
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.decoder_ffn_embed_dim, args.encoder_layers,
            args.decoder_layers, args.tree_pe_num_weights, args.tree_pe_decoder_positions) == (
        256, 512, 512, 4, 4, 32, "symbol")


def test_incremental_decoding_matches_full_forward(tiny):
    task, model = tiny
    check_incremental_decoding(task, model, by_length(task)[10:13])


def test_only_whole_trees_are_generated(tiny):
    task, model = tiny
    generator = task.build_generator([model], Namespace(beam=3, max_len_a=0, max_len_b=15))
    with torch.no_grad():
        hypos = generator.generate([model], collate(task, by_length(task)[-6:]))
    for sentence in hypos:
        for hypo in sentence:
            symbols = task.target_dictionary.string(hypo["tokens"]).split()
            assert len(symbols) <= 15
            delinearize(symbols).check()


@pytest.mark.slow
def test_fairseq_train_and_generate(for2lam_databin, tmp_path):
    stdout = train_and_generate(for2lam_databin, tmp_path, ARCH, task=TASK)
    hypotheses = re.findall(r"^H-(\d+)\t\S+\t(.*)$", stdout, flags=re.M)
    assert sorted(int(i) for i, _ in hypotheses) == list(range(24))
    for _, text in hypotheses:
        delinearize(text.split()).check()
