"""Subword (BPE) subtrees: a word split into k >= 2 pieces becomes a node over
its pieces, and every node's span moves from words to pieces.

The node over a word's pieces is labelled with the word's part-of-speech tag
(the preterminal the parser gave it, kept as the tree's ``tags``), as Nguyen et
al. (ICLR 2020, appendix 7.4 and Figure 7) build their BPE subtrees: the
preterminal becomes the root of the pieces. A tree without tags (trivial trees,
bracketed trees without preterminals) labels these nodes ``@BPE``, and so does
``subword_label="bpe"`` for every tree.

Two piece formats: subword-nmt (a piece ending in ``@@`` continues into the
next) and sentencepiece (a piece starting with ``▁`` starts a word).
"""

from tree_fairseq.trees.bracketed import TreeError, quoted
from tree_fairseq.trees.tree import Node, Tree

SUBWORD_LABEL = "@BPE"
# Labels a parser's tree may not use: the subword node's, and the node dictionary's special symbols
# (fairseq's <s>, <pad>, </s>, <unk>: a node labelled <pad> would be masked as padding).
RESERVED_LABELS = frozenset({SUBWORD_LABEL, "<s>", "<pad>", "</s>", "<unk>"})
SUBWORD_FORMATS = ("subword_nmt", "sentencepiece")
# How the node over a word's pieces is labelled: "pos", the word's tag (``@BPE`` when the tree
# has no tags); "bpe", always ``@BPE``.
SUBWORD_LABELS = ("pos", "bpe")
SUBWORD_NMT_JOINER = "@@"
SENTENCEPIECE_SPACE = "\u2581"


def check_labels(tree: Tree) -> None:
    """:class:`TreeError` when a node label or a tag of ``tree`` is one of :data:`RESERVED_LABELS`."""
    labels = [node.label for node in tree.nodes] + list(tree.tags or ())
    reserved = sorted({label for label in labels if label in RESERVED_LABELS})
    if reserved:
        raise TreeError(f"the tree uses the reserved label(s) {', '.join(reserved)} (the subword node's, or the node "
                        "dictionary's special symbols): relabel them in the parser output")


def dictionary_subword_format(symbols: list[str]) -> str:
    """The piece format of a data-bin's source dictionary (its non-special ``symbols``): sentencepiece
    when a piece starts with ▁, else subword-nmt (a text without subwords reads the same either way).
    The data-bin keeps no other record of it."""
    return "sentencepiece" if any(symbol.startswith(SENTENCEPIECE_SPACE) for symbol in symbols) else "subword_nmt"


# The marks a text of pieces shows, and their names in messages: subword-nmt's joins (a piece
# ending in '@@' followed by a space), sentencepiece's word starts.
SUBWORD_MARKS = ((SUBWORD_NMT_JOINER + " ", "subword-nmt's '@@ ' joins"),
                 (SENTENCEPIECE_SPACE, f"sentencepiece's {SENTENCEPIECE_SPACE} pieces"))


def subword_marks(line: str) -> str | None:
    """The name of the first kind of subword mark ``line`` still holds (:data:`SUBWORD_MARKS`), or
    None: a text of words (a translation after ``--remove-bpe``) holds none."""
    return next((what for mark, what in SUBWORD_MARKS if mark in line), None)


def remove_subwords(line: str, subword_format: str) -> str:
    """A line of subword pieces as words, exactly as fairseq's ``--remove-bpe`` (``subword_nmt``)
    or ``--remove-bpe sentencepiece`` gives them, so that a reference so read and a translation so
    written spell their words alike."""
    line = " ".join(line.split())
    if subword_format == "sentencepiece":
        return line.replace(" ", "").replace(SENTENCEPIECE_SPACE, " ").strip()
    if subword_format == "subword_nmt":
        return (line + " ").replace(SUBWORD_NMT_JOINER + " ", "").rstrip()
    raise ValueError(f"unknown subword format {subword_format!r}; one of {SUBWORD_FORMATS}")


def spelling(text: str) -> str:
    """``text``'s characters without spaces and subword marks: the same for a text of pieces and
    the words they spell, whichever format and whatever ``--remove-bpe`` did."""
    return "".join(text.replace(SUBWORD_NMT_JOINER, "").replace(SENTENCEPIECE_SPACE, "").split())


def group_pieces(pieces: list[str], subword_format: str) -> list[tuple[str, int, int]]:
    """The words spelled by the pieces: ``(word, first piece, last piece)`` each."""
    words: list[tuple[str, int, int]] = []
    if subword_format == "subword_nmt":
        start = 0
        for i, piece in enumerate(pieces):
            if not piece.endswith(SUBWORD_NMT_JOINER) or i == len(pieces) - 1:
                word = "".join(p.removesuffix(SUBWORD_NMT_JOINER) for p in pieces[start:i + 1])
                words.append((word, start, i))
                start = i + 1
    elif subword_format == "sentencepiece":
        for i, piece in enumerate(pieces):
            if piece.startswith(SENTENCEPIECE_SPACE) or not words:
                words.append(("", i, i))
            word, start, _ = words[-1]
            words[-1] = (word + piece.replace(SENTENCEPIECE_SPACE, ""), start, i)
    else:
        raise ValueError(f"unknown subword format {subword_format!r}; one of {SUBWORD_FORMATS}")
    return words


def expand_subwords(tree: Tree, pieces: list[str], subword_format: str, subword_label: str = "pos") -> Tree:
    """The tree over ``pieces``; ``tree``'s leaves must be exactly the words the
    pieces spell (align the tree first). Raises :class:`TreeError` otherwise.
    ``subword_label`` (one of :data:`SUBWORD_LABELS`) labels the node over the
    pieces of a word: its tag, or ``@BPE``. The result has no tags (its leaves
    are pieces, not words)."""
    if subword_label not in SUBWORD_LABELS:
        raise ValueError(f"unknown subword label {subword_label!r}; one of {SUBWORD_LABELS}")
    words = group_pieces(pieces, subword_format)
    if [w for w, _, _ in words] != list(tree.leaves):
        raise TreeError(f"subword pieces do not spell the tree's leaves: {_difference(tree.leaves, words)}")
    if subword_label == "pos" and tree.tags is not None:
        labels = tree.tags
    else:
        labels = (SUBWORD_LABEL,) * len(words)
    nodes = [Node(node.label, words[node.start][1], words[node.end][2]) for node in tree.nodes]
    nodes += [Node(label, s, e) for label, (_, s, e) in zip(labels, words) if e > s]
    return Tree(tuple(pieces), tuple(nodes))


def _difference(leaves, words) -> str:
    for i, (leaf, (word, _, _)) in enumerate(zip(leaves, words)):
        if leaf != word:
            return f"word {i + 1} is {quoted(word)} in the pieces but {quoted(leaf)} in the tree"
    return f"the pieces spell {len(words)} words but the tree has {len(leaves)} leaves"
