"""trees/: reading, normal form, alignment, subword subtrees, trivial trees, tensors."""

import random
import re

import pytest
import torch

from conftest import shared_data
from tree_fairseq.trees import (
    Node, Tree, TreeError, align, canonical, dictionary_subword_format, expand_subwords, group_pieces, node_tensors,
    parse_tree, read_bracketed, spelling, subword_marks, tree_over_tokens, trivial_tree,
)


def spans(tree):
    return [(node.label, node.start, node.end) for node in tree.nodes]


PTB_LINE = ("( (S (NP-SBJ-1 (NNP Mr.) (NNP Vinken) ) (VP (VBZ is) (VP (VBN named) (S (NP-SBJ (-NONE- *-1) ) "
            "(NP-PRD (NP (NN chairman) ) (PP (IN of) (NP (NNP Elsevier) (-LRB- -LRB-) (NNP N.V.) (-RRB- -RRB-) )))))) (. .) ))")


def test_ptb_line_reads_to_the_normal_form():
    tree = parse_tree(PTB_LINE)
    assert tree.leaves == ("Mr.", "Vinken", "is", "named", "chairman", "of", "Elsevier", "-LRB-", "N.V.",
                           "-RRB-", ".")
    # traces gone, tags stripped, the unary chain S > NP-PRD left by the trace collapsed to one
    # node per span (the upper label), preterminals and one-word NPs dropped, bottom-up order.
    assert spans(tree) == [("NP", 0, 1), ("NP", 6, 9), ("PP", 5, 9), ("S", 4, 9), ("VP", 3, 9),
                           ("VP", 2, 9), ("S", 0, 10)]
    tree.check()


def test_stanza_style_root_and_several_trees_on_a_line():
    assert spans(parse_tree("(ROOT (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))")) == [
        ("NP", 0, 1), ("S", 0, 3)]
    # a multi-sentence line gets an explicit root over its trees
    assert spans(parse_tree("(ROOT (S (NP a) (VP b c))) (ROOT (S d e))")) == [
        ("VP", 1, 2), ("S", 0, 2), ("S", 3, 4), ("ROOT", 0, 4)]


def test_unary_chain_keeps_the_uppermost_real_label():
    assert spans(parse_tree("( (S (VP (VB go) (ADVP (RB now)))) )")) == [("S", 0, 1)]
    assert spans(parse_tree("(TOP (NP (NP a b)))")) == [("NP", 0, 1)]


@pytest.mark.parametrize("line, message", [
    ("", "empty line"),
    ("   \n", "empty line"),
    ("null", "not a bracketed tree"),
    ("(S (NP a b)", "unbalanced brackets"),
    ("(S a b))", "unbalanced brackets"),
    ("(S a) b", "text outside brackets"),
    ("(S (NP) a)", "empty bracket pair"),
    ("(S (-NONE- *T*-1))", "no words"),
])
def test_unreadable_lines_raise_tree_errors(line, message):
    with pytest.raises(TreeError, match=message):
        parse_tree(line)


def random_tree(rng, n):
    """A random tree with 2-4 children per node over leaves w0..w{n-1}."""
    def build(start, end):
        if end == start:
            return f"w{start}"
        cuts = sorted(rng.sample(range(start + 1, end + 1), min(rng.randint(1, 3), end - start)))
        bounds = [start] + cuts + [end + 1]
        return "(" + rng.choice("SNV") + " " + " ".join(build(a, b - 1) for a, b in zip(bounds, bounds[1:])) + ")"
    return build(0, n - 1)


def test_bracketed_output_reads_back_to_the_same_tree():
    rng = random.Random(0)
    for _ in range(200):
        tree = parse_tree("(S " + random_tree(rng, rng.randint(1, 30)) + ")")
        tree.check()
        assert parse_tree(tree.to_bracketed()) == tree
    with_brackets = Tree(("(", "a", ")"), (Node("X", 0, 2),))
    assert with_brackets.to_bracketed() == "(X -LRB- a -RRB-)"


def test_check_finds_broken_trees():
    for nodes in [(Node("X", 0, 1), Node("Y", 0, 1), Node("R", 0, 2)),  # shared span
                  (Node("X", 0, 1), Node("Y", 1, 2), Node("R", 0, 2)),  # crossing
                  (Node("X", 0, 1),),  # no root
                  (Node("X", 1, 1), Node("R", 0, 2))]:  # one-leaf node
        with pytest.raises(TreeError):
            Tree(("a", "b", "c"), nodes).check()


def test_alignment_undoes_moses_and_ptb_escapes_and_case():
    tree = parse_tree("(S (NP (PRP It)) (VP (VBZ 's) (`` ``) (-LRB- -LRB-) (NN OK) (-RRB- -RRB-) ('' '') (CC &) (NN co)))")
    tokens = "it &apos;s &quot; ( ok ) &quot; &amp; co".split()
    aligned = align(tree, tokens)
    assert aligned.leaves == tuple(tokens)
    assert spans(aligned) == [("VP", 1, 8), ("S", 0, 8)]
    assert canonical("&#91;") == "[" and canonical("-LCB-") == "{" and canonical("\u201cHi") == '"hi'


def test_alignment_moves_spans_when_the_parser_split_or_merged_tokens():
    split = align(parse_tree("(S (NP (PRP I)) (VP (VBP do) (RB n't) (VB go)))"), "i don&apos;t go".split())
    assert spans(split) == [("VP", 1, 2), ("S", 0, 2)]
    merged = align(parse_tree("(S (NP (PRP I)) (VP (VBP don't) (VB go)))"), "i do n&apos;t go".split())
    assert spans(merged) == [("VP", 1, 3), ("S", 0, 3)]
    merged.check()


def test_alignment_failure_names_the_first_difference():
    with pytest.raises(TreeError, match="leaf 2 is 'dog' but token 2 is 'cat'"):
        align(parse_tree("(S (NP the dog) (VP barks))"), "the cat barks".split())
    with pytest.raises(TreeError, match="3 leaves but 2 tokens"):
        align(parse_tree("(S (NP the dog) (VP barks))"), "the dog".split())


def test_messages_name_invisible_characters_by_code_point():
    with pytest.raises(TreeError, match=r"leaf 2 is 'dog<U\+200B>s' but token 2 is 'dogs'"):
        align(parse_tree("(S (NP the dog\u200bs) (VP bark))"), "the dogs bark".split())
    with pytest.raises(TreeError, match=r"text outside brackets: 'b<U\+00AD>c'"):
        read_bracketed("(S a) b\u00adc")
    with pytest.raises(TreeError, match=r"word 2 is 'do<U\+FEFF>gs' in the pieces but 'dogs' in the tree"):
        expand_subwords(parse_tree("(S the dogs)"), "the do\ufeff@@ gs".split(), "subword_nmt")


def test_subword_nmt_pieces_become_subtrees():
    tree = parse_tree("(S (NP the doghouse) (VP barks))")
    pieces = "the dog@@ hou@@ se bar@@ ks".split()
    assert group_pieces(pieces, "subword_nmt") == [("the", 0, 0), ("doghouse", 1, 3), ("barks", 4, 5)]
    expanded = expand_subwords(tree, pieces, "subword_nmt")
    assert expanded.leaves == tuple(pieces)
    assert spans(expanded) == [("@BPE", 1, 3), ("NP", 0, 3), ("@BPE", 4, 5), ("S", 0, 5)]
    expanded.check()
    assert spans(expand_subwords(parse_tree("(ROOT word)"), ["wo@@", "rd"], "subword_nmt")) == [("@BPE", 0, 1)]
    assert spans(expand_subwords(parse_tree("(NN word)"), ["wo@@", "rd"], "subword_nmt")) == [("NN", 0, 1)]


def test_sentencepiece_pieces_become_subtrees():
    tree = parse_tree("(S (NP the doghouse) (VP barks ,))")
    pieces = "\u2581the \u2581dog house \u2581barks \u2581 ,".split()
    expanded = expand_subwords(tree, pieces, "sentencepiece")
    assert spans(expanded) == [("@BPE", 1, 2), ("NP", 0, 2), ("@BPE", 4, 5), ("VP", 3, 5), ("S", 0, 5)]


def test_a_dictionary_tells_its_subword_format():
    # The task and the path-length analysis read a data-bin's format from its dictionary alone.
    assert dictionary_subword_format(["the", "dog@@", "se"]) == "subword_nmt"
    assert dictionary_subword_format(["\u2581the", "house", "\u2581"]) == "sentencepiece"
    assert dictionary_subword_format(["the", "house"]) == "subword_nmt"  # words: either format reads them alike
    assert dictionary_subword_format([]) == "subword_nmt"


def test_the_marks_a_text_still_holds_are_named():
    # What score, compare and publish_results refuse in a translation or a source of words.
    assert subword_marks("the ca@@ t sat .") == "subword-nmt's '@@ ' joins"
    assert subword_marks("\u2581the \u2581cat") == "sentencepiece's \u2581 pieces"
    assert subword_marks("the cat sat .") is None
    assert subword_marks("e-mail to a@@") is None  # no join: a last piece's mark is not followed by a space
    assert spelling("the ca@@ t sat .") == spelling("\u2581the \u2581ca t \u2581sat \u2581.") == "thecatsat."
    assert spelling("the cat") != spelling("the cats")


def test_pieces_that_do_not_spell_the_leaves_are_an_error():
    with pytest.raises(TreeError, match="word 2 is 'dogs' in the pieces but 'dog' in the tree"):
        expand_subwords(parse_tree("(S the dog)"), "the do@@ gs".split(), "subword_nmt")


# Part-of-speech tags: the label of the node over a word's BPE pieces (appendix 7.4, Figure 7)


def test_preterminals_are_kept_as_the_tags_of_the_leaves():
    tree = parse_tree(PTB_LINE)
    # the trace's -NONE- is gone with its word; function tags would be stripped as for nodes
    assert tree.tags == ("NNP", "NNP", "VBZ", "VBN", "NN", "IN", "NNP", "-LRB-", "NNP", "-RRB-", ".")
    tree.check()
    # a unary chain over a word: the label right above the word is its tag
    assert parse_tree("(ROOT (S (NP (PRP He)) (VP (VBZ is))))").tags == ("PRP", "VBZ")
    assert parse_tree("(ROOT (NN word))").tags == ("NN",)
    # no tags unless every word has its own preterminal; a wrapper over one word is not one
    assert parse_tree("(S (NP the cat) (VP sat))").tags is None
    assert parse_tree("(S (NP (DT the) cat) (VBD sat))").tags is None
    assert parse_tree("(ROOT word)").tags is None
    assert trivial_tree(list("abc"), "balanced").tags is None


def test_tags_are_written_and_read_back():
    line = "(ROOT (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))"
    tree = parse_tree(line)
    assert tree.to_bracketed() == "(S (NP (DT The) (NN cat)) (VBD sat) (. .))"
    assert parse_tree(tree.to_bracketed()).tags == tree.tags == ("DT", "NN", "VBD", ".")
    assert tree.to_bracketed(tags=False) == "(S (NP The cat) sat .)"
    assert parse_tree("(NN cat)").to_bracketed() == "(ROOT (NN cat))"
    # tags are an annotation of the leaves, not part of the tree's identity
    assert parse_tree(tree.to_bracketed(tags=False)) == tree
    with pytest.raises(TreeError, match="tags"):
        Tree(("a", "b"), (Node("X", 0, 1),), ("DT",)).check()


# Every label and tag the writer emits, whatever its characters, reads back as it was: a bracket,
# whitespace, '%', or a '-' or '=' the reader would cut as a function tag is percent-escaped.
ODD_LABELS = {
    "bracket": ["$(", "$)", "N)P", "(", "-("], "space": ["NN SBJ", " "], "tab": ["a\tb"],
    "other whitespace": ["x\u00a0y", "u\x1fv", "\u3000", "a\u2028b"], "dollar": ["$.", "$,", "PRP$", "$"],
    "percent": ["%", "10%", "%41", "%zz"], "function-tag marks": ["NP-SBJ", "A=B", "=", "-", "名詞-普通名詞-一般"],
    "unicode": ["ÄÖÜ", "名詞", "ПРИЛ", "\U0001F600"], "PTB names": ["-LRB-", "-NONE-x"],
}


@pytest.mark.parametrize("kind", sorted(ODD_LABELS))
def test_labels_and_tags_of_every_character_class_survive_writing_and_reading(kind):
    labels = ODD_LABELS[kind]
    words = [f"w{i}" for i in range(len(labels) + 1)]
    nodes = [Node(label, 0, k + 1) for k, label in enumerate(labels)]
    tree = Tree(tuple(words), tuple(nodes), tuple(labels) + ("NN",))
    tree.check()
    line = tree.to_bracketed()
    assert len(read_bracketed(line)) == 1
    read = parse_tree(line)
    assert read == tree and [node.label for node in read.nodes] == [node.label for node in tree.nodes]
    assert read.tags == tree.tags
    assert parse_tree(read.to_bracketed()).tags == tree.tags


def test_label_escapes_by_example():
    tree = Tree(("(", "ja", ")"), (Node("NN SBJ", 0, 2),), ("$(", "NP-SBJ", "10%"))
    assert tree.to_bracketed() == "(NN%20SBJ ($%28 -LRB-) (NP%2DSBJ ja) (10%25 -RRB-))"
    # what needs no escape is written as it is, so other tools' trees and ours read the same
    plain = parse_tree("(S (NP (PRP$ his) (NN cat)) (-LRB- -LRB-) ($. .))")
    assert plain.to_bracketed() == "(S (NP (PRP$ his) (NN cat)) (-LRB- -LRB-) ($. .))"
    # another treebank's function tags are still cut; a '%' that escapes nothing stays
    assert parse_tree("(S-TPC (NP-SBJ (%x a) (NN b)) (VB c))").to_bracketed() == "(S (NP (%25x a) (NN b)) (VB c))"


def test_alignment_carries_the_tags():
    tree = parse_tree("(S (NP (PRP It)) (VP (VBZ 's) (JJ OK)))")
    assert align(tree, "it &apos;s ok".split()).tags == ("PRP", "VBZ", "JJ")
    # a token of several leaves gets the tag of the first; a leaf over several tokens gives each its tag
    split = align(parse_tree("(S (NP (PRP I)) (VP (VBP do) (RB n't) (VB go)))"), "i don&apos;t go".split())
    assert split.tags == ("PRP", "VBP", "VB")
    merged = align(parse_tree("(S (NP (PRP I)) (VP (VBP don't) (VB go)))"), "i do n&apos;t go".split())
    assert merged.tags == ("PRP", "VBP", "VBP", "VB")
    assert align(parse_tree("(S (NP I) (VP do n't go))"), "i don&apos;t go".split()).tags is None


def subword_nodes_by_hand(tree, pieces):
    """Appendix 7.4 directly: walk the pieces, and for every word of k >= 2 pieces a node over
    them labelled with the word's preterminal, ``@BPE`` without one."""
    nodes, word, start = [], 0, 0
    for i, piece in enumerate(pieces):
        if not piece.endswith("@@"):
            if i > start:
                nodes.append((tree.tags[word] if tree.tags else "@BPE", start, i))
            word, start = word + 1, i + 1
    return nodes


def test_word_of_several_pieces_gets_a_node_labelled_with_its_tag():
    tree = parse_tree("(ROOT (S (NP (DT The) (NN doghouse)) (VP (VBZ stands) (ADVP (RB still))) (. .)))")
    pieces = "The dog@@ hou@@ se st@@ ands still .".split()
    expanded = expand_subwords(tree, pieces, "subword_nmt")
    expanded.check()
    assert [(label, s, e) for label, s, e in spans(expanded) if label not in ("NP", "VP", "S")] == \
        subword_nodes_by_hand(tree, pieces) == [("NN", 1, 3), ("VBZ", 4, 5)]
    # the phrase nodes move to the pieces; the node over the three pieces of "doghouse" is an NN
    assert spans(expanded) == [("NN", 1, 3), ("NP", 0, 3), ("VBZ", 4, 5), ("VP", 4, 6), ("S", 0, 7)]
    # the old labelling, as an option
    assert [label for label, _, _ in spans(expand_subwords(tree, pieces, "subword_nmt", "bpe"))] == \
        ["@BPE", "NP", "@BPE", "VP", "S"]
    # trees without tags (trivial trees, bracketed trees without preterminals) keep @BPE
    words = "The doghouse stands still .".split()
    for untagged in (trivial_tree(words, "balanced"), parse_tree("(S (NP The doghouse) (VP stands still) .)")):
        labels = [(label, s, e) for label, s, e in spans(expand_subwords(untagged, pieces, "subword_nmt"))]
        assert [x for x in labels if x[0] == "@BPE"] == subword_nodes_by_hand(untagged, pieces) == [
            ("@BPE", 1, 3), ("@BPE", 4, 5)]
    with pytest.raises(ValueError, match="unknown subword label"):
        expand_subwords(tree, pieces, "subword_nmt", "word")


def test_random_tagged_trees_get_one_tagged_node_per_split_word():
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 12)
        tags = [rng.choice(["NN", "VB", "JJ", "DT"]) for _ in range(n)]
        # every word w{j}xyz under its tag
        line = re.sub(r"\bw(\d+)\b", lambda m: f"({tags[int(m[1])]} w{m[1]}xyz)", random_tree(rng, n))
        tree = parse_tree("(ROOT " + line + ")")
        assert tree.tags == tuple(tags)
        pieces = []
        for word in tree.leaves:
            cuts = sorted(rng.sample(range(1, len(word)), rng.choice([0, 0, 1, 2, 3])))
            parts = [word[a:b] for a, b in zip([0] + cuts, cuts + [len(word)])]
            pieces += [part + "@@" for part in parts[:-1]] + parts[-1:]
        expanded = expand_subwords(tree, pieces, "subword_nmt")
        expanded.check()
        assert sorted(node for node in spans(expanded) if node[0] in tags) == sorted(
            subword_nodes_by_hand(tree, pieces))


@pytest.mark.parametrize("shape, expected", [
    ("balanced", [(0, 1), (0, 2), (3, 4), (0, 4)]),
    ("left", [(0, 1), (0, 2), (0, 3), (0, 4)]),
    ("right", [(3, 4), (2, 4), (1, 4), (0, 4)]),
])
def test_trivial_trees(shape, expected):
    tree = trivial_tree(list("abcde"), shape)
    assert [(node.start, node.end) for node in tree.nodes] == expected
    tree.check()
    assert trivial_tree(["a"], shape).nodes == ()


def test_node_tensors():
    tree = parse_tree("(S (NP a b) (VP c d))")
    labels, node_spans = node_tensors(tree, {"NP": 5, "VP": 6, "S": 7}.__getitem__)
    assert labels.tolist() == [5, 6, 7]
    assert node_spans.tolist() == [[0, 1], [2, 3], [0, 3]]
    labels, node_spans = node_tensors(parse_tree("(X a)"), len)
    assert labels.shape == (0,) and node_spans.shape == (0, 2) and node_spans.dtype == torch.long


def test_all_ptb_sample_trees_normalise():
    path = shared_data("ptb-sample") / "wsj_0001-0199.mrg.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3914
    for number, line in enumerate(lines, start=1):
        raw = read_bracketed(line)
        words = [w for t in raw for w in _words_without_traces(t)]
        tree = parse_tree(line)
        assert list(tree.leaves) == words, f"line {number}"
        tree.check()
        assert all(node.width >= 2 for node in tree.nodes)
        assert len(tree.nodes) <= len(tree.leaves) - 1


def _words_without_traces(raw):
    if raw.is_word:
        return [raw.label]
    if raw.label == "-NONE-":
        return []
    return [w for child in raw.children for w in _words_without_traces(child)]


# A parser's multi-word tokens (CoNLL-U's 3-4 zum over 3 zu, 4 dem)


def _tree(leaves, nodes):
    return Tree(tuple(leaves), tuple(Node(label, s, e) for label, s, e in nodes))


def test_tree_over_tokens_one_word_each_keeps_the_tree():
    tree = _tree("Er geht nach Hause .".split(), [("PP", 2, 3), ("VP", 1, 3), ("S", 0, 4)])
    assert tree_over_tokens(tree, list(tree.leaves), [[leaf] for leaf in tree.leaves]) == tree


def test_tree_over_tokens_collapses_an_expanded_token():
    # zum -> zu dem; the NP over "dem Bahnhof" keeps only Bahnhof and vanishes.
    tree = _tree("Er geht zu dem Bahnhof .".split(),
                 [("NP", 3, 4), ("PP", 2, 4), ("VP", 1, 4), ("S", 0, 5)])
    over_tokens = tree_over_tokens(tree, "Er geht zum Bahnhof .".split(),
                                   [["Er"], ["geht"], ["zu", "dem"], ["Bahnhof"], ["."]])
    over_tokens.check()
    assert over_tokens.leaves == ("Er", "geht", "zum", "Bahnhof", ".")
    assert spans(over_tokens) == [("PP", 2, 3), ("VP", 1, 3), ("S", 0, 4)]


def test_tree_over_tokens_merges_equal_spans_under_the_upper_label():
    # Tokens ab, c, d, ef; XP covers b c d e and YP c d: both become tokens 1-2.
    tree = _tree("a b c d e f".split(), [("YP", 2, 3), ("XP", 1, 4), ("S", 0, 5)])
    over_tokens = tree_over_tokens(tree, ["ab", "c", "d", "ef"],
                                   [["a", "b"], ["c"], ["d"], ["e", "f"]])
    over_tokens.check()
    assert spans(over_tokens) == [("XP", 1, 2), ("S", 0, 3)]


def test_tree_over_tokens_never_crosses():
    # The words of one token in two sibling constituents: neither keeps two tokens.
    tree = _tree("a zu dem b".split(), [("A", 0, 1), ("B", 2, 3), ("S", 0, 3)])
    over_tokens = tree_over_tokens(tree, ["a", "zum", "b"], [["a"], ["zu", "dem"], ["b"]])
    over_tokens.check()
    assert spans(over_tokens) == [("S", 0, 2)]


def test_tree_over_tokens_rejects_leaves_that_are_not_the_words():
    tree = _tree("a b c".split(), [("S", 0, 2)])
    with pytest.raises(TreeError, match="leaves 'a b c' are not the words 'a b x c'"):
        tree_over_tokens(tree, ["a", "bx", "c"], [["a"], ["b", "x"], ["c"]])
