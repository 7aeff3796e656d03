#!/usr/bin/env python
"""How close dependency-derived trees come to a treebank's: unlabelled bracket F1 of a spaCy
pipeline's parses, converted to phrase structure as tree-fairseq-parse --parser spacy does (both
--dependency-tree-shape values), against gold trees, with balanced, left- and right-branching
trees over the same words beside them.

Gold: one bracketed tree per line (default: the NLTK Penn Treebank sample beside the
repository), normalised as everywhere in tree_fairseq (function tags and -NONE- traces
stripped, preterminals dropped, unary chains collapsed). The pipeline parses the gold words
(PTB escapes such as -LRB- and `` undone in what it reads, one sentence per line), as cased and,
with --lowercase, also as lowercased text (what IWSLT's recipe feeds it). Scoring
(tree_fairseq.trees.evaluation): brackets of >= 2 words, labels ignored, single words and the
whole sentence left out; corpus F1 pools the brackets of all sentences, sentence F1 is the mean
over the sentences with a gold bracket. Also printed: parse speed (sentences per second, the
pipeline alone, in the threads the environment allows: run with OMP_NUM_THREADS=1 for one
core) and the non-projective arcs lifted.

    OMP_NUM_THREADS=1 python scripts/parser_f1.py --spacy-model en_core_web_sm --lowercase
"""

import argparse
import sys
import time
from pathlib import Path

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.argtypes import positive_int
from tree_fairseq.cli.files import read_lines
from tree_fairseq.parsing.spacy_parser import SpacyParser
from tree_fairseq.trees import TRIVIAL_SHAPES, parse_tree, trivial_tree
from tree_fairseq.trees.dependency import DEPENDENCY_TREE_SHAPES, dependency_tree
from tree_fairseq.trees.evaluation import bracket_f1

DEFAULT_GOLD = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb-sample" / "wsj_0001-0199.mrg.txt"


def read_gold(path: Path, limit: int | None) -> list:
    """The first ``limit`` (all without) trees of ``path``, one a line, blank lines skipped. A line
    that is no tree is refused naming the file and line, a file of no tree as such: it would score
    0.0 F1 for every row."""
    gold = []
    for number, line in enumerate(read_lines(str(path)), 1):
        if limit is not None and len(gold) == limit:
            break
        if not line.strip():
            continue
        try:
            gold.append(parse_tree(line))
        except ValueError as error:
            raise ValueError(f"--gold {path} line {number}: {error}") from None
    if not gold:
        raise ValueError(f"--gold {path} holds no tree: nothing to score")
    return gold


def main(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spacy-model", required=True, help="an installed spaCy pipeline (name or directory)")
    parser.add_argument("--gold", default=str(DEFAULT_GOLD), help="gold trees, one per line (default: %(default)s)")
    parser.add_argument("--lowercase", action="store_true", help="also score the parses of the lowercased words")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the first N gold trees")
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="sentences per nlp.pipe batch (default: %(default)s)")
    args = parser.parse_args(argv)

    gold_path = Path(args.gold)
    if not gold_path.is_file():
        parser.error(f"--gold {gold_path}: no such file")
    try:
        gold = read_gold(gold_path, args.limit)
    except ValueError as error:
        sys.exit(f"parser_f1.py: error: {error}")
    spacy_parser = SpacyParser(args.spacy_model, batch_size=args.batch_size)
    print(f"{len(gold)} gold trees of {gold_path}; pipeline {spacy_parser.version}")
    rows = [(f"{shape} trees", [trivial_tree(list(tree.leaves), shape) for tree in gold]) for shape in TRIVIAL_SHAPES]
    for case in ["cased"] + (["lowercased"] if args.lowercase else []):
        sentences = [[word.lower() if case == "lowercased" else word for word in tree.leaves] for tree in gold]
        start = time.perf_counter()
        parses = list(spacy_parser.dependency_parses(sentences))
        seconds = time.perf_counter() - start
        for shape in DEPENDENCY_TREE_SHAPES:
            converted = [dependency_tree(parse, shape) for parse in parses]
            rows.append((f"spaCy, {shape}, {case} input", [tree for tree, _ in converted]))
        lifts = [lifted for _, lifted in converted]
        print(f"{case}: {len(parses) / seconds:.0f} sentences/s ({seconds:.1f} s); "
              f"{sum(lifts)} non-projective arcs lifted in {sum(map(bool, lifts))} sentences")
    print()
    print("| trees | corpus F1 | sentence F1 | precision | recall |")
    print("|---|---|---|---|---|")
    for name, predicted in rows:
        scores = bracket_f1(predicted, gold)
        print(f"| {name} | {100 * scores.corpus_f1:.1f} | {100 * scores.sentence_f1:.1f} | "
              f"{100 * scores.corpus_precision:.1f} | {100 * scores.corpus_recall:.1f} |")


if __name__ == "__main__":
    main()
