"""The tree decoder (Shiv & Quirk 2019): linearisation round trips on random trees, the step-by-step
positions of a partial tree against the positions of the whole tree, the generation constraint
(only whole trees, within the length limit, for any model, beam and search), incremental decoding
and batch invariance of ``tree_pe_parser``, and fairseq-train + fairseq-generate end to end with
``--task tree_generation``."""

import random
import re
from argparse import Namespace
from pathlib import Path

import pytest
import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.sequence_generator import SequenceGenerator
from helpers import (
    build,
    by_length,
    check_incremental_decoding,
    collate,
    fairseq_binarize,
    parse,
    random_spans,
    row_of,
    train_and_generate,
)

from tree_fairseq.models.tree_pe_transformer import TreePEParserModel, TreeSlotPositions, symbol_arities
from tree_fairseq.modules.tree_positional_encoding import (
    NEXT_SIBLING,
    PartialTrees,
    add_symbols,
    next_slot_paths,
    sequence_slot_paths,
    sequence_symbol_paths,
    tree_paths,
)
from tree_fairseq.tasks.tree_generation import allowed_continuations
from tree_fairseq.trees import Node, Tree, TreeError, parse_tree
from tree_fairseq.trees.linearize import (
    TREE_ORDERS,
    bracketed_symbols,
    children,
    delinearize,
    from_bracketed_symbols,
    linearize,
    node_symbol,
    open_slots,
    parse_symbol,
)

ARCH = "tree_pe_parser_tiny"
LABELS = ("S", "NP", "VP", "PP", "@BPE")
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta")
pytestmark = pytest.mark.usefixtures("one_thread")


def random_tree(rng: random.Random, num_words: int, max_children: int = 5) -> Tree:
    """A random normal-form tree: 2 to ``max_children`` children per node, random labels."""
    words = ["".join(rng.choices(SYLLABLES, k=2)) for _ in range(num_words)]
    nodes = random_spans(num_words, rng, max_children, node=lambda start, end: Node(rng.choice(LABELS), start, end))
    return Tree(tuple(words), tuple(nodes))


def random_trees(seed: int, count: int, max_words: int = 14) -> list[Tree]:
    rng = random.Random(seed)
    return [random_tree(rng, rng.randint(1, max_words)) for _ in range(count)]


def items_in_order(tree: Tree, order: str) -> list[tuple]:
    """The items (``("node", i)``, ``("leaf", j)``) in the order their symbols are linearised."""
    root, kids = children(tree)
    items, frontier = [], [root]
    while frontier:
        item = frontier.pop() if order == "depth_first" else frontier.pop(0)
        items.append(item)
        below = kids[item[1]] if item[0] == "node" else []
        frontier.extend(reversed(below) if order == "depth_first" else below)
    return items


PARSE_SPLITS = (("train", 200, 1), ("valid", 20, 2), ("test", 24, 3))


def write_parse_corpus(directory: Path, order: str, splits=PARSE_SPLITS) -> Path:
    """Parsing as translation on random trees: ``{split}.words`` -> ``{split}.tree`` (linearised
    in ``order``), binarised by fairseq-preprocess into ``directory/bin``."""
    for split, count, seed in splits:
        trees = random_trees(seed, count, max_words=9)
        (directory / f"{split}.words").write_text("".join(" ".join(t.leaves) + "\n" for t in trees))
        (directory / f"{split}.tree").write_text("".join(" ".join(linearize(t, order)) + "\n" for t in trees))
    return fairseq_binarize(
        directory / "bin", "--source-lang", "words", "--target-lang", "tree",
        *(arg for split in ("train", "valid", "test") for arg in (f"--{split}pref", str(directory / split))),
    )


@pytest.fixture(scope="module")
def parse_databin(tmp_path_factory):
    return write_parse_corpus(tmp_path_factory.mktemp("parse_corpus"), "depth_first")


@pytest.fixture(scope="module", params=TREE_ORDERS)
def parser_model(parse_databin, request):
    return build(parse_databin, "--tree-order", request.param, arch=ARCH, task="tree_generation")


def generate_trees(task, model, sample, order, beam=3, max_len_b=12, **search):
    generator = task.build_generator([model], Namespace(beam=beam, max_len_a=0, max_len_b=max_len_b, **search))
    with torch.no_grad():
        hypos = generator.generate([model], sample)
    dictionary = task.target_dictionary
    return [[(dictionary.string(h["tokens"]).split(), h) for h in sentence] for sentence in hypos]


# Linearisation


@pytest.mark.parametrize("order", TREE_ORDERS)
def test_linearisation_round_trips_on_random_trees(order):
    for tree in random_trees(seed=0, count=200):
        tree.check()
        symbols = linearize(tree, order)
        assert len(symbols) == len(tree.leaves) + len(tree.nodes)
        assert sorted(s for s in symbols if parse_symbol(s)[1] == 0) == sorted(tree.leaves)
        assert delinearize(symbols, order) == tree
        # open slots: positive after every proper prefix, none after the whole tree
        assert all(open_slots(symbols[:i]) > 0 for i in range(len(symbols)))
        assert open_slots(symbols) == 0
        assert from_bracketed_symbols(bracketed_symbols(tree)) == tree


def test_linearisation_orders_by_example():
    tree = parse_tree("(S (NP (DT the) (NN cat)) (VP (VBD sat) (RP down) (PP (IN on) (NP (DT the) (NN mat)))))")
    assert linearize(tree, "depth_first") == [
        "S(2)", "NP(2)", "the", "cat", "VP(3)", "sat", "down", "PP(2)", "on", "NP(2)", "the", "mat"]
    assert linearize(tree, "breadth_first") == [
        "S(2)", "NP(2)", "VP(3)", "the", "cat", "sat", "down", "PP(2)", "on", "NP(2)", "the", "mat"]
    assert bracketed_symbols(tree) == [
        "(S", "(NP", "the", "cat", ")", "(VP", "sat", "down", "(PP", "on", "(NP", "the", "mat", ")", ")", ")", ")"]
    one_word = parse_tree("(NP (NN cat))")
    assert linearize(one_word) == ["cat"] and delinearize(["cat"]) == one_word
    assert bracketed_symbols(one_word) == ["(ROOT", "cat", ")"]


def test_symbols():
    assert node_symbol("NP", 3) == "NP(3)" and parse_symbol("NP(3)") == ("NP", 3)
    assert parse_symbol("@BPE(12)") == ("@BPE", 12)
    for word in ("cat", "1\\/2", "NP", "-LRB-", ":", "(3)", "X(0)"):
        assert parse_symbol(word) == (word, 0)
    for label, count in (("NP", 0), ("", 2)):
        with pytest.raises(TreeError):
            node_symbol(label, count)
    # labels are escaped as in the bracketed trees, and read back as they were
    for label in ("N P", "N(P", "$(", "NP-SBJ", "10%"):
        symbol = node_symbol(label, 2)
        assert parse_symbol(symbol)[1] == 2 and delinearize([symbol, "a", "b"]).nodes[0].label == label
    assert node_symbol("$(", 2) == "$%28(2)"
    # words are escaped, never read back as nodes
    tree = Tree(("f(x)", "y"), (Node("S", 0, 1),))
    assert linearize(tree) == ["S(2)", "f-LRB-x-RRB-", "y"]


@pytest.mark.parametrize("symbols, message", [
    ([], "empty"),
    (["S(2)", "a"], "incomplete"),
    (["S(2)", "NP(2)", "a", "b"], "incomplete"),
    (["S(2)", "a", "b", "c"], "after the tree is complete"),
    (["a", "b"], "after the tree is complete"),
])
def test_malformed_sequences_are_rejected(symbols, message):
    for order in TREE_ORDERS:
        with pytest.raises(TreeError, match=message):
            delinearize(symbols, order)


def test_one_child_nodes_are_collapsed():
    assert delinearize(["S(1)", "NP(2)", "a", "b"]) == Tree(("a", "b"), (Node("S", 0, 1),))
    assert delinearize(["NP(1)", "a"]) == Tree(("a",), ())


def test_bracketed_malformed_outputs_are_rejected():
    for symbols in (["(S", "a", "b"], ["(S", "a", ")", ")"], ["(S", "a", ")", "(S", "b", ")"], ["a", "b"]):
        with pytest.raises(TreeError):
            from_bracketed_symbols(symbols)


# Positions of a partial tree


@pytest.mark.parametrize("order", TREE_ORDERS)
def test_slot_positions_equal_the_whole_trees_positions(order):
    """Generated step by step, each symbol sits at the LCRS path the encoder gives its item in
    the whole tree (tree_paths); after the last symbol comes EOS's position, the root's right
    sibling. Batched over trees of different lengths, right-padded."""
    max_depth = 12
    trees = random_trees(seed=1, count=12)
    arity_of = {}
    sequences = []
    for tree in trees:
        symbols = linearize(tree, order)
        sequences.append(symbols)
        arity_of.update((s, parse_symbol(s)[1]) for s in symbols)
    vocab = ["<bos>", "<pad>", "<eos>", *sorted(arity_of)]
    arities = torch.tensor([-1, -1, -1, *(arity_of[s] for s in vocab[3:])])
    length = max(map(len, sequences)) + 1
    tokens = torch.full((len(trees), length), 1)  # pad
    tokens[:, 0] = 2  # BOS
    for row, symbols in enumerate(sequences):
        tokens[row, 1:len(symbols) + 1] = torch.tensor([vocab.index(s) for s in symbols])

    state = PartialTrees.empty(len(trees), max_depth)
    got = []
    for step in range(length):
        state = add_symbols(state, arities[tokens[:, step]], order == "breadth_first")
        got.append(next_slot_paths(state, order == "breadth_first"))
    got = torch.stack(got, dim=1)  # (B, T, k): the slot of the symbol after each input

    for row, tree in enumerate(trees):
        n, m = len(tree.leaves), len(tree.nodes)
        spans = torch.tensor([[node.start, node.end] for node in tree.nodes], dtype=torch.long).view(1, m, 2)
        node_paths, leaf_paths = tree_paths(spans, torch.zeros(1, n + 1, dtype=torch.bool),
                                            torch.zeros(1, m, dtype=torch.bool), max_depth)
        expected = [node_paths[0, i] if kind == "node" else leaf_paths[0, i]
                    for kind, i in items_in_order(tree, order)]
        expected.append(leaf_paths[0, n])  # EOS
        assert leaf_paths[0, n, 0] == NEXT_SIBLING
        assert got[row, : len(expected)].equal(torch.stack(expected))


@pytest.mark.parametrize("order", TREE_ORDERS)
def test_whole_sequence_positions_equal_the_step_function(order):
    """sequence_slot_paths (training) against add_symbols step by step (generation) on batches of
    whole trees, prefixes, trees followed by more symbols, with or without BOS, padding left,
    right and in between, and depths k that truncate or not."""
    rng = random.Random(3)
    breadth_first = order == "breadth_first"
    for trial in range(40):
        sequences = []
        for tree in random_trees(seed=100 + trial, count=6, max_words=10):
            arities = [parse_symbol(symbol)[1] for symbol in linearize(tree, order)]
            kind = rng.random()
            if kind < 0.2:
                arities = arities[: rng.randint(0, len(arities))]
            elif kind < 0.4:
                arities += [rng.choice([0, 2, 3]) for _ in range(3)]
            sequence = [-1] * (rng.randint(0, 2) if kind > 0.8 else 0) + [-1] * (rng.random() < 0.7) + arities
            for _ in range(rng.randint(0, 2)):
                sequence.insert(rng.randint(0, len(sequence)), -1)
            sequences.append(sequence)
        arity = torch.full((len(sequences), max(map(len, sequences)) + rng.randint(0, 2)), -1)
        for row, sequence in enumerate(sequences):
            arity[row, : len(sequence)] = torch.tensor(sequence)
        max_depth = rng.choice([3, 8, 40])
        state, expected = PartialTrees.empty(len(sequences), max_depth), []
        for step in range(arity.size(1)):
            state = add_symbols(state, arity[:, step], breadth_first)
            expected.append(next_slot_paths(state, breadth_first))
        assert sequence_slot_paths(arity, breadth_first, max_depth).equal(torch.stack(expected, dim=1))


def symbol_dictionary(trees: list[Tree]) -> Dictionary:
    dictionary = Dictionary()
    for symbol in sorted({s for t in trees for s in linearize(t)}):
        dictionary.add_symbol(symbol)
    return dictionary


def decoder_inputs(dictionary: Dictionary, trees: list[Tree], order: str) -> torch.Tensor:
    """fairseq's ``prev_output_tokens``: EOS as the start token, then the symbols, right-padded."""
    length = max(len(linearize(t)) for t in trees) + 1
    tokens = torch.full((len(trees), length), dictionary.pad())
    tokens[:, 0] = dictionary.eos()
    for row, tree in enumerate(trees):
        symbols = linearize(tree, order)
        tokens[row, 1:len(symbols) + 1] = torch.tensor([dictionary.index(s) for s in symbols])
    return tokens


@pytest.mark.parametrize("order", TREE_ORDERS)
def test_decoder_inputs_sit_at_the_position_of_the_symbol_they_hold(order):
    """Section 4 of the paper: the start token gets the zero encoding and every fed-back symbol
    its own position, the LCRS path the encoder gives its item in the whole tree (tree_paths);
    padding gets zero. With next_slot (the earlier form), input t sits at symbol t + 1's position
    (counting the start token as input 0 and the first symbol as symbol 1)."""
    max_depth = 10
    trees = random_trees(seed=5, count=6, max_words=9)
    dictionary = symbol_dictionary(trees)
    tokens = decoder_inputs(dictionary, trees, order)
    cfg = Namespace(tree_pe_max_depth=max_depth, tree_pe_num_weights=None, tree_order=order,
                    max_target_positions=100)
    positions = TreeSlotPositions(dictionary, 24, cfg)
    cfg.tree_pe_decoder_positions = "next_slot"
    shifted = TreeSlotPositions(dictionary, 24, cfg)
    shifted.load_state_dict(positions.state_dict())
    with torch.no_grad():
        got, got_shifted = positions(tokens), shifted(tokens)
    assert torch.all(got[:, 0] == 0)  # the start token
    for row, tree in enumerate(trees):
        n, m = len(tree.leaves), len(tree.nodes)
        spans = torch.tensor([[node.start, node.end] for node in tree.nodes], dtype=torch.long).view(1, m, 2)
        node_paths, leaf_paths = tree_paths(spans, torch.zeros(1, n + 1, dtype=torch.bool),
                                            torch.zeros(1, m, dtype=torch.bool), max_depth)
        symbol_paths = torch.stack([node_paths[0, i] if kind == "node" else leaf_paths[0, i]
                                    for kind, i in items_in_order(tree, order)])  # (n + m, k)
        with torch.no_grad():
            expected = positions.encoding(symbol_paths)
        torch.testing.assert_close(got[row, 1:n + m + 1], expected)
        torch.testing.assert_close(got_shifted[row, :n + m], expected)
        assert torch.all(got[row, 1] == 0)  # the root, the empty path
        assert torch.all(got[row, n + m + 1:] == 0)  # padding


def test_symbol_paths_are_the_slot_paths_one_step_later():
    """sequence_symbol_paths by hand on S(2) NP(2) a b c, depth first: the root, its first child,
    that child's children, then the root's second child; BOS and padding at the empty path."""
    arity = torch.tensor([[-1, 2, 2, 0, 0, 0, -1]])
    paths = sequence_symbol_paths(arity, False, 4)[0].tolist()
    empty, f, s = -1, 0, 1  # FIRST_CHILD, NEXT_SIBLING
    assert paths == [[empty] * 4, [empty] * 4, [f, empty, empty, empty], [f, f, empty, empty],
                     [s, f, f, empty], [s, f, empty, empty], [empty] * 4]
    breadth = sequence_symbol_paths(torch.tensor([[-1, 2, 2, 0, 0, 0]]), True, 4)[0].tolist()
    # S(2) NP(2) c a b: root, first child, second child, NP's first and second children
    assert breadth == [[empty] * 4, [empty] * 4, [f, empty, empty, empty], [s, f, empty, empty],
                       [f, f, empty, empty], [s, f, f, empty]]


@pytest.mark.parametrize("decoder_positions", ["symbol", "next_slot"])
def test_slot_positions_incremental_with_reorder_equal_full(decoder_positions):
    """TreeSlotPositions through an incremental state reordered like a beam, against the
    positions of the whole prefixes."""
    cfg = Namespace(tree_pe_max_depth=6, tree_pe_num_weights=None, tree_order="depth_first",
                    max_target_positions=100, tree_pe_decoder_positions=decoder_positions)
    trees = random_trees(seed=2, count=4, max_words=6)
    dictionary = symbol_dictionary(trees)
    for order in TREE_ORDERS:
        cfg.tree_order = order
        positions = TreeSlotPositions(dictionary, 16, cfg)
        tokens = decoder_inputs(dictionary, trees, order)
        full = positions(tokens)
        state, rows = {}, torch.arange(len(trees))
        for t in range(tokens.size(1)):
            if t == 2:
                new_order = torch.tensor([3, 1, 1, 0])
                positions.reorder_incremental_state(state, new_order)
                rows = rows[new_order]
            step = positions(tokens[rows, : t + 1], incremental_state=state)
            torch.testing.assert_close(step[:, 0], full[rows, t])


# Generation constraint


def test_allowed_continuations_rule():
    arities = torch.tensor([-1, -1, -1, 0, 0, 2, 3])  # <s> <pad> </s> <unk> a X(2) Y(3)
    eos = 2

    def allowed(prefix, step, max_len):
        mask = allowed_continuations(torch.tensor([[0, *prefix]]), arities, eos, step, max_len)[0]
        return set(mask.nonzero().flatten().tolist())

    assert allowed([], 0, 10) == {3, 4, 5, 6}  # one open slot, plenty of room
    assert allowed([], 0, 1) == {3, 4}  # only a leaf fits in one symbol
    assert allowed([], 0, 3) == {3, 4, 5}  # X(2) a a fits, Y(3) a a a does not
    assert allowed([5], 1, 3) == {3, 4}  # X(2): two slots, two symbols left
    assert allowed([5, 4], 2, 10) == {3, 4, 5, 6}
    assert allowed([5, 4, 3], 3, 10) == {eos}  # complete: only EOS
    assert allowed([4], 1, 10) == {eos}


def favour_big_trees(model, arities, strength=4.0):
    """Bias the model towards symbols with many children and against EOS: left alone, it would
    never finish a tree."""
    output_layer = model.decoder.output_layer
    bias = strength * arities.clamp(min=0).float() - 10 * (arities < 0).float()
    model.decoder.output_layer = lambda features: output_layer(features) + bias


@pytest.mark.parametrize("order", TREE_ORDERS)
def test_only_well_formed_trees_are_generated(parse_databin, order):
    """An untrained model, then one pushed towards ever bigger trees, under length limits from
    one symbol (a leaf is the only tree) to longer than any tree of the data."""
    task, model = build(parse_databin, "--tree-order", order, arch=ARCH, task="tree_generation")
    arities = symbol_arities(task.target_dictionary)
    sample = collate(task, by_length(task)[-5:])
    for biased in (False, True):
        if biased:
            favour_big_trees(model, arities)
        for beam, max_len_b in ((1, 1), (3, 2), (1, 7), (4, 9), (2, 24)):
            for sentence in generate_trees(task, model, sample, order, beam=beam, max_len_b=max_len_b):
                assert len(sentence) == beam
                for symbols, hypo in sentence:
                    assert hypo["tokens"][-1] == task.target_dictionary.eos()
                    assert len(symbols) <= max_len_b
                    delinearize(symbols, order).check()  # raises unless a whole tree
                    assert torch.isfinite(hypo["positional_scores"]).all()
                if biased and max_len_b >= 7:  # pushed to the length limit
                    assert max(len(symbols) for symbols, _ in sentence) >= max_len_b - 2


def test_sampling_and_unconstrained_search_are_wrapped_too(parser_model):
    task, model = parser_model
    sample = collate(task, by_length(task)[-6:])
    torch.manual_seed(0)
    order = model.cfg.tree_order
    for symbols, _ in (h for s in generate_trees(task, model, sample, order, beam=2, sampling=True,
                                                  sampling_topk=-1) for h in s):
        delinearize(symbols, order).check()


def test_generation_without_the_task_can_emit_broken_trees(parse_databin):
    """The constraint is the task's: fairseq's plain generator stops wherever the model says."""
    task, model = build(parse_databin, arch=ARCH, task="tree_generation")
    arities = symbol_arities(task.target_dictionary)
    favour_big_trees(model, arities)
    sample = collate(task, by_length(task)[-4:])
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=2, max_len_a=0, max_len_b=6)
    with torch.no_grad():
        hypos = generator.generate([model], sample)
    broken = 0
    for sentence in hypos:
        for hypo in sentence:
            try:
                delinearize(task.target_dictionary.string(hypo["tokens"]).split())
            except TreeError:
                broken += 1
    assert broken > 0


# The model


def test_options_and_architecture(parse_databin):
    parser = options.get_training_parser()
    TreePEParserModel.add_args(parser)
    text = parser.format_help()
    assert "--tree-order" in text and "--tree-pe-max-depth" in text and "--tree-pe-decoder-positions" in text
    args = parse(parse_databin, arch=ARCH, task="tree_generation")
    assert (args.tree_order, args.tree_pe_max_depth, args.encoder_embed_dim, args.decoder_layers) == (
        "depth_first", 32, 32, 2)
    assert args.tree_pe_decoder_positions == "symbol"
    assert parse(parse_databin, "--tree-pe-decoder-positions", "next_slot", arch=ARCH,
                 task="tree_generation").tree_pe_decoder_positions == "next_slot"
    with pytest.raises(SystemExit):
        parse(parse_databin, "--tree-order", "sideways", arch=ARCH, task="tree_generation")


def test_paper_architecture(parse_databin):
    """Section 5.2's sequence-to-tree transformer: 4 + 4 layers, d_model 256, d_ff 1024, the
    decoder's tree positions of d_pos = 2048 projected to 256, depth first."""
    args = parse(parse_databin, arch="tree_pe_parser_paper", task="tree_generation")
    got = (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_layers, args.decoder_embed_dim,
           args.decoder_ffn_embed_dim, args.decoder_layers, args.dropout, args.tree_order)
    assert got == (256, 1024, 4, 256, 1024, 4, 0.1, "depth_first")
    assert (args.tree_pe_max_depth, args.tree_pe_num_weights, args.tree_pe_scale,
            args.tree_pe_decoder_positions) == (32, 32, "paper", "symbol")
    _, model = build(parse_databin, arch="tree_pe_parser_paper", task="tree_generation")
    encoding = model.decoder.embed_positions.encoding
    assert encoding.num_weights * encoding.max_depth * encoding.degree == 2048
    assert (encoding.projection.in_features, encoding.projection.out_features) == (2048, 256)
    assert len(model.decoder.layers) == 4 and model.decoder.layers[0].fc1.out_features == 1024


def test_incremental_decoding_matches_full_forward(parser_model):
    task, model = parser_model
    check_incremental_decoding(task, model, by_length(task)[10:13])


def test_generation_is_batch_invariant(parser_model):
    task, model = parser_model
    order = by_length(task)
    for index in order[1:3]:
        alone = generate_trees(task, model, collate(task, [index]), model.cfg.tree_order)[0]
        batch = collate(task, [index, *order[-3:]])
        batched = generate_trees(task, model, batch, model.cfg.tree_order)[row_of(batch, index)]
        assert [s for s, _ in alone] == [s for s, _ in batched]
        for (_, hypo_alone), (_, hypo_batched) in zip(alone, batched):
            torch.testing.assert_close(hypo_alone["positional_scores"], hypo_batched["positional_scores"],
                                       atol=1e-5, rtol=0)


@pytest.mark.slow
def test_fairseq_train_and_generate(parse_databin, tmp_path):
    stdout = train_and_generate(parse_databin, tmp_path, ARCH, "--tree-order", "depth_first",
                                task="tree_generation")
    hypotheses = re.findall(r"^H-(\d+)\t\S+\t(.*)$", stdout, flags=re.M)
    assert sorted(int(i) for i, _ in hypotheses) == list(range(24))
    for _, text in hypotheses:
        delinearize(text.split(), "depth_first").check()


def test_tree_tasks_refuse_a_target_dictionary_of_text(plain_databin, tiny_databin, parse_databin):
    """Text targets (no LABEL(k) symbol: every symbol a leaf, a whole tree) were decoded one token a
    sentence; tree_generation and tree_to_tree refuse them at setup, naming the dictionary."""
    from fairseq.tasks.translation import TranslationConfig

    from tree_fairseq.tasks import TreeGenerationTask, TreeToTreeConfig, TreeToTreeTask

    for task, config, databin in ((TreeGenerationTask, TranslationConfig, plain_databin),
                                  (TreeToTreeTask, TreeToTreeConfig, tiny_databin)):
        cfg = config(data=str(databin), source_lang="de", target_lang="en", dataset_impl="mmap")
        with pytest.raises(ValueError, match=rf"^--task \w+: the target dictionary {re.escape(str(databin))}/dict\.en"
                                             r"\.txt holds no LABEL\(k\) symbol .*: its targets are text"):
            task.setup_task(cfg)
    cfg = TranslationConfig(data=str(parse_databin), source_lang="words", target_lang="tree", dataset_impl="mmap")
    assert int((symbol_arities(TreeGenerationTask.setup_task(cfg).target_dictionary) > 0).sum()) > 1


def test_tree_decoders_refuse_a_task_that_does_not_generate_trees(parse_databin, tiny_databin):
    """A tree decoder under --task translation (tree_translation for tree to tree) read its targets as
    trees and searched without the tree constraint: refused when the model is built."""
    with pytest.raises(ValueError, match=r"^--arch tree_pe_parser_tiny decodes linearised trees: use --task "
                                         r"tree_generation, not TranslationTask$"):
        build(parse_databin, arch="tree_pe_parser_tiny", task="translation")
    with pytest.raises(ValueError, match=r"^--arch tree_pe_tree2tree_tiny decodes linearised trees: use --task "
                                         r"tree_to_tree, not TreeTranslationTask$"):
        build(tiny_databin, arch="tree_pe_tree2tree_tiny", task="tree_translation")
