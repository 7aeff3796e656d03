"""Grammar induction with constituent attention: the pieces scripts/induce_trees.py and
scripts/score_induced_trees.py share (reading the gold trees and the extra text, the held-out
validation sentences, scores, induced-tree files, the link probabilities' distribution, the table
over seeds, how the links order word boundaries against the gold trees, published unlexicalised
trees, the command-line type of a count). Imports neither fairseq nor matplotlib.

Scores are PRPN / ON-LSTM's (:func:`tree_fairseq.trees.evaluation.bracket_f1` with
``every_sentence=True``, the whole-sentence bracket left out): the sentence-level F1, the paper's
metric, and the corpus-level F1 beside it, on every sentence and on those of at most ``short`` words.
"""

import gzip
import html
import math
import random
import statistics
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import torch

from tree_fairseq.cli import files
from tree_fairseq.trees import Tree, parse_tree, trivial_tree
from tree_fairseq.trees.evaluation import (
    brackets,
    bracket_f1,
    parse_tree_of_word_tags,
    parse_tree_without_punctuation,
    random_binary_tree,
)

WORD_FILTERS = {"word-tags": parse_tree_of_word_tags, "punctuation-tags": parse_tree_without_punctuation,
                "none": parse_tree}
# Bins of the link probabilities' histogram: 20 of width 0.05 over [0, 1].
LINK_BINS = 20
# The word of a published (unlexicalised) induced tree: the structure is the result, the words are
# the treebank's and stay there.
HIDDEN_WORD = "_"


def read_gold(path: Path, word_filter: str = "word-tags", keep_case: bool = False, limit: int | None = None):
    """The normalised gold trees of ``path`` (one bracketed tree per line; blank lines skipped; the
    first ``limit`` only) and their words, lowercased unless ``keep_case``. A tree left without words
    by ``word_filter`` is skipped (it has nothing to parse). ValueError naming the file and line for
    a line that is no tree, and the file for text that is not UTF-8."""
    lines = [(number, line) for number, line in enumerate(read_text(path).splitlines(), 1) if line.strip()]
    if limit is not None:
        lines = lines[:limit]
    gold = []
    for number, line in lines:
        try:
            tree = WORD_FILTERS[word_filter](line)
        except ValueError as error:
            raise ValueError(f"{path}, line {number}: {error}") from None
        if tree is not None:
            gold.append(tree)
    sentences = [[word if keep_case else word.lower() for word in tree.leaves] for tree in gold]
    return gold, sentences


def _is_word(token: str) -> bool:
    """A token with a letter or a digit in it (punctuation-only tokens are no words here, as the
    PTB's punctuation tags are not among the kept word tags)."""
    return any(unicodedata.category(c)[0] in "LN" for c in token)


def extra_sentences(path: Path, keep_case: bool = False) -> list[list[str]]:
    """Unlabelled training text, one tokenised sentence per line (Moses-escaped as IWSLT's, ``&apos;``
    and the like, or plain), made like the trees' words: unescaped, lowercased unless ``keep_case``,
    punctuation-only tokens left out; a line left without words is skipped. ValueError naming the
    file for text that is not UTF-8."""
    found = []
    for line in read_text(path).splitlines():
        words = [html.unescape(token) for token in line.split()]
        words = [word if keep_case else word.lower() for word in words if _is_word(word)]
        if words:
            found.append(words)
    return found


def held_out(count: int, fraction: float, seed: int) -> list[int]:
    """The indices (sorted) of the ``round(fraction * count)`` sentences held out for validation,
    drawn with ``random.Random(seed)``: the same for every training seed."""
    if not 0 < fraction < 1:
        raise ValueError(f"the validation fraction must be between 0 and 1, not {fraction}")
    size = round(fraction * count)
    if size < 1 or size >= count:
        raise ValueError(f"a validation fraction of {fraction} of {count} sentences leaves no validation or no "
                         "training sentence")
    return sorted(random.Random(seed).sample(range(count), size))


def scores(trees: Sequence, gold: Sequence, short: Sequence[int]) -> dict:
    """Sentence- and corpus-level F1 (PRPN / ON-LSTM's) of ``trees`` on every sentence and on the
    sentences ``short``."""
    found = {}
    for name, indices in (("all", range(len(gold))), ("short", short)):
        result = bracket_f1([trees[i] for i in indices], [gold[i] for i in indices], every_sentence=True)
        found[name] = {"sentence_f1": result.sentence_f1, "corpus_f1": result.corpus_f1,
                       "corpus_precision": result.corpus_precision, "corpus_recall": result.corpus_recall,
                       "sentences": len(indices)}
    return found


def baselines(sentences: Sequence[Sequence[str]], seed: int) -> dict:
    """Left-branching, right-branching and random binary trees (``random.Random(seed)``) over the
    sentences."""
    rng = random.Random(seed)
    return {
        "left-branching": [trivial_tree(list(words), "left") for words in sentences],
        "right-branching": [trivial_tree(list(words), "right") for words in sentences],
        "random": [random_binary_tree(words, rng) for words in sentences],
    }


def link_distribution(links: Sequence, threshold: float = 0.8) -> list[dict]:
    """Per layer (from the lowest), the distribution of the link probabilities of every pair of
    neighbouring words: a histogram of :data:`LINK_BINS` bins over [0, 1], the share above
    ``threshold`` (those Algorithm 1 does not split at), mean and quartiles."""
    if not links:
        return []
    layers = links[0].shape[0]
    found = []
    for layer in range(layers):
        values = sorted(float(v) for a in links for v in a[layer].tolist())
        histogram = [0] * LINK_BINS
        for v in values:
            histogram[min(int(v * LINK_BINS), LINK_BINS - 1)] += 1
        found.append({
            "layer": layer, "links": len(values), "histogram": histogram,
            "above_threshold": sum(v > threshold for v in values) / len(values) if values else math.nan,
            "mean": statistics.fmean(values) if values else math.nan,
            "quartiles": statistics.quantiles(values, n=4) if len(values) > 1 else values * 3,
        })
    return found


def own_links(links):
    """Each layer's own link probabilities ``â^l`` recovered from the accumulated ``a^l`` the
    encoder returns (``(L, k - 1)``), by inverting the hierarchical constraint
    ``a^l = a^{l-1} + (1 - a^{l-1}) · â^l``: ``â^0 = a^0``, ``â^l = (a^l - a^{l-1}) / (1 - a^{l-1})``.
    Where ``1 - a^{l-1} < 1e-6`` the own link is not recoverable and is NaN."""
    own = links.clone().double()
    below = links[:-1].double()
    room = 1.0 - below
    own[1:] = ((links[1:].double() - below) / room.clamp_min(1e-6)).masked_fill(room < 1e-6, math.nan)
    return own


def boundary_sizes(tree) -> list[int]:
    """For each pair of neighbouring words (j, j + 1), the number of words of the smallest node of
    ``tree`` that holds both: 2 inside a two-word phrase, the sentence's length at a boundary
    between the root's children. The larger it is, the earlier a top-down split should cut there."""
    spans = brackets(tree, drop_trivial=False) | {(0, len(tree.leaves) - 1)}
    return [min(end - start + 1 for start, end in spans if start <= j < end) for j in range(len(tree.leaves) - 1)]


def link_agreement(links: Sequence, gold: Sequence) -> list[dict]:
    """Per layer (from the lowest), how the link probabilities order each sentence's word boundaries
    against the gold tree, for the accumulated links ``a^l`` (what Algorithm 1 splits on) and each
    layer's own ``â^l`` (:func:`own_links`).

    ``concordance``: over every two boundaries of the same sentence whose smallest holding gold
    nodes differ in size (:func:`boundary_sizes`), the share where the boundary of the larger node
    has the lower link (a tie counts a half): 0.5 is no agreement with the gold tree, 1 an order in
    which splitting at the weakest link first yields every gold node. It does not depend on the
    threshold. ``own_mean`` and ``own_quartiles``: the own links' distribution (a two-way softmax
    per word bounds their mean near 0.5 whatever is learnt; their spread is what can change)."""
    if not links:
        return []
    if len(links) != len(gold):
        raise ValueError(f"{len(links)} sentences' links for {len(gold)} gold trees")
    layers = links[0].shape[0]
    agree = {kind: torch.zeros(layers, dtype=torch.float64) for kind in ("accumulated", "own")}
    pairs = {kind: torch.zeros(layers, dtype=torch.int64) for kind in ("accumulated", "own")}
    own_values: list[list[float]] = [[] for _ in range(layers)]
    for a, tree in zip(links, gold):
        if a.shape[1] != len(tree.leaves) - 1:
            raise ValueError(f"links of {a.shape[1] + 1} words for a gold tree of {len(tree.leaves)}")
        sizes = torch.tensor(boundary_sizes(tree))
        larger = sizes[:, None] > sizes[None, :]  # boundary j is cut before boundary k
        own = own_links(a)
        for kind, values in (("accumulated", a.double()), ("own", own)):
            lower = (values[:, :, None] < values[:, None, :]).double()
            tied = (values[:, :, None] == values[:, None, :]).double()
            counted = larger & ~(values[:, :, None].isnan() | values[:, None, :].isnan())  # (L, j, k)
            agree[kind] += ((lower + 0.5 * tied) * counted).sum(dim=(1, 2))
            pairs[kind] += counted.sum(dim=(1, 2))
        for layer in range(layers):
            own_values[layer].extend(v for v in own[layer].tolist() if not math.isnan(v))
    found = []
    for layer in range(layers):
        values = sorted(own_values[layer])
        share = {kind: float(agree[kind][layer] / pairs[kind][layer]) if pairs[kind][layer] else math.nan
                 for kind in agree}
        found.append({
            "layer": layer, "pairs": int(pairs["accumulated"][layer]),
            "concordance": share["accumulated"], "own_concordance": share["own"],
            "own_mean": statistics.fmean(values) if values else math.nan,
            "own_quartiles": statistics.quantiles(values, n=4) if len(values) > 1 else values * 3,
        })
    return found


def write_trees(path: Path, trees: Sequence, locked: bool = False) -> None:
    """One bracketed tree per line (nodes labelled ``X``), written whole or not at all
    (:func:`tree_fairseq.cli.files.replacing`)."""
    files.write_lines(path, (tree.to_bracketed(tags=False) for tree in trees), locked)


def unlexicalised(tree) -> str:
    """``tree`` as one line of brackets with every word written as :data:`HIDDEN_WORD`: the form in
    which induced trees are published, the sentences' words being the treebank's."""
    return Tree((HIDDEN_WORD,) * len(tree.leaves), tree.nodes).to_bracketed(tags=False)


def read_text(path: Path) -> str:
    """A file's text, gunzipped when its name ends in ``.gz``; ValueError naming the file when it is
    no gzip file, a cut-short one, or not UTF-8."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return handle.read()
        return path.read_text(encoding="utf-8")
    except (gzip.BadGzipFile, EOFError) as error:
        raise ValueError(f"{path}: not a whole gzip file ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error})") from None


def read_induced(path: Path, gold: Sequence) -> list:
    """The trees of an induced-tree file (gzipped if its name ends in ``.gz``), one per gold tree,
    over the same words (compared without case) or, for an unlexicalised tree (every word
    :data:`HIDDEN_WORD`, :func:`unlexicalised`), as many words; ValueError naming the line otherwise."""
    lines = read_text(path).splitlines()
    if len(lines) != len(gold):
        raise ValueError(f"{path}: {len(lines)} trees for {len(gold)} gold trees")
    trees = []
    for number, (line, reference) in enumerate(zip(lines, gold), 1):
        try:
            tree = parse_tree(line)
        except ValueError as error:
            raise ValueError(f"{path}, line {number}: {error}") from None
        if set(tree.leaves) == {HIDDEN_WORD}:
            if len(tree.leaves) != len(reference.leaves):
                raise ValueError(f"{path}, line {number}: a tree of {len(tree.leaves)} words for a gold tree of "
                                 f"{len(reference.leaves)}")
        elif [w.lower() for w in tree.leaves] != [w.lower() for w in reference.leaves]:
            raise ValueError(f"{path}, line {number}: the words {' '.join(tree.leaves[:8])} ... are not the gold "
                             f"tree's {' '.join(reference.leaves[:8])} ...")
        trees.append(tree)
    return trees


def seed_table(results: Sequence[dict], m: int = 3) -> list[dict]:
    """Median and max over seeds, per setting, of the sentence-level F1 with Algorithm 1's ``m``,
    as the paper's Tables 1 and 2 (every sentence and the short ones), and the baselines (the
    random trees' median and max over the seeds too). ``results``: the scores.json of finished runs."""
    by_setting: dict[str, list[dict]] = {}
    for result in results:
        by_setting.setdefault(result["setting"], []).append(result)
    rows = []
    for setting, runs in sorted(by_setting.items()):
        archs = {run["arch"] for run in runs}
        if len(archs) > 1:
            raise ValueError(f"setting {setting}: runs of several architectures ({', '.join(sorted(archs))})")
        seeds = [run["seed"] for run in runs]
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"setting {setting}: seed(s) given twice: {sorted(seeds)}")
        if str(m) not in runs[0]["induced"]:
            raise ValueError(f"m = {m} is not a layer of {archs.pop()} (m = 0 .. {len(runs[0]['induced']) - 1})")
        rows.append(_row(f"constituent attention, {setting}, m={m}", sorted(seeds),
                         [run["induced"][str(m)] for run in runs]))
    # The baselines are scored on the same sentences by every run, the random trees seeded by the run's
    # seed: runs of two settings with one seed hold the same figures, counted once.
    by_seed: dict[int, dict] = {}
    for run in results:
        if by_seed.setdefault(run["seed"], run["baselines"]) != run["baselines"]:
            raise ValueError(f"two runs of seed {run['seed']} hold different baseline figures (other sentences "
                             "or gold trees?): give runs scored on the same sentences")
    for name in ("random", "left-branching", "right-branching"):
        seeds = sorted(by_seed)
        rows.append(_row(name, seeds, [by_seed[seed][name] for seed in seeds]))
    return rows


def _row(name: str, seeds: list, found: list[dict]) -> dict:
    row = {"trees": name, "seeds": seeds}
    for subset in ("all", "short"):
        values = [100 * f[subset]["sentence_f1"] for f in found]
        row[subset] = {"median": statistics.median(values), "max": max(values)}
    return row
