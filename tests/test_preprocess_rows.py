"""tree-fairseq-preprocess's shortcut for the common tree line (tree_fairseq.trees.rows) gives the
nodes the long way (read, normalise, align, expand subwords) gives, on trees of every kind a parser
or treebank writes; and the data-bin is byte for byte the one the long way wrote for every line
(digests taken before the shortcut existed), with one worker or several."""

import hashlib
import random
from pathlib import Path

import pytest

from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.trees import align, expand_subwords, group_pieces, parse_tree
from tree_fairseq.trees.bracketed import TreeError
from tree_fairseq.trees.parents import format_heads, piece_parent_spans, random_projective_heads, read_heads
from tree_fairseq.trees.rows import parent_rows, piece_rows, quick_tree
from tree_fairseq.trees.subwords import check_labels

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "&apos;s", "é"]
TAGS = ["NN", "VBZ", "DT", "PRP$", "$.", "$%28", "NN-SBJ", "-LRB-", "NE=2", "IN"]
PHRASES = ["NP", "VP", "S", "NP-SBJ-1", "PP=2", "SBAR", "-LRB-", "X%20Y", "ROOT", "TOP", ""]


def _subtree(rng, words, tagged):
    """Bracketed subtree over ``words``: preterminals (or bare words when not ``tagged``), phrases
    of 2-3 children, unary chains, wrapper and empty labels, now and then a ``-NONE-`` trace."""
    if len(words) == 1:
        word = words[0]
        return f"({rng.choice(TAGS)} {word})" if tagged else word
    cuts = sorted(rng.sample(range(1, len(words)), min(len(words) - 1, rng.randint(1, 2))))
    children = [_subtree(rng, words[a:b], tagged) for a, b in zip([0] + cuts, cuts + [len(words)])]
    if rng.random() < 0.05:
        children.insert(rng.randint(0, len(children)), "(-NONE- *T*-1)")
    label = rng.choice(PHRASES)
    if not label and not children[0].startswith("("):
        label = "NP"  # "( word ...": the word would be read as the label
    text = f"({label} {' '.join(children)})"
    while rng.random() < 0.2:
        text = f"({rng.choice(PHRASES)} {text})"
    return text


def varied_line(rng):
    """(BPE'd source, target, tree, heads) of one sentence; the tree is of one of the shapes
    tree-fairseq-preprocess is given."""
    words = ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(rng.randint(1, 9))]
    if rng.random() < 0.1:
        words.insert(rng.randint(0, len(words)), "(")
    leaves = ["-LRB-" if word == "(" else word for word in words]
    tagged = rng.random() < 0.85
    shape = rng.random()
    if shape < 0.05 and len(words) >= 2:  # two trees on one line
        cut = rng.randint(1, len(words) - 1)
        parts = (_subtree(rng, leaves[:cut], tagged), _subtree(rng, leaves[cut:], tagged))
        tree = " ".join(part if part.startswith("(") else f"(NN {part})" for part in parts)
    else:
        tree = _subtree(rng, leaves, tagged)
        if not tree.startswith("("):
            tree = f"(S {tree})"
        if shape < 0.3:
            tree = f"(ROOT {tree})"
        elif shape < 0.4:
            tree = f"( {tree} )"
    pieces = []
    for word in words:
        parts = [word[i:i + 2] for i in range(0, len(word), 2)] if rng.random() < 0.7 else [word]
        pieces += [part + "@@" for part in parts[:-1]] + parts[-1:]
    heads = random_projective_heads(len(words), rng)
    return " ".join(pieces), " ".join(reversed(words)), tree, format_heads(heads)


def long_way(tree_line, pieces, subword_label):
    tree = parse_tree(tree_line)
    check_labels(tree)
    words = [word for word, _, _ in group_pieces(pieces, "subword_nmt")]
    tree = expand_subwords(align(tree, words, False), pieces, "subword_nmt", subword_label)
    return [node.label for node in tree.nodes], [index for node in tree.nodes for index in (node.start, node.end)]


@pytest.mark.parametrize("subword_label", ["pos", "bpe"])
def test_the_shortcut_gives_the_long_ways_nodes(subword_label):
    rng = random.Random(5)
    taken = refused = 0
    for _ in range(3000):
        text, _, tree, _ = varied_line(rng)
        # Spaces wherever a bracketed reader allows them, or none between brackets.
        for tree_line in (tree, tree.replace(" ", " \t "), tree.replace(") (", ")("), tree.replace("(", "( "),
                          f" {tree}\n"):
            rows = piece_rows(tree_line, text.split(), "subword_nmt", subword_label)
            if rows is None:
                refused += 1
                continue
            taken += 1
            assert rows == tuple(long_way(tree_line, text.split(), subword_label)), (tree_line, text)
    # Both ways are exercised: most lines take the shortcut, traces, two trees and bare words do not.
    assert taken > 5 * 1500 and refused > 5 * 300


@pytest.mark.parametrize("line, pieces, expected", [
    # the last piece ends its word even when it ends in @@
    ("(S (NN ab) (NN cd))", ["ab", "cd@@"], (["S"], [0, 1])),
    ("(S (NN ab) (NN cd))", ["a@@", "b", "c@@", "d@@"], (["NN", "NN", "S"], [0, 1, 2, 3, 0, 3])),
    # one word split in two: the node over its pieces carries its tag
    ("(NN abcd)", ["ab@@", "cd"], (["NN"], [0, 1])),
    ("(S (VP (NP-SBJ (NN a) (NN b))))", ["a", "b"], (["S"], [0, 1])),
    ("(TOP (S (NN a) (NN b)))", ["a", "b"], (["S"], [0, 1])),
    ("( (NN a) (NN b))", ["a", "b"], (["ROOT"], [0, 1])),
    ("(S (-LRB- -LRB-) (NN b))", ["(", "b"], (["S"], [0, 1])),
])
def test_the_shortcut_on_lines_by_hand(line, pieces, expected):
    assert piece_rows(line, pieces, "subword_nmt", "pos") == expected
    assert tuple(long_way(line, pieces, "pos")) == expected


@pytest.mark.parametrize("line", [
    "", "NN a", "(S (NN a) (NN b)) (S (NN c))", "(S (NN a) (-NONE- *T*) (NN b))", "(S (NN a) b)",
    "(S (NN a) (NN b)", "(S (NN a) (NN b)))", "(S (NN a) ())", "(S (NN a) (NN))", "(S (<unk> a) (NN b))",
    "(@BPE (NN a) (NN b))", "(S (ROOT a) (NN b))", "(S (NN a) (NN b)) c", "(NN a) (NN b)", "a (S (NN a) (NN b))",
    "(S (NN a) (X (Y b) c))", "(S (NN a) (NN b c))", "(S (NN a) (NN b) ( ))", ")(S (NN a) (NN b))",
])
def test_lines_the_shortcut_leaves_to_the_long_way(line):
    assert piece_rows(line, ["a", "b"], "subword_nmt", "pos") is None


def test_other_words_leave_the_shortcut():
    assert piece_rows("(S (NN a) (NN b))", ["a", "c"], "subword_nmt", "pos") is None
    assert piece_rows("(S (NN a) (NN b))", ["a", "b", "c"], "subword_nmt", "pos") is None
    assert quick_tree("(S (NN A) (NN b))") == (["A", "b"], ["NN", "NN"], {(0, 1): "S"})


def write_varied_corpus(directory: Path, with_heads: bool = True) -> Path:
    """train/valid/test of :func:`varied_line` sentences (valid also holds a label train has not)."""
    rng = random.Random(2026)
    for split, size in (("train", 300), ("valid", 40), ("test", 40)):
        rows = [varied_line(rng) for _ in range(size)]
        if split == "valid":
            text, target, _, heads = rows[0]
            words = [word for word, _, _ in group_pieces(text.split(), "subword_nmt")]
            leaves = " ".join(f"(NN {'-LRB-' if word == '(' else word})" for word in words)
            rows[0] = (text, target, f"(UNSEEN {leaves})", heads)
        for k, suffix in enumerate(("de", "en", "tree.de", "heads.de")):
            if suffix == "heads.de" and not with_heads:
                continue
            (directory / f"{split}.{suffix}").write_text("".join(row[k] + "\n" for row in rows), encoding="utf-8")
    return directory


def databin_digests(destdir: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()[:16] for path in sorted(destdir.iterdir())}


def binarise(corpus: Path, destdir: Path, *extra: str) -> dict[str, str]:
    preprocess_cli.main([
        "--source-lang", "de", "--target-lang", "en", "--trainpref", str(corpus / "train"),
        "--validpref", str(corpus / "valid"), "--testpref", str(corpus / "test"),
        "--destdir", str(destdir), "--joined-dictionary", *extra,
    ])
    return databin_digests(destdir)


# SHA-256 (first 16 hex digits) of each file of the varied corpus's data-bin, as tree-fairseq-preprocess wrote
# them before the shortcut (every line the long way); preprocess.log, which names the run's folders, aside.
DIGESTS = {
    "dict.de.nodes.txt": "1f5d570c1d69845b",
    "dict.de.txt": "1fe0aba23329d619",
    "dict.en.txt": "1fe0aba23329d619",
    "parser.de.json": "a4f04a831378ed4e",
    "test.de-en.de.bin": "adca02bee6f90e5b",
    "test.de-en.de.idx": "75384dd1ee8a8d84",
    "test.de-en.de.nodes.bin": "d9ca88962fa3df0a",
    "test.de-en.de.nodes.idx": "107e389461622b67",
    "test.de-en.de.parents.bin": "4afa9c81459c7d37",
    "test.de-en.de.parents.idx": "3dc297347e833506",
    "test.de-en.de.spans.bin": "0310b71927a37d2e",
    "test.de-en.de.spans.idx": "23fb4e363b4ded19",
    "test.de-en.en.bin": "dff7bb8eea82a2bc",
    "test.de-en.en.idx": "81504b6933cc8516",
    "test.ref.en": "b2e8e390360f3f05",
    "train.de-en.de.bin": "136d70c5ac3d4a2d",
    "train.de-en.de.idx": "fd66547d12c55542",
    "train.de-en.de.nodes.bin": "ff86c87882c1b39d",
    "train.de-en.de.nodes.idx": "652b40956daeeea8",
    "train.de-en.de.parents.bin": "ad8aa8c0154c990d",
    "train.de-en.de.parents.idx": "6da0994cecd9af9f",
    "train.de-en.de.spans.bin": "ba7e052f4b348964",
    "train.de-en.de.spans.idx": "5c54f1021c4765ce",
    "train.de-en.en.bin": "3c73317f33346a8a",
    "train.de-en.en.idx": "e62b1742bce4f626",
    "train.ref.en": "972fdbe0a3afabac",
    "valid.de-en.de.bin": "9b812db3574dd011",
    "valid.de-en.de.idx": "bf7b38a8a6cd258c",
    "valid.de-en.de.nodes.bin": "da7b632342519fe6",
    "valid.de-en.de.nodes.idx": "dd13c7e700f5df61",
    "valid.de-en.de.parents.bin": "eea03b18c48993c0",
    "valid.de-en.de.parents.idx": "964ff777a1a015e3",
    "valid.de-en.de.spans.bin": "4a62da5780325329",
    "valid.de-en.de.spans.idx": "3c643bf1a62f7fa3",
    "valid.de-en.en.bin": "806f8718f96cbda0",
    "valid.de-en.en.idx": "7537b74e4cea6352",
    "valid.ref.en": "413f103c6364cead",
}
# With --subword-label bpe, the files that differ from those.
BPE_DIGESTS = {
    "dict.de.nodes.txt": "3dc54f4f142a87a0",
    "test.de-en.de.nodes.bin": "e3b7e91c4626a86c",
    "train.de-en.de.nodes.bin": "3ebfb50d864b7da1",
    "valid.de-en.de.nodes.bin": "deea3a65ee68b7aa",
}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_data_bin_is_byte_for_byte_what_it_was(tmp_path, workers):
    corpus = write_varied_corpus(tmp_path)
    digests = binarise(corpus, tmp_path / "bin", "--workers", workers)
    digests.pop("preprocess.log")
    assert digests == DIGESTS


def test_the_bpe_labelled_data_bin_is_byte_for_byte_what_it_was(tmp_path):
    corpus = write_varied_corpus(tmp_path)
    digests = binarise(corpus, tmp_path / "bin", "--workers", "1", "--subword-label", "bpe")
    digests.pop("preprocess.log")
    assert digests == {**DIGESTS, **BPE_DIGESTS}


def parents_the_long_way(heads_line, pieces):
    try:
        spans = piece_parent_spans(read_heads(heads_line), pieces, "subword_nmt")
    except TreeError:
        return None
    return [index for span in spans for index in span]


def test_parent_rows_are_the_long_ways_and_refuse_what_it_refuses():
    rng = random.Random(8)
    refused = 0
    for _ in range(2000):
        text, _, _, heads = varied_line(rng)
        fields = heads.split()
        change = rng.random()
        if change < 0.1:  # a head pointing elsewhere: out of range, at itself, or making a cycle
            k = rng.randrange(len(fields))
            fields[k] = str(rng.choice([len(fields) + 1, k + 1, rng.randint(1, len(fields))]))
        elif change < 0.15:
            fields.append("1")
        elif change < 0.2:
            fields[0] = rng.choice(["+1", "-1", "x", "\u0661", "1.0"])
        heads = " ".join(fields)
        expected = parents_the_long_way(heads, text.split())
        refused += expected is None
        assert parent_rows(heads, text.split(), "subword_nmt") == expected, (heads, text)
    assert refused > 100


@pytest.mark.parametrize("heads", ["", "0 1", "2 1", "2 1 0", "0 0 1 2", "1 0 0", "0 4 1"])
def test_parent_rows_refuse_heads_that_are_no_tree_of_the_words(heads):
    assert parent_rows(heads, ["a@@", "b", "c", "d"], "subword_nmt") is None
    assert parents_the_long_way(heads, ["a@@", "b", "c", "d"]) is None


def test_parent_rows_by_hand():
    # words ab (pieces 0-1), c (2), d (3); ab's head is c, c is the root, d's head is ab
    assert parent_rows("2 0 1", ["a@@", "b", "c", "d"], "subword_nmt") == [2, 2, 2, 2, 2, 2, 0, 1]
