"""Dependency parses to phrase structure (head projection), on hand-written heads, and the
CoNLL-U reader and back-end."""

import pytest

from tree_fairseq.cli import parse as parse_cli
from tree_fairseq.parsing import ConlluParser
from tree_fairseq.trees import Tree, TreeError, parse_tree
from tree_fairseq.trees.conllu import read_conllu_sentence
from tree_fairseq.trees.dependency import DependencyParse, dependency_tree, phrase_label, projectivize


def _parse(words, heads, pos, tags=None):
    """Heads written 1-based as in CoNLL-U (0: root)."""
    return DependencyParse(tuple(words.split()), tuple(h - 1 for h in heads), tuple(pos.split()),
                           tuple(tags.split()) if tags else None)


def _spans(tree):
    return sorted((node.label, node.start, node.end) for node in tree.nodes)


# "the old man saw her in the park ." in spaCy's English scheme (a preposition heads its PP).
SENTENCE = _parse("the old man saw her in the park .", [3, 3, 4, 0, 4, 4, 8, 6, 4],
                  "DET ADJ NOUN VERB PRON ADP DET NOUN PUNCT", "DT JJ NN VBD PRP IN DT NN .")


def test_layered_puts_subject_and_full_stop_above_the_verb_and_its_objects():
    tree, lifts = dependency_tree(SENTENCE, "layered")
    tree.check()
    assert lifts == 0
    assert tree.leaves == tuple("the old man saw her in the park .".split())
    assert tree.tags == tuple("DT JJ NN VBD PRP IN DT NN .".split())
    assert _spans(tree) == sorted([("NP", 0, 2), ("NP", 6, 7), ("PP", 5, 7), ("VP", 3, 7), ("VP", 0, 8)])
    assert tree.to_bracketed() == ("(VP (NP (DT the) (JJ old) (NN man)) (VP (VBD saw) (PRP her) (PP (IN in) "
                                   "(NP (DT the) (NN park)))) (. .))")


def test_flat_has_one_phrase_per_head_over_its_yield():
    tree, _ = dependency_tree(SENTENCE, "flat")
    tree.check()
    assert _spans(tree) == sorted([("NP", 0, 2), ("NP", 6, 7), ("PP", 5, 7), ("VP", 0, 8)])


def test_punctuation_between_head_and_a_right_dependent_stays_inside():
    # "said , yes ." : the comma lies between "said" and its object "yes".
    parse = _parse("he said , yes .", [2, 0, 2, 2, 2], "PRON VERB PUNCT INTJ PUNCT")
    tree, _ = dependency_tree(parse)
    tree.check()
    assert _spans(tree) == [("VP", 0, 4), ("VP", 1, 3)]
    assert tree.tags == tuple("PRON VERB PUNCT INTJ PUNCT".split())  # no fine tags: the coarse ones


@pytest.mark.parametrize("pos, label", [("NOUN", "NP"), ("PROPN", "NP"), ("PRON", "NP"), ("VERB", "VP"),
                                        ("AUX", "VP"), ("ADJ", "ADJP"), ("ADV", "ADVP"), ("ADP", "PP"),
                                        ("DET", "DETP"), ("NUM", "NUMP"), ("_", "XP"), ("", "XP")])
def test_phrase_labels_come_from_the_head_part_of_speech(pos, label):
    assert phrase_label(pos) == label


def test_non_projective_arc_is_lifted_to_the_grandparent():
    # "a hearing is scheduled on the issue today": "on" (6) depends on "hearing" (2) across the verb.
    parse = _parse("a hearing is scheduled on the issue today", [2, 4, 4, 0, 2, 7, 5, 4],
                   "DET NOUN AUX VERB ADP DET NOUN NOUN")
    heads, lifts = projectivize(parse.heads)
    assert lifts == 1 and heads[4] == 3  # "on" now hangs from "scheduled"
    tree, lifts = dependency_tree(parse)
    tree.check()
    assert lifts == 1
    assert ("PP", 4, 6) in _spans(tree) and ("NP", 0, 1) in _spans(tree)


def test_lifting_repeats_until_projective():
    # Word 1 hangs from word 5 over words 2-4, which hang from 3 (a root) and word 5 from 4:
    # lifting 1 to 4 is not enough (2 and 3 are not under 4), lifting again to 3 is.
    heads = [4, 2, -1, 2, 3]
    projective, lifts = projectivize(heads)
    assert projective == [2, 2, -1, 2, 3] and lifts == 2
    tree, _ = dependency_tree(DependencyParse(tuple("abcde"), heads, ("X",) * 5))
    tree.check()


def test_several_roots_are_joined_under_one_root():
    parse = _parse("yes . no way .", [0, 1, 0, 3, 3], "INTJ PUNCT INTJ NOUN PUNCT")
    tree, _ = dependency_tree(parse)
    tree.check()
    assert _spans(tree) == [("INTJP", 0, 1), ("INTJP", 2, 3), ("INTJP", 2, 4), ("ROOT", 0, 4)]


def test_a_400_word_chain_needs_no_recursion():
    n = 400
    words = tuple(f"w{i}" for i in range(n))
    right = DependencyParse(words, tuple(range(1, n)) + (-1,), ("NOUN",) * n)  # each word's head: the next
    tree, lifts = dependency_tree(right)
    tree.check()
    assert lifts == 0 and len(tree.nodes) == n - 1
    assert parse_tree(tree.to_bracketed()) == tree
    left = DependencyParse(words, (-1,) + tuple(range(n - 1)), ("VERB",) * n)
    tree, _ = dependency_tree(left, "flat")
    tree.check()
    assert sorted((node.start, node.end) for node in tree.nodes) == [(start, n - 1) for start in range(n - 1)]


def test_one_word_has_no_nodes():
    tree, _ = dependency_tree(_parse("hello", [0], "INTJ"))
    assert tree == Tree(("hello",), ()) and tree.tags == ("INTJ",)


@pytest.mark.parametrize("heads, message", [
    ([2, 1], "cycle"), ([2, 3, 1], "cycle"), ([0, 5], "head 5"), ([0, 2], "head 2"),
])
def test_heads_that_are_no_tree_are_refused(heads, message):
    words = " ".join(f"w{i}" for i in range(len(heads)))
    with pytest.raises(TreeError, match=message):
        dependency_tree(_parse(words, heads, " ".join(["X"] * len(heads))))


CONLLU = """# sent_id = 1
# text = Er geht zum Bahnhof.
1\tEr\ter\tPRON\tPPER\t_\t2\tnsubj\t_\t_
2\tgeht\tgehen\tVERB\tVVFIN\t_\t0\troot\t_\t_
3-4\tzum\t_\t_\t_\t_\t_\t_\t_\t_
3\tzu\tzu\tADP\tAPPR\t_\t5\tcase\t_\t_
4\tdem\tder\tDET\tART\t_\t5\tdet\t_\t_
5\tBahnhof\tBahnhof\tNOUN\tNN\t_\t2\tobl\t_\tSpaceAfter=No
5.1\tging\tgehen\tVERB\t_\t_\t_\t_\t2:conj\t_
6\t.\t.\tPUNCT\t$.\t_\t2\tpunct\t_\t_
"""


def test_conllu_multiword_tokens_map_back_to_the_surface_tokens():
    sentence = read_conllu_sentence(CONLLU.splitlines())
    assert sentence.parse.words == ("Er", "geht", "zu", "dem", "Bahnhof", ".")
    assert sentence.tokens == ("Er", "geht", "zum", "Bahnhof", ".")
    assert sentence.token_words == (("Er",), ("geht",), ("zu", "dem"), ("Bahnhof",), (".",))
    assert sentence.parse.tags == ("PPER", "VVFIN", "APPR", "ART", "NN", "$.")


def _write(tmp_path, text, conllu):
    (tmp_path / "text").write_text(text, encoding="utf-8")
    (tmp_path / "parsed.conllu").write_text(conllu, encoding="utf-8")


def _run(tmp_path, *args):
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), "--parser", "conllu",
                    "--trees", str(tmp_path / "parsed.conllu"), *args])
    return (tmp_path / "trees").read_text(encoding="utf-8").splitlines()


def test_conllu_back_end_aligns_to_the_corpus_tokens(tmp_path):
    # The corpus is lowercased and Moses-escaped; the parser read the original text.
    _write(tmp_path, "er geht zum bahnhof .\nsie &apos;s da\n",
           "\n\n" + CONLLU + "\n" + "1\tSie\t_\tPRON\t_\t_\t2\tnsubj\t_\t_\n2\t's\t_\tAUX\t_\t_\t0\troot\t_\t_\n"
           "3\tda\t_\tADV\t_\t_\t2\tadvmod\t_\t_\n\n\n")
    lines = _run(tmp_path)
    # zum (= zu dem) keeps the tag of zu; the PP of "zu dem Bahnhof" becomes an NP over zum Bahnhof.
    assert lines == ["(VP (PPER er) (VP (VVFIN geht) (NP (APPR zum) (NN bahnhof))) ($. .))",
                     "(VP (PRON sie) (VP (AUX &apos;s) (ADV da)))"]
    assert _run(tmp_path, "--dependency-tree-shape", "flat") == [
        "(VP (PPER er) (VVFIN geht) (NP (APPR zum) (NN bahnhof)) ($. .))", "(VP (PRON sie) (AUX &apos;s) (ADV da))"]


def _error(tmp_path, *args):
    with pytest.raises(SystemExit) as exit_info:
        _run(tmp_path, *args)
    return str(exit_info.value.code)


def test_conllu_block_over_other_words_stops_the_run_naming_file_and_line(tmp_path):
    _write(tmp_path, "er geht zum bahnhof .\nganz anders\n", CONLLU + "\n" + CONLLU)
    message = _error(tmp_path)
    assert f"{tmp_path / 'parsed.conllu'}:12: sentence block 2 (input: {tmp_path / 'text'}:2)" in message
    assert "do not match the tokens" in message


def test_conllu_empty_or_broken_block_is_a_parser_failure(tmp_path):
    broken = CONLLU.replace("2\tgeht\tgehen\tVERB\tVVFIN\t_\t0", "2\tgeht\tgehen\tVERB\tVVFIN\t_\tx")
    _write(tmp_path, "a b\ner geht zum bahnhof .\nc d\n",
           "# sent_id = 1\n# text = a b\n\n" + broken + "\n" + "1\tc\t_\tX\t_\t_\t0\troot\t_\t_\n"
           "2\td\t_\tX\t_\t_\t1\tdep\t_\t_\n")
    message = _error(tmp_path)
    assert f"{tmp_path / 'parsed.conllu'}:1: sentence block 1" in message and "without words" in message
    lines = _run(tmp_path, "--on-failure", "right")
    assert lines == ["(X a b)", "(X er (X geht (X zum (X bahnhof .))))", "(XP (X c) (X d))"]
    failures = (tmp_path / "trees.failures").read_text(encoding="utf-8").splitlines()
    assert [failure.split("\t")[0] for failure in failures] == ["1", "2"]
    assert "HEAD 'x' of word 2 is not a number" in failures[1]


def test_conllu_with_fewer_or_more_blocks_than_lines_is_refused(tmp_path):
    _write(tmp_path, "er geht zum bahnhof .\ner geht zum bahnhof .\n", CONLLU)
    assert "fewer sentences than the input lines" in _error(tmp_path)
    _write(tmp_path, "er geht zum bahnhof .\n", CONLLU + "\n" + CONLLU)
    assert "sentence block 2 is one more than the input's 1 lines" in _error(tmp_path)


def test_conllu_resumed_run_reads_on_from_the_right_block(tmp_path):
    blocks = [f"1\tw{i}\t_\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\tv{i}\t_\tVERB\t_\t_\t0\troot\t_\t_\n"
              f"3\to{i}\t_\tNOUN\t_\t_\t2\tobj\t_\t_\n" for i in range(7)]
    _write(tmp_path, "".join(f"w{i} v{i} o{i}\n" for i in range(7)), "\n".join(blocks))
    whole = _run(tmp_path)
    parser = ConlluParser(str(tmp_path / "parsed.conllu"))
    sentences = [line.split() for line in (tmp_path / "text").read_text().splitlines()]
    assert [tree.to_bracketed() for tree in parser.parse(sentences[3:], 4, "text")] == whole[3:]
    assert whole[0] == "(VP (NOUN w0) (VP (VERB v0) (NOUN o0)))"


def test_conllu_lifts_are_counted_and_reported(tmp_path, capsys):
    block = ("1\ta\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\thearing\t_\tNOUN\t_\t_\t4\tnsubj\t_\t_\n"
             "3\tis\t_\tAUX\t_\t_\t4\taux\t_\t_\n4\tscheduled\t_\tVERB\t_\t_\t0\troot\t_\t_\n"
             "5\ton\t_\tADP\t_\t_\t2\tprep\t_\t_\n6\tit\t_\tPRON\t_\t_\t5\tpobj\t_\t_\n")
    _write(tmp_path, "a hearing is scheduled on it\nok\n", block + "\n1\tok\t_\tINTJ\t_\t_\t0\troot\t_\t_\n")
    lines = _run(tmp_path, "--chunk-size", "1")
    assert [node.start for node in parse_tree(lines[0]).nodes if node.label == "PP"] == [4]
    assert "1 non-projective arcs lifted to their head's head in 1 of 2 lines (50.00%): lines 1" in capsys.readouterr().err



def test_conllu_tags_of_every_character_class_come_back_from_the_written_trees(tmp_path):
    # German STTS tags ($( for quotes, dashes and brackets), and XPOS and UPOS values holding a space,
    # a bracket, '%', a '-' (as Czech and Japanese tags do) or non-ASCII letters.
    rows = [("er", "PRON", "PPER", 2), ("sagt", "VERB", "VVFIN", 0), ("(", "PUNCT", "$(", 4),
            ("ja", "NOUN SBJ", "NN SBJ", 2), ("und", "CCONJ", "N)P", 6), ("nein", "X(Y", "名詞-普通名詞-一般", 4),
            (")", "PUNCT", "$)", 4), ("%", "SYM", "%", 2), ("ja", "INTJ", "A=B%20", 2), (".", "PUNCT", "$.", 2)]
    block = "".join(f"{k}\t{form}\t_\t{upos}\t{xpos}\t_\t{head}\tdep\t_\t_\n"
                    for k, (form, upos, xpos, head) in enumerate(rows, start=1))
    _write(tmp_path, "er sagt ( ja und nein ) % ja .\n", block)
    for shape in ("layered", "flat"):
        line, = _run(tmp_path, "--dependency-tree-shape", shape)
        tree = parse_tree(line)
        assert tree.tags == tuple(xpos for _, _, xpos, _ in rows)
        expected, _ = dependency_tree(read_conllu_sentence(block.splitlines()).parse, shape)
        assert [node.label for node in tree.nodes] == [node.label for node in expected.nodes]
    assert "NOUN SBJP" in {node.label for node in tree.nodes} and "X(YP" in {node.label for node in tree.nodes}
    assert "($%28 -LRB-)" in line and "(NN%20SBJ ja)" in line and "(%25 %)" in line


def _conllu_error(tmp_path, text, conllu):
    _write(tmp_path, text, conllu)
    return _error(tmp_path)


def test_conllu_overlapping_multiword_tokens_are_named_with_file_block_and_line(tmp_path):
    words = "".join(f"{k}\t{w}\t_\tX\t_\t_\t{0 if k == 1 else 1}\tdep\t_\t_\n"
                    for k, w in enumerate(["er", "geht", "zu", "dem", "markt"], start=1))
    lines = words.splitlines(keepends=True)
    for second in ("3-5\tzummarkt", "4-5\tdemmarkt", "2-3\tgehtzu"):
        conllu = ("1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n\n# sent_id = 2\n" + "".join(lines[:2])
                  + "3-4\tzum\t_\t_\t_\t_\t_\t_\t_\t_\n" + f"{second}\t_\t_\t_\t_\t_\t_\t_\t_\n" + "".join(lines[2:]))
        message = _conllu_error(tmp_path, "a\ner geht zum markt\n", conllu)
        first, last = second.split("\t")[0].split("-")
        assert (f"{tmp_path / 'parsed.conllu'}:7: sentence block 2 (input: {tmp_path / 'text'}:2): multiword token "
                f"{first}-{last} ('{second.split(chr(9))[1]}') overlaps 3-4 ('zum') of line 6") in message, message
    # a range after the last word, and ranges that share no word (accepted)
    message = _conllu_error(tmp_path, "er geht\n", "1\ter\t_\tX\t_\t_\t0\troot\t_\t_\n2\tgeht\t_\tX\t_\t_\t1\tdep\t_\t_\n"
                            "3-4\tzum\t_\t_\t_\t_\t_\t_\t_\t_\n")
    assert "parsed.conllu:3: sentence block 1" in message and "multiword token 3-4 ('zum') starts after the last word 2" in message
    sentence = read_conllu_sentence(["1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_", "1\ta\t_\tX\t_\t_\t0\troot\t_\t_",
                                     "2\tb\t_\tX\t_\t_\t1\tdep\t_\t_", "3-4\tcd\t_\t_\t_\t_\t_\t_\t_\t_",
                                     "3\tc\t_\tX\t_\t_\t1\tdep\t_\t_", "4\td\t_\tX\t_\t_\t1\tdep\t_\t_"])
    assert sentence.tokens == ("ab", "cd")


@pytest.mark.parametrize("head", ["²", "٣", "1.0", "-1", ""])
def test_conllu_head_that_is_no_ascii_number_is_named_with_file_block_and_line(tmp_path, head):
    conllu = ("1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n\n1\tb\t_\tX\t_\t_\t0\troot\t_\t_\n"
              f"2\tc\t_\tX\t_\t_\t{head}\tdep\t_\t_\n")
    message = _conllu_error(tmp_path, "a\nb c\n", conllu)
    assert (f"{tmp_path / 'parsed.conllu'}:4: sentence block 2 (input: {tmp_path / 'text'}:2): HEAD '{head}' of word 2 "
            "is not a number") in message
    assert "Traceback" not in message
    message = _conllu_error(tmp_path, "a\nb c\n", conllu.replace("1\tb", "²\tb"))
    assert "parsed.conllu:3: sentence block 2" in message and "word ID '²' where word 1 was expected" in message
    message = _conllu_error(tmp_path, "a\nb c\n", conllu.replace(f"{head}\tdep", "1\tdep") + "²-3\tbc\t_\t_\t_\t_\t_\t_\t_\t_\n")
    assert "parsed.conllu:5: sentence block 2" in message and "'²-3' is not a multiword-token range" in message


@pytest.mark.parametrize("header", ["# newdoc id = doc1\n# global.columns = ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL "
                                    "DEPS MISC\n", "# generated by a parser\n"])
def test_conllu_comment_only_block_before_the_sentences_says_the_blocks_no_longer_pair_up(tmp_path, header):
    sentences = "1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n\n1\tb\t_\tX\t_\t_\t0\troot\t_\t_\n"
    _write(tmp_path, "a\nb\n", header + "\n" + sentences)
    for flags in ((), ("--on-failure", "balanced")):
        message = _error(tmp_path, *flags)
        assert (f"{tmp_path / 'parsed.conllu'}:1: sentence block 1 (input: {tmp_path / 'text'}:1): the block holds no "
                "words, only comments") in message
        assert ("from here on the blocks and the input lines no longer pair up (--on-failure would give input line 1 a "
                "trivial tree and read block 2, presumably that line's sentence, for input line 2") in message
        assert "remove the block, or move its comments into the next sentence's block" in message
        assert not (tmp_path / "trees").exists()
    # its comments in the first sentence's block, as CoNLL-U has them: read as that sentence
    _write(tmp_path, "a\nb\n", header + sentences)
    assert _run(tmp_path) == ["(ROOT (X a))", "(ROOT (X b))"]
