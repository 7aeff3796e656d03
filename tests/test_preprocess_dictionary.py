"""tree-fairseq-preprocess counts the source words for the source dictionary in the pass that reads
the trees, instead of letting fairseq-preprocess read the text again: the data-bin's text part must
stay byte for byte fairseq-preprocess's, whatever the options that shape the dictionary, and where
fairseq would build the dictionary another way (--srcdict, --joined-dictionary, a task of its own),
fairseq builds it."""

import filecmp
import logging
import random
from pathlib import Path

import pytest
from fairseq import options
from fairseq_cli import preprocess as fairseq_preprocess

from tree_fairseq.cli import preprocess as preprocess_cli

COUNTED = "counted as its trees were read"
# Between words: spaces of every kind str.split() and fairseq's tokenize_line split at.
GAPS = [" ", "  ", "\t", "\u00a0", "\u3000", "\u2009 "]
WORDS = ["ka", "lo", "mi", "ne", "ru", "ta", "é", "&apos;s", "<unk>", "</s>", "<pad>", "madeupword0000", "X"]


def write_corpus(directory: Path) -> Path:
    """train/valid/test (source de): words in a Zipf-like mix so that thresholds and sizes cut,
    some split by BPE, any whitespace between them, blank edges; trees over str.split()'s words."""
    rng = random.Random(7)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    for split, size in (("train", 200), ("valid", 20), ("test", 20)):
        text, trees, target = [], [], []
        for _ in range(size):
            words = rng.choices(WORDS, weights, k=rng.randint(1, 7))
            pieces = []
            for word in words:
                pieces += [word[:1] + "@@", word[1:]] if len(word) > 2 and rng.random() < 0.3 else [word]
            line = rng.choice(["", " ", "\t"]) + pieces[0]
            for piece in pieces[1:]:
                line += rng.choice(GAPS) + piece
            text.append(line + rng.choice(["", " ", "\u00a0"]))
            leaves = " ".join(f"(NN {word})" for word in words)
            trees.append(f"(S {leaves})" if len(words) > 1 else leaves)
            target.append(" ".join(reversed(words)))
        for suffix, lines in (("de", text), ("tree.de", trees), ("en", target)):
            (directory / f"{split}.{suffix}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("dictionary_corpus"))


def binarise_both(corpus: Path, tmp_path: Path, extra: list[str], caplog) -> tuple[Path, Path]:
    common = ["--source-lang", "de", "--target-lang", "en", "--trainpref", str(corpus / "train"),
              "--validpref", str(corpus / "valid"), "--testpref", str(corpus / "test"), *extra]
    fairseq_dir, tree_dir = tmp_path / "fairseq", tmp_path / "tree"
    fairseq_preprocess.main(options.get_preprocessing_parser().parse_args([*common, "--destdir", str(fairseq_dir)]))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tree_fairseq.preprocess"):
        preprocess_cli.run(preprocess_cli.get_parser().parse_args([*common, "--destdir", str(tree_dir)]))
    return fairseq_dir, tree_dir


def assert_text_part_is_fairseqs(fairseq_dir: Path, tree_dir: Path) -> None:
    names = sorted(path.name for path in fairseq_dir.iterdir() if path.name != "preprocess.log")
    assert len(names) == 14  # two dictionaries, three splits' .bin and .idx on each side
    _, mismatch, errors = filecmp.cmpfiles(fairseq_dir, tree_dir, names, shallow=False)
    assert mismatch == [] and errors == []


@pytest.mark.parametrize("extra", [
    [],
    ["--thresholdsrc", "3"],
    ["--nwordssrc", "10"],
    ["--padding-factor", "1"],
    ["--padding-factor", "16", "--thresholdsrc", "2", "--nwordssrc", "14"],
    ["--workers", "2"],
], ids=["defaults", "threshold", "nwords", "no-padding", "all-three", "two-workers"])
def test_the_counted_dictionary_is_fairseqs(corpus, tmp_path, caplog, extra):
    fairseq_dir, tree_dir = binarise_both(corpus, tmp_path, extra, caplog)
    assert COUNTED in caplog.text  # the tree pass counted the words: the test compares that way's output
    assert_text_part_is_fairseqs(fairseq_dir, tree_dir)


def test_options_change_the_dictionary_the_comparison_sees(corpus, tmp_path, caplog):
    sizes = {}
    for name, extra in (("plain", ["--padding-factor", "1"]),
                        ("threshold", ["--padding-factor", "1", "--thresholdsrc", "3"]),
                        ("nwords", ["--padding-factor", "1", "--nwordssrc", "10"])):
        _, tree_dir = binarise_both(corpus, tmp_path / name, extra, caplog)
        sizes[name] = len((tree_dir / "dict.de.txt").read_text(encoding="utf-8").splitlines())
    assert sizes["threshold"] < sizes["plain"] and sizes["nwords"] == 10 - 4 < sizes["plain"]


def test_fairseq_builds_the_dictionary_where_it_would_build_it_otherwise(corpus, tmp_path, caplog):
    fairseq_dir, tree_dir = binarise_both(corpus, tmp_path / "joined", ["--joined-dictionary"], caplog)
    assert COUNTED not in caplog.text
    assert_text_part_is_fairseqs(fairseq_dir, tree_dir)
    given = fairseq_dir / "dict.de.txt"
    fairseq_dir, tree_dir = binarise_both(corpus, tmp_path / "given", ["--srcdict", str(given)], caplog)
    assert COUNTED not in caplog.text
    assert_text_part_is_fairseqs(fairseq_dir, tree_dir)


def test_a_task_with_its_own_dictionary_building_is_left_to_fairseq(corpus, tmp_path, caplog):
    # cross_lingual_lm builds a MaskedLMDictionary (a <mask> symbol among the specials).
    fairseq_dir, tree_dir = binarise_both(corpus, tmp_path, ["--task", "cross_lingual_lm"], caplog)
    assert COUNTED not in caplog.text
    assert_text_part_is_fairseqs(fairseq_dir, tree_dir)


def test_the_given_options_are_left_as_they_were(corpus, tmp_path):
    args = preprocess_cli.get_parser().parse_args([
        "--source-lang", "de", "--target-lang", "en", "--trainpref", str(corpus / "train"),
        "--destdir", str(tmp_path / "bin")])
    preprocess_cli.run(args)
    assert args.srcdict is None and args.destdir == str(tmp_path / "bin")
