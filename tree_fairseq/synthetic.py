"""A translation benchmark whose word order only the source tree determines.

Each source sentence is a handful of distinct words drawn from a small vocabulary; its tree is a
random bracketing of those words whose every node is labelled ``STR`` (straight) or ``INV``
(inverted), as in an inversion transduction grammar. The target translates every word through a
fixed one-to-one lexicon and orders them by the tree: the children of an ``INV`` node come out
in reverse order, those of a ``STR`` node in order, recursively. So

    source  ka lo mi ne        tree  (STR (INV ka lo) (STR mi ne))
    target  LU BA TE SO        (ka lo mi ne -> BA LU TE SO, then ka lo inverted)

A model given the tree (its spans and labels) can be right on every sentence. A model given the
words alone cannot: the words are drawn independently of the tree, so all it can learn from a
source sentence is its length, and its best guess of the order is the most probable one given
the length. That guess is right with probability ``M(n)`` for a sentence of ``n`` words, and
the best exact match any tree-blind predictor can reach is the expectation of ``M`` over the
sentence lengths: the *tree-blind ceiling*, computed exactly by :func:`best_order_probability`.

Why ``M(n)`` is the probability of the all-straight derivation (all-inverted when
``p_inv > 0.5``): a node over ``n`` words picks its top-level split ``d`` (the number of
children and the cuts) and a label. An order (a permutation ``pi`` of the ``n`` words) can be
produced under split ``d`` as straight or as inverted, never both (the first child's words
would have to go both first and last), so ``P(pi) <= sum_d P(d) max(p_str, p_inv)
prod_children M(width)``; the monotone order (or, when ``p_inv > 0.5``, the reversed one)
reaches that bound because its children's orders are again the monotone ones, which by
induction reach ``M``. The words being distinct within a sentence, the target string
determines the permutation, so no other target string is more probable either.

The trees are written as a parser's output (one bracketed tree per line, bare words), so they go
through ``tree-fairseq-parse --parser bracketed --trees`` and ``tree-fairseq-preprocess`` like
any parser's trees; the command line (``tree-fairseq-synthetic``) also builds the data-bins of
the controls: the same text with balanced, left- and right-branching trees (which carry no
label and depend only on the length, so they are tree-blind too) and the text alone for
fairseq's ``translation`` task.
"""

import argparse
import json
import logging
import math
import os
import random
import shutil
import sys
from dataclasses import asdict, dataclass

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.argtypes import positive_int, probability, seed

SPLITS = ("train", "valid", "test")
TREE_KINDS = ("gold", "balanced", "left", "right")
STRAIGHT, INVERTED = "STR", "INV"
SOURCE_LANG, TARGET_LANG = "src", "tgt"

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


@dataclass(frozen=True)
class BenchmarkConfig:
    vocab_size: int = 16
    min_len: int = 3
    max_len: int = 6
    max_children: int = 3
    p_inv: float = 0.5
    train: int = 4000
    valid: int = 200
    test: int = 500
    seed: int = 1

    def check(self) -> None:
        if not 2 <= self.min_len <= self.max_len:
            raise ValueError(f"need 2 <= --min-len <= --max-len, got {self.min_len} and {self.max_len}")
        if self.vocab_size < self.max_len:
            raise ValueError(f"--vocab-size {self.vocab_size} < --max-len {self.max_len}: "
                             "a sentence's words are distinct")
        if self.vocab_size > len(_CONSONANTS) * len(_VOWELS) * len(_VOWELS):
            raise ValueError(f"--vocab-size {self.vocab_size} is more than this generator's words")
        if self.max_children < 2:
            raise ValueError("--max-children must be at least 2")
        if not 0.0 <= self.p_inv <= 1.0:
            raise ValueError("--p-inv must be a probability")
        if min(self.train, self.valid, self.test) < 1:
            raise ValueError("every split needs at least one sentence")


@dataclass(frozen=True)
class Example:
    source: list[str]
    tree: str  # bracketed, bare words
    target: list[str]


def vocabularies(size: int, seed: int) -> tuple[list[str], dict[str, str]]:
    """``size`` distinct source words (lower case, consonant-vowel syllables) and a one-to-one
    lexicon onto as many target words (upper case, vowel-consonant-vowel) in a random pairing."""
    rng = random.Random(f"vocabulary-{seed}")
    source = sorted({c + v for c in _CONSONANTS for v in _VOWELS})
    source += sorted({c + v + w for c in _CONSONANTS for v in _VOWELS for w in _VOWELS})
    source = source[:size] if size <= len(source) else source
    target = [(v + c + w).upper() for c in _CONSONANTS for v in _VOWELS for w in _VOWELS]
    rng.shuffle(target)
    return source, dict(zip(source, target[:size]))


def random_tree(words: list[str], rng: random.Random, max_children: int, p_inv: float):
    """``(bracketed, order)``: a random labelled bracketing of ``words`` and the target order of
    their positions. A span of ``n >= 2`` words gets 2 to ``min(max_children, n)`` children
    (uniform), cut at uniformly chosen points, and the label INV with probability ``p_inv``."""

    def build(start: int, end: int):
        n = end - start
        if n == 1:
            return words[start], [start]
        children = rng.randint(2, min(max_children, n))
        cuts = sorted(rng.sample(range(start + 1, end), children - 1))
        bounds = [start, *cuts, end]
        label = INVERTED if rng.random() < p_inv else STRAIGHT
        parts = [build(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
        if label == INVERTED:
            order = [i for _, child_order in reversed(parts) for i in child_order]
        else:
            order = [i for _, child_order in parts for i in child_order]
        return f"({label} " + " ".join(text for text, _ in parts) + ")", order

    return build(0, len(words))


def generate(config: BenchmarkConfig) -> dict[str, list[Example]]:
    """The three splits; the same config gives the same sentences."""
    config.check()
    source_vocab, lexicon = vocabularies(config.vocab_size, config.seed)
    splits = {}
    for split in SPLITS:
        rng = random.Random(f"{split}-{config.seed}")
        examples = []
        for _ in range(getattr(config, split)):
            words = rng.sample(source_vocab, rng.randint(config.min_len, config.max_len))
            tree, order = random_tree(words, rng, config.max_children, config.p_inv)
            examples.append(Example(words, tree, [lexicon[words[i]] for i in order]))
        splits[split] = examples
    return splits


def best_order_probability(n: int, max_children: int, p_inv: float) -> list[float]:
    """``M(0..n)``: ``M(k)`` is the probability of the most probable target order of a
    ``k``-word sentence under the generator, i.e. the exact match of the best tree-blind guess
    (see the module docstring for the proof that it is the all-straight, or all-inverted,
    derivation's probability). Exact, by dynamic programming over the splits."""
    best_label = max(p_inv, 1.0 - p_inv)
    m = [0.0, 1.0]
    for k in range(2, n + 1):
        widths = range(2, min(max_children, k) + 1)
        total = 0.0
        for c in widths:
            # sum over the compositions of k into c parts of the product of M(part)
            comp = [m[j] if 1 <= j < k else 0.0 for j in range(k + 1)]  # one part, narrower than k
            for _ in range(c - 1):
                comp = [sum(m[j] * comp[w - j] for j in range(1, w)) for w in range(k + 1)]
            total += comp[k] / math.comb(k - 1, c - 1) / len(widths)
        m.append(best_label * total)
    return m


@dataclass(frozen=True)
class Ceiling:
    expected: float  # E_n[M(n)] under the generator's length distribution
    test_lengths: float  # mean of M(n) over the test sentences' lengths (exact given them)
    test_sampled: float  # share of test sentences whose target is the best blind guess (a sample)


def tree_blind_ceiling(config: BenchmarkConfig, test: list[Example], lexicon: dict[str, str]) -> Ceiling:
    m = best_order_probability(config.max_len, config.max_children, config.p_inv)
    lengths = range(config.min_len, config.max_len + 1)
    reverse = config.p_inv > 0.5

    def guess(example: Example) -> list[str]:
        words = list(reversed(example.source)) if reverse else example.source
        return [lexicon[w] for w in words]

    return Ceiling(
        expected=sum(m[n] for n in lengths) / len(lengths),
        test_lengths=sum(m[len(e.source)] for e in test) / len(test),
        test_sampled=sum(guess(e) == e.target for e in test) / len(test),
    )


def write_text(splits: dict[str, list[Example]], directory: str) -> None:
    """``{split}.src``, ``{split}.tgt`` and ``{split}.parser.src`` (the gold trees, as a
    parser's output) in ``directory``, each whole or not at all."""
    from tree_fairseq.cli.files import write_lines

    os.makedirs(directory, exist_ok=True)
    for split, examples in splits.items():
        for suffix, lines in ((SOURCE_LANG, [" ".join(e.source) for e in examples]),
                              (TARGET_LANG, [" ".join(e.target) for e in examples]),
                              (f"parser.{SOURCE_LANG}", [e.tree for e in examples])):
            write_lines(os.path.join(directory, f"{split}.{suffix}"), lines)


def build_databins(text_dir: str, bin_dir: str, kinds=TREE_KINDS, text_only: bool = True) -> None:
    """The trees of every kind through ``tree-fairseq-parse`` (gold: ``--parser bracketed
    --trees {split}.parser.src``), one tree data-bin per kind through
    ``tree-fairseq-preprocess``, and the text alone through fairseq-preprocess."""
    from fairseq import options
    from fairseq_cli import preprocess as fairseq_preprocess

    from tree_fairseq.cli import parse as parse_cli
    from tree_fairseq.cli import preprocess as preprocess_cli

    prefixes = [f"--{split}pref" for split in SPLITS]
    common = ["--source-lang", SOURCE_LANG, "--target-lang", TARGET_LANG, "--workers", "1"]
    for split, flag in zip(SPLITS, prefixes):
        common += [flag, os.path.join(text_dir, split)]
    for kind in kinds:
        for split in SPLITS:
            text = os.path.join(text_dir, f"{split}.{SOURCE_LANG}")
            output = os.path.join(text_dir, f"{split}.{kind}.{SOURCE_LANG}")
            if kind == "gold":
                trees = os.path.join(text_dir, f"{split}.parser.{SOURCE_LANG}")
                parse_cli.main(["--input", text, "--output", output, "--parser", "bracketed", "--trees", trees])
            else:
                parse_cli.main(["--input", text, "--output", output, "--parser", kind])
        destdir = os.path.join(bin_dir, kind)
        shutil.rmtree(destdir, ignore_errors=True)
        preprocess_cli.main([*common, "--tree-suffix", kind, "--destdir", destdir])
    if text_only:
        destdir = os.path.join(bin_dir, "text")
        shutil.rmtree(destdir, ignore_errors=True)
        fairseq_preprocess.main(options.get_preprocessing_parser().parse_args([*common, "--destdir", destdir]))


def score_translations(generate_output: str) -> dict:
    """Exact match (%) and sacreBLEU of fairseq-generate's output (its ``H-`` and ``T-`` lines):
    ``{"sentences", "exact_match", "bleu"}``. The benchmark's vocabulary is closed, so its ``T-``
    lines are its test targets exactly; one holding ``<unk>`` is refused."""
    import sacrebleu

    hypotheses, references = {}, {}
    for line in generate_output.splitlines():
        kind, _, rest = line.partition("-")
        if kind in ("H", "T") and "\t" in rest:
            fields = rest.split("\t")
            if not fields[0].isdigit():
                continue
            (hypotheses if kind == "H" else references)[int(fields[0])] = fields[-1].strip()
    if not references or hypotheses.keys() != references.keys():
        raise ValueError(f"fairseq-generate output with {len(hypotheses)} hypotheses for {len(references)} references")
    ids = sorted(references)
    hyps, refs = [hypotheses[i] for i in ids], [references[i] for i in ids]
    unknown = sum("<unk>" in ref for ref in refs)
    if unknown:  # the benchmark's targets are all in its dictionary: a T- line with <unk> is not the test set
        raise ValueError(f"{unknown} of the {len(refs)} references (T- lines) hold <unk>: not the benchmark's "
                         "test set (a data-bin of other data?)")
    exact = sum(h.split() == r.split() for h, r in zip(hyps, refs))
    return {"sentences": len(ids), "exact_match": 100.0 * exact / len(ids),
            "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score}


def get_parser() -> argparse.ArgumentParser:
    defaults = BenchmarkConfig()
    parser = ArgumentParser(
        prog="tree-fairseq-synthetic",
        description="Make the tree-dependent translation benchmark: random sentences over a small "
        "vocabulary, their STR/INV trees as parser output, and targets translated word by word and "
        "ordered by the trees (children of INV nodes reversed). Writes OUT/text/ "
        "({split}.src, {split}.tgt, {split}.parser.src, {split}.{kind}.src trees), the data-bins "
        "OUT/data-bin/{gold,balanced,left,right} (tree_translation) and OUT/data-bin/text "
        "(fairseq's translation), and OUT/benchmark.json (the config and the tree-blind ceiling: "
        "the best exact match of any model that does not see the tree, computed exactly).",
    )
    parser.add_argument("--out", required=True,
                        help="output directory: a new or empty one, or one holding the benchmark of the same settings")
    parser.add_argument("--seed", type=seed, default=defaults.seed,
                        help="everything follows from it (default %(default)s)")
    parser.add_argument("--vocab-size", type=positive_int, default=defaults.vocab_size,
                        help="source (and target) words (default %(default)s)")
    parser.add_argument("--min-len", type=positive_int, default=defaults.min_len,
                        help="shortest sentence (default %(default)s)")
    parser.add_argument("--max-len", type=positive_int, default=defaults.max_len,
                        help="longest sentence (default %(default)s)")
    parser.add_argument("--max-children", type=positive_int, default=defaults.max_children,
                        help="most children of a node (default %(default)s)")
    parser.add_argument("--p-inv", type=probability, default=defaults.p_inv,
                        help="probability that a node is INV (default %(default)s)")
    for split in SPLITS:
        parser.add_argument(f"--{split}", type=positive_int, default=getattr(defaults, split),
                            help=f"{split} sentences (default %(default)s)")
    parser.add_argument("--no-databins", action="store_true", help="write the text and trees only")
    return parser


def check_out(out: str, config: BenchmarkConfig) -> None:
    """Refuse an ``out`` that is a file, or that holds another benchmark: one whose benchmark.json
    records other settings, or text/ or data-bin/ without a benchmark.json (a run cut short, or not
    this command's folder). Writing there would mix the two: --no-databins leaves the data-bins and
    the text/{split}.{kind}.src trees of the old one beside the new text, and benchmark.json says
    the new settings. Refused, not removed: the data-bins may be what trainings are reading."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {out} is a file: name a folder")
    recorded_path = os.path.join(out, "benchmark.json")
    if os.path.exists(recorded_path):
        try:
            with open(recorded_path, encoding="utf-8") as f:
                recorded = json.load(f)["config"]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"--out {out} holds a {recorded_path} that is no benchmark's record: name another "
                             "folder, or remove it") from None
        asked = asdict(config)
        if recorded != asked:
            differences = ", ".join(f"--{key.replace('_', '-')} {recorded.get(key)} there, {asked[key]} asked"
                                    for key in asked if recorded.get(key) != asked[key])
            raise ValueError(f"--out {out} holds the benchmark of other settings ({differences or recorded}): "
                             "writing there would mix the two; name another folder, or remove it")
        return
    held = [name for name in ("text", "data-bin") if os.path.exists(os.path.join(out, name))]
    if held:
        raise ValueError(f"--out {out} holds {' and '.join(held)}/ but no benchmark.json (a run cut short, or "
                         "another folder): writing there could leave its files beside the new benchmark's; name "
                         "another folder, or remove them")


def make(args: argparse.Namespace) -> dict:
    from tree_fairseq.cli.files import write_json

    config = BenchmarkConfig(**{k: getattr(args, k) for k in asdict(BenchmarkConfig()).keys()})
    config.check()
    check_out(args.out, config)
    splits = generate(config)
    _, lexicon = vocabularies(config.vocab_size, config.seed)
    ceiling = tree_blind_ceiling(config, splits["test"], lexicon)
    text_dir = os.path.join(args.out, "text")
    write_text(splits, text_dir)
    if not args.no_databins:
        build_databins(text_dir, os.path.join(args.out, "data-bin"))
    summary = {"config": asdict(config), "tree_blind_ceiling": asdict(ceiling)}
    write_json(os.path.join(args.out, "benchmark.json"), summary)  # last: tree_benchmark.py reads it as done
    return summary


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    try:
        summary = make(args)
    except (OSError, ValueError) as error:
        sys.exit(f"tree-fairseq-synthetic: error: {error}")
    logging.getLogger().setLevel(logging.WARNING)
    ceiling = summary["tree_blind_ceiling"]
    print(f"tree-dependent benchmark in {args.out}: {json.dumps(summary['config'])}")
    print("tree-blind ceiling (best exact match without the tree): "
          f"{100 * ceiling['expected']:.2f}% exact over the length distribution, "
          f"{100 * ceiling['test_lengths']:.2f}% exact given the test sentences' lengths, "
          f"{100 * ceiling['test_sampled']:.2f}% of the test targets are that best guess (sampled)")


if __name__ == "__main__":
    main()
