"""Bracket F1 between predicted and gold trees (unlabelled for unsupervised parsing, labelled or
unlabelled for parsing as translation), and the random-tree baseline.

Conventions, made here and stated by every score:

- a tree's brackets are the spans of its nodes (labels ignored unless ``labelled``, then
  ``(label, start, end)``); in the normal form
  (:mod:`tree_fairseq.trees.tree`) every node covers >= 2 words and spans are unique, so
  single-word spans never count and a unary chain counts once;
- ``drop_trivial=True`` (default) also leaves out the whole-sentence span, which every tree has
  (as Kim et al. 2019 and most unsupervised-parsing work since); ``False`` keeps it;
- sentence-level F1 is the mean over the sentences with at least one gold bracket (after the
  above) of each sentence's F1, 0 when no predicted bracket matches; corpus-level F1 is the F1 of
  the brackets pooled over all sentences;
- a predicted tree may be ``None``: a malformed output (of a model that writes trees). It has no
  brackets, so it scores F1 0 and adds no predicted bracket to the corpus totals;
- by default predicted and gold trees must cover the same number of words (an error otherwise);
  ``same_words=False`` scores a tree over other words as it is, by leaf positions (a model's
  output tree: its brackets past the first wrong word rarely match);
- punctuation is scored like any word of the trees given; :func:`parse_tree_without_punctuation`
  reads a PTB tree without it, as unsupervised-parsing work on the PTB usually scores (e.g. PRPN
  and ON-LSTM): with it, the sentence-final period hangs from the root, so no right-branching
  bracket but the whole sentence can match.
"""

import random
from collections.abc import Sequence
from typing import NamedTuple

from tree_fairseq.trees.bracketed import RawTree, TreeError, read_bracketed
from tree_fairseq.trees.tree import Node, Tree, normalize

RANDOM_LABEL = "X"
# The PTB part-of-speech tags of punctuation (ON-LSTM's list; ``$`` and ``#`` are kept as words).
PUNCTUATION_TAGS = frozenset({".", ",", ":", "``", "''", "-LRB-", "-RRB-"})


class BracketScores(NamedTuple):
    sentence_f1: float  # mean of per-sentence F1 over the sentences with a gold bracket
    corpus_f1: float  # F1 of the brackets pooled over all sentences
    corpus_precision: float
    corpus_recall: float
    scored_sentences: int  # sentences in the sentence-level mean


def brackets(tree: Tree, drop_trivial: bool = True, labelled: bool = False) -> set[tuple]:
    """The inclusive ``(start, end)`` spans (``(label, start, end)`` when ``labelled``) of the
    tree's nodes of >= 2 words, without the whole-sentence span when ``drop_trivial``."""
    whole = (0, len(tree.leaves) - 1)
    return {
        (node.label, node.start, node.end) if labelled else (node.start, node.end)
        for node in tree.nodes
        if node.end > node.start and not (drop_trivial and (node.start, node.end) == whole)
    }


def _f1(matched: int, predicted: int, gold: int) -> tuple[float, float, float]:
    precision = matched / predicted if predicted else 0.0
    recall = matched / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if matched else 0.0
    return precision, recall, f1


def bracket_f1(
    predicted: Sequence[Tree | None],
    gold: Sequence[Tree],
    drop_trivial: bool = True,
    labelled: bool = False,
    same_words: bool = True,
) -> BracketScores:
    """Bracket F1 of ``predicted`` against ``gold`` trees (see the module docstring for the
    conventions; ``None`` is a malformed prediction)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted trees but {len(gold)} gold trees")
    total_matched = total_predicted = total_gold = 0
    sentence_scores = []
    for index, (prediction, reference) in enumerate(zip(predicted, gold)):
        if same_words and prediction is not None and len(prediction.leaves) != len(reference.leaves):
            raise ValueError(f"sentence {index}: {len(prediction.leaves)} predicted leaves but "
                             f"{len(reference.leaves)} gold leaves")
        predicted_spans = brackets(prediction, drop_trivial, labelled) if prediction is not None else set()
        gold_spans = brackets(reference, drop_trivial, labelled)
        matched = len(predicted_spans & gold_spans)
        total_matched += matched
        total_predicted += len(predicted_spans)
        total_gold += len(gold_spans)
        if gold_spans:
            sentence_scores.append(_f1(matched, len(predicted_spans), len(gold_spans))[2])
    precision, recall, f1 = _f1(total_matched, total_predicted, total_gold)
    sentence_f1 = sum(sentence_scores) / len(sentence_scores) if sentence_scores else 0.0
    return BracketScores(sentence_f1, f1, precision, recall, len(sentence_scores))


def random_binary_tree(tokens: Sequence[str], rng: random.Random) -> Tree:
    """A binary tree over ``tokens`` built top-down, each span split at a split point drawn
    uniformly by ``rng`` (pass a seeded ``random.Random`` for a reproducible baseline)."""
    spans = []
    pending = [(0, len(tokens) - 1)]
    while pending:
        start, end = pending.pop()
        if end <= start:
            continue
        spans.append((start, end))
        split = rng.randint(start, end - 1)  # the last token of the left part
        pending.extend([(start, split), (split + 1, end)])
    return Tree(tuple(tokens), tuple(Node(RANDOM_LABEL, start, end) for start, end in spans))


def parse_tree_without_punctuation(line: str, tags: frozenset[str] = PUNCTUATION_TAGS) -> Tree | None:
    """One line of PTB brackets without the words tagged with one of ``tags`` (and the nodes they
    leave empty), in normal form as :func:`~tree_fairseq.trees.parse_tree` gives; None when no
    word is left."""
    trees = [tree for tree in (_without_tags(tree, tags) for tree in read_bracketed(line)) if tree is not None]
    try:
        return normalize(trees) if trees else None
    except TreeError:  # only traces were left
        return None


def _without_tags(tree: RawTree, tags: frozenset[str]) -> RawTree | None:
    if tree.is_word:
        return tree
    if tree.label in tags and len(tree.children) == 1 and tree.children[0].is_word:
        return None
    children = [child for child in (_without_tags(child, tags) for child in tree.children) if child is not None]
    return RawTree(tree.label, children) if children else None
