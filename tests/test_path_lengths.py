"""tree_fairseq.analysis.path_lengths on a data-bin made by tree-fairseq-preprocess from trees
whose LCRS paths are known by hand, and its refusals."""

import pytest
from conftest import preprocess

from tree_fairseq.analysis import path_lengths

TWELVE = "a b c d e f g h i j k l"
# (source words, tree): under LCRS a first child is one step below its parent, each later child
# one step after the sibling before it.
SENTENCES = [
    ("a b c d", "(S a b c d)"),  # flat: 1, 2, 3, 4
    ("a b c d", "(X (X a b) (X c d))"),  # balanced: a 2, b 3, c 3 ((X c d) is 2), d 4
    (TWELVE, "(S " + TWELVE + ")"),  # flat: 1 ... 12
]


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    text = tmp_path_factory.mktemp("paths_text")
    for split in ("train", "valid", "test"):
        (text / f"{split}.de").write_text("".join(words + "\n" for words, _ in SENTENCES), encoding="utf-8")
        (text / f"{split}.tree.de").write_text("".join(tree + "\n" for _, tree in SENTENCES), encoding="utf-8")
        (text / f"{split}.en").write_text("".join(words + "\n" for words, _ in SENTENCES), encoding="utf-8")
    return preprocess(text, tmp_path_factory.mktemp("paths_bin") / "bin"), text


def run(data_bin, source, *extra):
    path_lengths.main([str(data_bin), "-s", "de", "-t", "en", "--source", str(source), *extra])


def test_the_paths_of_hand_made_trees(data_bin, capsys):
    folder, text = data_bin
    trees, leaves, words = path_lengths.read_split(str(folder), "test", "de", "en")
    assert leaves == [5, 5, 13]  # the words and the end of the sentence
    assert words == [(4, 4), (4, 4), (12, 12)]
    expected = [[1, 2, 3, 4], [2, 3, 3, 4], list(range(1, 13))]
    # Batched with trees of other sizes (padding in every batch), two at a time, or one by one.
    for batch_size in (64, 2, 1):
        assert path_lengths.leaf_path_lengths(trees, leaves, batch_size) == expected
    assert path_lengths.leaf_path_lengths(trees[::-1], leaves[::-1], 2) == expected[::-1]
    rows = path_lengths.path_length_table(trees, leaves, [4, 4, 12], [10], steps=3)
    assert rows == [
        {"words": "<= 10", "sentences": 2, "leaves": 8, "mean_path": pytest.approx(2.75), "longest": 4,
         "beyond": pytest.approx(2 / 8)},
        {"words": "> 10", "sentences": 1, "leaves": 12, "mean_path": pytest.approx(6.5), "longest": 12,
         "beyond": pytest.approx(9 / 12)}]
    run(folder, text / "test.de", "--by-length", "10", "--steps", "3")
    out = capsys.readouterr().out
    assert "| source words | sentences | leaves | mean leaf path (steps) | longest | leaves over 3 steps |" in out
    assert "| > 10 | 1 | 12 | 6.5 | 12 | 75 % |" in out


def test_an_empty_group_is_printed_empty(data_bin, capsys):
    folder, text = data_bin
    run(folder, text / "test.de", "--by-length", "2,20")
    assert "| <= 2 | 0 | 0 | | | |" in capsys.readouterr().out


def refusal(capsys, *argv) -> str:
    """The one line a refusal gives: argparse's on stderr, or the message it exits with."""
    with pytest.raises(SystemExit) as exit:
        run(*argv)
    message = capsys.readouterr().err + (exit.value.code if isinstance(exit.value.code, str) else "")
    assert message.startswith(("usage:", "path_lengths: error:")), message
    return message


def test_a_source_of_another_length_or_with_an_empty_line_is_refused(data_bin, tmp_path, capsys):
    folder, _ = data_bin
    short = tmp_path / "short.de"
    short.write_text("a b\nc d\n", encoding="utf-8")
    message = refusal(capsys, folder, short)
    assert f"--source {short} has 2 lines but {folder} split 'test' has 3: give" in message
    holes = tmp_path / "holes.de"
    holes.write_text("a b\n\nc d\n", encoding="utf-8")
    assert f"--source {holes} line 2 is empty" in refusal(capsys, folder, holes)
    assert "no such file" in refusal(capsys, folder, tmp_path / "absent.de")


def test_a_sentence_of_its_end_of_sentence_alone_is_refused(data_bin, tmp_path, capsys):
    """tree-fairseq-preprocess writes no such sentence from a non-empty line; a data-bin rewritten by
    hand could hold one, and its mean path would be a mean over nothing."""
    import shutil

    import numpy as np
    from fairseq.data import data_utils, indexed_dataset

    folder, text = data_bin
    copy = tmp_path / "bin"
    shutil.copytree(folder, copy)
    prefix = str(copy / "test.de-en.de")
    tokens = data_utils.load_indexed_dataset(prefix, None, "mmap")
    sentences = [tokens[i] for i in range(len(tokens))]
    builder = indexed_dataset.MMapIndexedDatasetBuilder(prefix + ".bin.new", dtype=np.uint16)
    for i, sentence in enumerate(sentences):
        builder.add_item(sentence[-1:] if i == 1 else sentence)
    builder.finalize(prefix + ".idx")
    (copy / "test.de-en.de.bin.new").replace(prefix + ".bin")
    message = refusal(capsys, copy, text / "test.de")
    assert f"{prefix}.bin: sentence 1 of split 'test' has no token before its end of sentence" in message


def test_a_source_with_other_words_than_the_data_bins_is_refused(data_bin, tmp_path, capsys):
    """Another text of the split's length (the target side, another split) would group other
    sentences' paths: refused at its first line whose word count is not its sentence's."""
    folder, _ = data_bin
    other = tmp_path / "other.en"
    other.write_text("a b c d\na b c\n" + TWELVE + "\n", encoding="utf-8")
    message = refusal(capsys, folder, other)
    assert f"--source {other} line 2 has 3 words but sentence 1 of {folder} has 4 (1 of 3 lines differ)" in message


@pytest.mark.parametrize("subword_format, pieces", [
    ("subword_nmt", "th@@ is is a sent@@ en@@ ce"),
    ("sentencepiece", "\u2581th is \u2581is \u2581a \u2581sent en ce"),
])
def test_words_are_counted_with_their_subword_pieces_joined(tmp_path, capsys, subword_format, pieces):
    text = tmp_path / "text"
    text.mkdir()
    for split in ("train", "valid", "test"):
        (text / f"{split}.de").write_text(pieces + "\n", encoding="utf-8")
        (text / f"{split}.tree.de").write_text("(S (NP this) (VP is (NP a sentence)))\n", encoding="utf-8")
        (text / f"{split}.en").write_text("das ist ein Satz\n", encoding="utf-8")
    folder = preprocess(text, tmp_path / "bin", "--subword-format", subword_format)
    _, leaves, words = path_lengths.read_split(str(folder), "test", "de", "en")
    assert (leaves, words) == ([8], [(4, 4)])
    (tmp_path / "words.de").write_text("this is a sentence\n", encoding="utf-8")
    run(folder, tmp_path / "words.de", "--by-length", "10")
    assert "| <= 10 | 1 | 7 |" in capsys.readouterr().out
    message = refusal(capsys, folder, text / "test.de")  # the pieces themselves are no words
    assert "line 1 has 7 words but sentence 0" in message


def test_unknown_pieces_may_or_may_not_end_a_word():
    assert path_lengths.word_bounds(["th@@", "is", "is", None, "ce"], sentencepiece=False) == (3, 4)
    assert path_lengths.word_bounds(["th@@", None], sentencepiece=False) == (1, 1)  # the last ends a word
    assert path_lengths.word_bounds(["\u2581th", None, "\u2581is"], sentencepiece=True) == (2, 3)
    assert path_lengths.word_bounds([None, "is"], sentencepiece=True) == (1, 1)  # the first starts one
    assert path_lengths.word_bounds(["a", "b", "c"], sentencepiece=False) == (3, 3)


def test_a_test_piece_unknown_to_the_dictionary_leaves_its_word_open(tmp_path, capsys):
    """'ab@@' is in no training sentence: the data-bin keeps <unk>, and the test line may have 4 or
    5 words (sent@@ <unk> ce: one word or two)."""
    text = tmp_path / "text"
    text.mkdir()
    for split, pieces, words in (("train", "th@@ is is a sent@@ en@@ ce", "this is a sentence"),
                                 ("valid", "th@@ is is a sent@@ en@@ ce", "this is a sentence"),
                                 ("test", "th@@ is is a sent@@ ab@@ ce", "this is a sentabce")):
        (text / f"{split}.de").write_text(pieces + "\n", encoding="utf-8")
        (text / f"{split}.tree.de").write_text(f"(S {words})\n", encoding="utf-8")
        (text / f"{split}.en").write_text("das ist ein Satz\n", encoding="utf-8")
    folder = preprocess(text, tmp_path / "bin")
    assert path_lengths.read_split(str(folder), "test", "de", "en")[2] == [(4, 5)]
    for words in ("this is a sentabce", "this is a sent abce"):
        (tmp_path / "words.de").write_text(words + "\n", encoding="utf-8")
        run(folder, tmp_path / "words.de")
        assert "| <= 10 | 1 | 7 |" in capsys.readouterr().out
    (tmp_path / "words.de").write_text("this is a sen t abce\n", encoding="utf-8")
    message = refusal(capsys, folder, tmp_path / "words.de")
    assert "line 1 has 6 words but sentence 0 of" in message
    assert "has 4 to 5 (its unknown pieces may or may not end a word) (1 of 1 lines differ)" in message


def test_a_data_bin_without_trees_is_refused(plain_databin, tiny_corpus, capsys):
    message = refusal(capsys, plain_databin, tiny_corpus / "test.de")
    assert "no source trees for split 'test'" in message


@pytest.mark.parametrize("argv, message", [
    (["--steps", "-1"], "argument --steps: '-1': a whole number, 0 or more"),
    (["--by-length", "20,10"], "strictly ascending"),
    (["--split", "nope"], "no source trees for split 'nope'"),
])
def test_bad_options_are_refused_in_one_line(data_bin, capsys, argv, message):
    folder, text = data_bin
    assert message in refusal(capsys, folder, text / "test.de", *argv)


def test_a_data_bin_cut_short_or_missing_a_file_is_named(data_bin, tmp_path):
    """A source text cut short (a copy interrupted) was a numpy message naming no file; a tree stream
    whose index and data are both gone was said to have its index there."""
    import shutil

    folder, text = data_bin
    copy = tmp_path / "bin"
    shutil.copytree(folder, copy)
    def refused() -> str:  # the message it exits with (fairseq's own logging may write to stderr too)
        with pytest.raises(SystemExit) as exit:
            run(copy, text / "test.de")
        assert str(exit.value.code).startswith("path_lengths: error:")
        return exit.value.code

    tokens = copy / "test.de-en.de.bin"
    tokens.write_bytes(tokens.read_bytes()[:-4])
    message = refused()
    assert f"{tokens} holds" in message and "the file is truncated or from another run" in message
    shutil.copyfile(folder / "test.de-en.de.bin", tokens)
    for suffix in ("idx", "bin"):
        (copy / f"test.de-en.de.spans.{suffix}").unlink()
    assert f"{copy / 'test.de-en.de.spans.idx'} is missing" in refused()
