"""How long the LCRS paths that tree positional encodings read are, on a data-bin's trees, by
source length.

Tree positional encodings (Shiv & Quirk) give each word the path from the root to it in the
left-child right-sibling (LCRS) form of its tree: a first child is one ``FIRST_CHILD`` step below
its parent, every later child one ``NEXT_SIBLING`` step after the sibling before it, so the k-th
child of a flat node is k steps below the first. The encoding keeps the last ``k`` steps, each
older step weighted by a further power of its learned decay weight: what a word's encoding says
about its place depends on how long these paths are. A balanced binary tree's paths grow with the
logarithm of the sentence; a parser's flat nodes make them grow with the sentence.

For each test sentence this reads the source tree of a data-bin (as ``tree-fairseq-preprocess``
wrote it) and computes, with the model's own :func:`tree_paths`, untruncated, the path length of
every leaf (each subword token; the end-of-sentence leaf left out); the sentences are grouped by the
words of their line in the test set's source side, as ``tree-fairseq-compare --by-length`` groups
them. Per group it prints the sentences, the leaves counted, the mean path length (the mean over the
sentences of each sentence's mean over its leaves), the longest path, and the share of leaves
whose path is longer than ``--steps`` steps:

    python -m tree_fairseq.analysis.path_lengths WORK/spacy/data-bin/en-de -s en -t de --split test \\
        --source ../shared/data/iwslt14-de-en-lowres/test.en --by-length 10,20,30 --steps 10

Refused, naming the file: a data-bin split without source trees, a sentence with no token before
its end of sentence, a source side whose line count is not the split's sentence count, an empty
source line, a line whose words are not as many as its sentence's in the data-bin (its subword
pieces joined): the target side, another split or untokenised text would group other sentences.
"""

import argparse
import os
import statistics
import sys

import torch

from tree_fairseq.cli import ArgumentParser, argtypes
from tree_fairseq.cli.compare import length_groups, parse_bounds, source_lines
from tree_fairseq.trees import dictionary_subword_format


def leaf_path_lengths(trees: list[torch.Tensor], leaves: list[int], batch_size: int = 64) -> list[list[int]]:
    """The LCRS path length of every leaf of each tree but its last (the end of the sentence),
    untruncated. ``trees`` are flat (start, end) pairs as the data-bin stores them, ``leaves`` each
    sentence's leaf count. Trees of similar size are batched together (at most ``batch_size`` a
    batch, right-padded as the model's batches are) and the model's :func:`tree_paths` is called
    once per batch."""
    from tree_fairseq.modules.tree_positional_encoding import tree_paths

    spans = [tree.view(-1, 2).long() for tree in trees]
    lengths: list[list[int]] = [[] for _ in trees]
    order = sorted(range(len(trees)), key=lambda i: (spans[i].size(0) + leaves[i], i))
    for first in range(0, len(order), batch_size):
        batch = order[first:first + batch_size]
        num_nodes = max(spans[i].size(0) for i in batch)
        num_leaves = max(leaves[i] for i in batch)
        padded = torch.full((len(batch), num_nodes, 2), -1, dtype=torch.long)
        node_padding = torch.ones(len(batch), num_nodes, dtype=torch.bool)
        leaf_padding = torch.ones(len(batch), num_leaves, dtype=torch.bool)
        for row, i in enumerate(batch):
            padded[row, :spans[i].size(0)] = spans[i]
            node_padding[row, :spans[i].size(0)] = False
            leaf_padding[row, :leaves[i]] = False
        # A path visits each item (node or leaf) at most once: nodes + leaves steps leave nothing out.
        _, paths = tree_paths(padded, leaf_padding, node_padding, num_nodes + num_leaves)
        steps = (paths >= 0).sum(-1)
        for row, i in enumerate(batch):
            lengths[i] = steps[row, :leaves[i] - 1].tolist()
    return lengths


def read_split(data_bin: str, split: str, src: str, tgt: str) -> tuple[list, list[int], list[tuple[int, int]]]:
    """The split's source trees (flat spans), each sentence's leaf count (its tokens with the end of
    sentence) and the fewest and most words its subword pieces make (:func:`word_bounds`) from a
    data-bin."""
    from fairseq.data import Dictionary

    from tree_fairseq.data.tree_streams import load_stream, load_tree_streams

    _, spans = load_tree_streams(data_bin, split, src, tgt)
    prefix = os.path.join(data_bin, f"{split}.{src}-{tgt}.{src}")
    if not os.path.exists(f"{prefix}.idx"):
        raise ValueError(f"{prefix}.bin/.idx: no source text of split {split!r} in {data_bin}")
    tokens = load_stream(prefix)
    if len(tokens) != len(spans):
        raise ValueError(f"{data_bin}: split {split!r} has {len(tokens)} source sentences but {len(spans)} trees")
    dictionary = Dictionary.load(os.path.join(data_bin, f"dict.{src}.txt"))
    sentencepiece = dictionary_subword_format(dictionary.symbols[dictionary.nspecial:]) == "sentencepiece"
    leaves, words = [], []
    for i in range(len(tokens)):
        sentence = tokens[i]
        if len(sentence) < 2:
            raise ValueError(f"{prefix}.bin: sentence {i} of split {split!r} has no token before its end of "
                             "sentence, so no leaf path to measure")
        leaves.append(len(sentence))
        pieces = [None if index == dictionary.unk() else dictionary[index] for index in sentence[:-1].tolist()]
        words.append(word_bounds(pieces, sentencepiece))
    return [spans[i] for i in range(len(spans))], leaves, words


def word_bounds(pieces: list[str | None], sentencepiece: bool) -> tuple[int, int]:
    """The fewest and the most words a sentence's subword pieces make (None for an unknown piece,
    whose mark the data-bin has not kept). subword-nmt marks a piece that its word goes on after
    ('@@'), sentencepiece the first piece of a word ('\u2581'); the sentence's last piece ends a word
    and its first starts one, whatever their marks. The two bounds differ by the unknown pieces."""
    always = 0 if sentencepiece else len(pieces) - 1
    counted, unknown = 0, 0
    for position, piece in enumerate(pieces):
        if position == always:
            counted += 1
        elif piece is None:
            unknown += 1
        elif piece.startswith("\u2581") if sentencepiece else not piece.endswith("@@"):
            counted += 1
    return counted, counted + unknown


def check_source(path: str, words: list[int], binned: list[tuple[int, int]], data_bin: str) -> None:
    """Refuses a source side whose lines do not have the words of the data-bin's sentences (the
    target side, another split, untokenised text): the groups would be another text's."""
    differ = [i for i, (given, (low, high)) in enumerate(zip(words, binned)) if not low <= given <= high]
    if differ:
        i = differ[0]
        low, high = binned[i]
        stored = f"{low}" if low == high else f"{low} to {high} (its unknown pieces may or may not end a word)"
        raise ValueError(f"--source {path} line {i + 1} has {words[i]} words but sentence {i} of {data_bin} has "
                         f"{stored} ({len(differ)} of {len(words)} lines differ): give the tokenised source side "
                         "the data-bin was made from")


def path_length_table(trees: list, leaves: list[int], words: list[int], bounds: list[int], steps: int) -> list[dict]:
    """Per group of sentences by source words: sentences, leaves, the mean over sentences of their
    mean leaf path, the longest path, and the share of leaves with more than ``steps`` steps."""
    paths = leaf_path_lengths(trees, leaves)
    rows = []
    for label, indices in length_groups(words, bounds):
        lengths = [paths[i] for i in indices]
        pooled = [length for sentence in lengths for length in sentence]
        rows.append({"words": label, "sentences": len(indices), "leaves": len(pooled),
                     "mean_path": statistics.mean(statistics.mean(s) for s in lengths) if pooled else None,
                     "longest": max(pooled) if pooled else None,
                     "beyond": sum(length > steps for length in pooled) / len(pooled) if pooled else None})
    return rows


def markdown(rows: list[dict], steps: int) -> str:
    lines = [f"| source words | sentences | leaves | mean leaf path (steps) | longest | leaves over {steps} steps |",
             "|---|--:|--:|--:|--:|--:|"]
    for row in rows:
        if not row["leaves"]:
            lines.append(f"| {row['words']} | {row['sentences']} | 0 | | | |")
            continue
        lines.append(f"| {row['words']} | {row['sentences']} | {row['leaves']} | {row['mean_path']:.1f} | "
                     f"{row['longest']} | {100 * row['beyond']:.0f} % |")
    return "\n".join(lines)


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m tree_fairseq.analysis.path_lengths",
        description="LCRS path lengths (what tree positional encodings read) of a data-bin's source trees, "
        "grouped by the words of each sentence's source line.")
    parser.add_argument("data_bin", help="a data-bin made by tree-fairseq-preprocess, with source trees")
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--split", default="test", help="the split to read (default: test)")
    parser.add_argument("--source", required=True, metavar="FILE",
                        help="the split's tokenised source side, one line per sentence, as the data-bin was made "
                        "from it (its words group the sentences; a line must have its sentence's words)")
    parser.add_argument("--by-length", default="10,20,30", metavar="N[,N...]",
                        help="upper bounds of the groups in words, ascending (default 10,20,30: up to 10, 11-20, "
                        "21-30, over 30)")
    parser.add_argument("--steps", type=argtypes.nonnegative_int, default=10,
                        help="report the share of leaves whose path is longer than this many steps (default 10)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    try:
        bounds = parse_bounds(args.by_length)
        trees, leaves, binned = read_split(args.data_bin, args.split, args.source_lang, args.target_lang)
        words = [len(line.split()) for line in source_lines(args.source, len(trees),
                                                           f"{args.data_bin} split {args.split!r}")]
        check_source(args.source, words, binned, args.data_bin)
    except (OSError, ValueError) as error:
        sys.exit(f"path_lengths: error: {error}")
    print(markdown(path_length_table(trees, leaves, words, bounds, args.steps), args.steps))


if __name__ == "__main__":
    main()
