"""Bracket F1 between predicted and gold trees (unlabelled for unsupervised parsing, labelled or
unlabelled for parsing as translation), and the random-tree baseline.

Conventions, made here and stated by every score:

- a tree's brackets are the spans of its nodes (labels ignored unless ``labelled``, then
  ``(label, start, end)``); in the normal form
  (:mod:`tree_fairseq.trees.tree`) every node covers >= 2 words and spans are unique, so
  single-word spans never count and a unary chain counts once;
- ``drop_trivial=True`` (default) also leaves out the whole-sentence span, which every tree has
  (as Kim et al. 2019 and most unsupervised-parsing work since); ``False`` keeps it;
- sentence-level F1 is the mean of each sentence's F1 (0 when no predicted bracket matches).
  By default the mean is over the sentences with at least one gold bracket (after the above).
  ``every_sentence=True`` is the convention of PRPN and ON-LSTM's evaluation (Shen et al. 2018a,
  b), which the unsupervised-parsing papers following them report: every sentence counts, and one
  without gold brackets (one or two words, or a flat gold tree) scores 1 when the prediction has
  no bracket either and 0 otherwise (recall is taken as 1 there, precision as 1 or 0). Their code
  adds 1e-8 to the denominators, which moves a score by less than 1e-7; not done here.
  Corpus-level F1 is the F1 of the brackets pooled over all sentences (the same either way);
- a predicted tree may be ``None``: a malformed output (of a model that writes trees). It has no
  brackets, so it scores F1 0 and adds no predicted bracket to the corpus totals;
- by default predicted and gold trees must cover the same number of words (an error otherwise);
  ``same_words=False`` scores a tree over other words as it is, by leaf positions (a model's
  output tree: its brackets past the first wrong word rarely match);
- punctuation is scored like any word of the trees given; two readers of PTB trees leave words
  out first. :func:`parse_tree_of_word_tags` keeps only the words whose part-of-speech tag is one
  of :data:`WORD_TAGS`, the 36 tags of PRPN and ON-LSTM's whitelist: punctuation, currency
  (``$``, ``#``) and empty elements go. :func:`parse_tree_without_punctuation` drops the words
  tagged :data:`PUNCTUATION_TAGS` only (``$`` and ``#`` stay). Either way the sentence-final
  period no longer hangs from the root, where no right-branching bracket but the whole sentence
  could match;
- WSJ-10 is the sentences of at most 10 words after that removal (:func:`short_sentences`).
"""

import random
from collections.abc import Sequence
from typing import NamedTuple

from tree_fairseq.trees.bracketed import RawTree, TreeError, read_bracketed
from tree_fairseq.trees.tree import Node, Tree, normalize

RANDOM_LABEL = "X"
# The PTB part-of-speech tags of punctuation (ON-LSTM's list; ``$`` and ``#`` are kept as words).
PUNCTUATION_TAGS = frozenset({".", ",", ":", "``", "''", "-LRB-", "-RRB-"})
# The PTB part-of-speech tags of the words PRPN and ON-LSTM keep (every other word is dropped:
# punctuation, ``$``, ``#``, ``-NONE-``).
WORD_TAGS = frozenset({
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP", "NNPS", "PDT",
    "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ",
    "WDT", "WP", "WP$", "WRB",
})


class BracketScores(NamedTuple):
    sentence_f1: float  # mean of per-sentence F1 (over the sentences with a gold bracket, or all)
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
    every_sentence: bool = False,
) -> BracketScores:
    """Bracket F1 of ``predicted`` against ``gold`` trees (see the module docstring for the
    conventions; ``None`` is a malformed prediction). ``every_sentence``: the sentence-level
    mean over every sentence, PRPN / ON-LSTM's convention (default: over the sentences with a
    gold bracket)."""
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
        elif every_sentence:
            sentence_scores.append(0.0 if predicted_spans else 1.0)
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


def short_sentences(trees: Sequence[Tree], max_words: int = 10) -> list[int]:
    """The indices of the trees of at most ``max_words`` words: WSJ-10 (Klein and Manning 2002;
    PRPN, ON-LSTM and Wang et al. 2019 take it from the whole PTB) when ``trees`` are the PTB read
    without punctuation (:func:`parse_tree_of_word_tags`)."""
    return [index for index, tree in enumerate(trees) if len(tree.leaves) <= max_words]


def parse_tree_without_punctuation(line: str, tags: frozenset[str] = PUNCTUATION_TAGS) -> Tree | None:
    """One line of PTB brackets without the words tagged with one of ``tags`` (and the nodes they
    leave empty), in normal form as :func:`~tree_fairseq.trees.parse_tree` gives; None when no
    word is left."""
    return _parse_keeping(line, lambda tag: tag not in tags)


def parse_tree_of_word_tags(line: str, tags: frozenset[str] = WORD_TAGS) -> Tree | None:
    """One line of PTB brackets with only the words tagged with one of ``tags`` (default PRPN and
    ON-LSTM's whitelist; the nodes left empty go too), in normal form as
    :func:`~tree_fairseq.trees.parse_tree` gives; None when no word is left."""
    return _parse_keeping(line, lambda tag: tag in tags)


def _parse_keeping(line: str, keep_tag) -> Tree | None:
    trees = [tree for tree in (_keeping(tree, keep_tag) for tree in read_bracketed(line)) if tree is not None]
    try:
        return normalize(trees) if trees else None
    except TreeError:  # only traces were left
        return None


def _keeping(tree: RawTree, keep_tag) -> RawTree | None:
    """``tree`` without its preterminals whose tag ``keep_tag`` rejects (and nodes left empty)."""
    if tree.is_word:
        return tree
    if len(tree.children) == 1 and tree.children[0].is_word and not keep_tag(tree.label):
        return None
    children = [child for child in (_keeping(child, keep_tag) for child in tree.children) if child is not None]
    return RawTree(tree.label, children) if children else None
