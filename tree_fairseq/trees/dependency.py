"""Phrase structure from a dependency parse, by head projection (Collins 1999, ch. 2; Xia and
Palmer 2001): every head word projects phrases over itself and the subtrees of its dependents.

The input is one sentence's words with, for each, the index of its head (``-1`` for a root), its
coarse part of speech (Universal Dependencies' UPOS: ``NOUN``, ``VERB``, ``PUNCT``, ...) and,
where the parser gives one, a finer tag. Two shapes (:data:`DEPENDENCY_TREE_SHAPES`):

- ``layered``: a head with its right dependents forms an inner phrase; its left dependents and the
  punctuation after its last right dependent attach above it, in an outer phrase over the head's
  whole yield. A verb phrase thus excludes its subject and the sentence's final full stop:
  ``I saw her .`` -> ``(VP (PRP I) (VP (VBD saw) (PRP her)) (. .))``. Punctuation between the head
  and a right dependent stays inside, so every phrase is contiguous.
- ``flat``: one phrase per head over its whole yield.

A phrase is labelled from its head's coarse part of speech (:func:`phrase_label`): NOUN, PROPN
and PRON give NP, VERB and AUX VP, ADJ ADJP, ADV ADVP, ADP PP, any other POS that POS + ``P``
(DET -> DETP). Each word keeps its finer tag (its coarse one when it has none) as its preterminal,
the label of the node over its BPE pieces (:mod:`tree_fairseq.trees.subwords`).

What head projection cannot express: a phrase that is not a head's inner part or whole yield (a
PTB noun phrase ``the man`` before its PP has no head-projected span when the head takes both
sides), labels beyond the head's part of speech (no S vs VP, SBAR, ...), and the scheme's own
choices of head (in Universal Dependencies a preposition is a dependent of its noun, so ``in the
house`` is an NP; in spaCy's English scheme it heads a PP).

Before projection the tree is made projective: a non-projective arc (one spanning a word its head
does not dominate) is lifted to its head's head, the shortest such arc first (the leftmost among
equals), until none is left (Nivre and Nilsson 2005 lift the same way). Several roots are joined
under one ``ROOT`` over the sentence. Everything here is iterative: a 1,000-word chain converts
without touching Python's recursion limit.
"""

from dataclasses import dataclass

from tree_fairseq.trees.bracketed import TreeError
from tree_fairseq.trees.tree import ROOT_LABEL, Node, Tree

DEPENDENCY_TREE_SHAPES = ("layered", "flat")
PUNCTUATION_POS = "PUNCT"
_PHRASE_OF_POS = {"NOUN": "NP", "PROPN": "NP", "PRON": "NP", "VERB": "VP", "AUX": "VP", "ADJ": "ADJP",
                  "ADV": "ADVP", "ADP": "PP"}
# A word without a part of speech (CoNLL-U's ``_``, a pipeline without a tagger).
_UNKNOWN_POS = "X"


@dataclass(frozen=True)
class DependencyParse:
    """One sentence as a dependency parser gives it. ``heads[i]`` is the index of word ``i``'s
    head, ``-1`` for a root; ``pos`` the coarse parts of speech; ``tags`` finer ones or None."""

    words: tuple[str, ...]
    heads: tuple[int, ...]
    pos: tuple[str, ...]
    tags: tuple[str, ...] | None = None

    def __post_init__(self):
        for name in ("words", "heads", "pos") + (("tags",) if self.tags is not None else ()):
            object.__setattr__(self, name, tuple(getattr(self, name)))
            if len(getattr(self, name)) != len(self.words):
                raise TreeError(f"{len(getattr(self, name))} {name} for {len(self.words)} words")
        if not self.words:
            raise TreeError("a dependency parse without words")


def phrase_label(pos: str) -> str:
    """The label of a phrase whose head has the coarse part of speech ``pos``."""
    pos = pos if pos and pos != "_" else _UNKNOWN_POS
    return _PHRASE_OF_POS.get(pos, pos + "P")


def dependency_tree(parse: DependencyParse, shape: str = "layered") -> tuple[Tree, int]:
    """The phrase-structure tree of ``parse`` (normal form, over its words) and the number of
    non-projective arcs lifted to make it."""
    if shape not in DEPENDENCY_TREE_SHAPES:
        raise ValueError(f"unknown dependency tree shape {shape!r}; one of {DEPENDENCY_TREE_SHAPES}")
    heads, lifts = projectivize(parse.heads)
    n = len(heads)
    children = _children(heads)
    order = _top_down(heads, children)
    first, last = list(range(n)), list(range(n))  # of each word's yield
    for word in reversed(order):
        for child in children[word]:
            first[word] = min(first[word], first[child])
            last[word] = max(last[word], last[child])
    label_of_span: dict[tuple[int, int], str] = {}
    for head in reversed(order):  # bottom-up: an upper label of the same span wins
        label = phrase_label(parse.pos[head])
        if shape == "layered":
            right = [last[child] for child in children[head] if child > head and parse.pos[child] != PUNCTUATION_POS]
            inner_end = max(right, default=head)
            if inner_end > head:
                label_of_span[(head, inner_end)] = label
        if last[head] > first[head]:
            label_of_span[(first[head], last[head])] = label
    if n > 1 and (0, n - 1) not in label_of_span:  # several roots
        label_of_span[(0, n - 1)] = ROOT_LABEL
    tags = parse.tags or parse.pos
    tags = tuple(tag if tag and tag != "_" else (pos if pos and pos != "_" else _UNKNOWN_POS)
                 for tag, pos in zip(tags, parse.pos))
    nodes = tuple(Node(label, start, end) for (start, end), label in label_of_span.items())
    return Tree(parse.words, nodes, tags), lifts


def projectivize(heads: tuple[int, ...] | list[int]) -> tuple[list[int], int]:
    """``heads`` made projective by lifting, and the number of lifts.

    An arc from head ``h`` to dependent ``d`` is non-projective when a word between them is not
    in ``h``'s subtree. The shortest such arc (leftmost dependent among equals) is lifted to
    ``h``'s head (``d`` becomes a root when ``h`` is one), and so on until none is left; roots
    are under an implicit root over the whole sentence, so arcs from it are never lifted and
    the loop ends. Raises :class:`TreeError` for a head out of range or a cycle."""
    heads = list(heads)
    n = len(heads)
    for word, head in enumerate(heads):
        if not -1 <= head < n or head == word:
            raise TreeError(f"word {word + 1} has head {head + 1}: not another word of the {n} or the root (0)")
    lifts = 0
    while True:
        children = _children(heads)
        order = _top_down(heads, children)
        # Word w is in h's subtree when its top-down (preorder) number lies in h's block.
        number, size = [0] * n, [1] * n
        for i, word in enumerate(order):
            number[word] = i
        for word in reversed(order):
            if heads[word] >= 0:
                size[heads[word]] += size[word]
        worst = None
        for dependent, head in enumerate(heads):
            if head < 0:
                continue
            low, high = min(head, dependent), max(head, dependent)
            if worst is not None and high - low >= worst[0]:
                continue
            if any(not number[head] <= number[w] < number[head] + size[head] for w in range(low + 1, high)):
                worst = (high - low, dependent)
        if worst is None:
            return heads, lifts
        dependent = worst[1]
        heads[dependent] = heads[heads[dependent]]
        lifts += 1


def _children(heads: list[int]) -> list[list[int]]:
    children: list[list[int]] = [[] for _ in heads]
    for word, head in enumerate(heads):
        if head >= 0:
            children[head].append(word)
    return children


def _top_down(heads: list[int], children: list[list[int]]) -> list[int]:
    """The words in preorder from the roots (a head before its dependents); TreeError for a cycle."""
    order: list[int] = []
    stack = [word for word in reversed(range(len(heads))) if heads[word] < 0]
    while stack:
        word = stack.pop()
        order.append(word)
        stack.extend(reversed(children[word]))
    if len(order) != len(heads):
        cycle = sorted(set(range(len(heads))) - set(order))
        raise TreeError(f"the heads form a cycle (words {', '.join(str(w + 1) for w in cycle[:10])}): "
                        "not a dependency tree")
    return order
