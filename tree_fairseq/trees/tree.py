"""The normal form of a source tree and the normalisation from parser output to it.

A :class:`Tree` is a list of leaves plus nodes; each node has a label and an
inclusive leaf span. In the normal form every node covers >= 2 leaves, spans
are unique (so containment between nodes is span containment), one root
covers all leaves (absent only for a one-leaf sentence), and nodes are stored
bottom-up: sorted by (end, -start), which puts every descendant before its
ancestors.

Preterminals (the part-of-speech tag above each word) are not nodes, but a
tree read from a parser keeps them as ``tags``, one per leaf: the label of a
word split into several subword pieces (:mod:`tree_fairseq.trees.subwords`).
A tree has tags only when every word has its own preterminal (as parser
output has); trivial trees and bracketed trees without tags have none.
"""

from dataclasses import dataclass, field

from tree_fairseq.trees.bracketed import (
    RawTree, TreeError, escape_label, escape_word, read_bracketed, unescape_label,
)

# Labels that only wrap a tree: dropped whenever a real label covers the same span.
WRAPPER_LABELS = frozenset({"", "ROOT", "TOP", "VROOT"})
ROOT_LABEL = "ROOT"
TRACE_LABEL = "-NONE-"


@dataclass(frozen=True)
class Node:
    label: str
    start: int
    end: int  # inclusive

    @property
    def width(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class Tree:
    leaves: tuple[str, ...]
    nodes: tuple[Node, ...]
    # The preterminal label (part of speech) of each leaf, or None. An annotation of the leaves, not
    # part of the structure: trees with the same leaves and nodes are equal whatever their tags.
    tags: tuple[str, ...] | None = field(default=None, compare=False)

    def __post_init__(self):
        nodes = tuple(sorted(self.nodes, key=lambda node: (node.end, -node.start)))
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "leaves", tuple(self.leaves))
        if self.tags is not None:
            object.__setattr__(self, "tags", tuple(self.tags))

    def check(self) -> None:
        """Raise :class:`TreeError` unless the tree is in normal form."""
        n = len(self.leaves)
        if n == 0:
            raise TreeError("tree has no leaves")
        if self.tags is not None and (len(self.tags) != n or not all(self.tags)):
            raise TreeError(f"{len(self.tags)} tags (all non-empty) for {n} leaves")
        spans = [(node.start, node.end) for node in self.nodes]
        if len(set(spans)) != len(spans):
            raise TreeError("two nodes share a span")
        for node in self.nodes:
            if not 0 <= node.start < node.end < n:
                raise TreeError(f"node {node} does not cover >= 2 of the {n} leaves")
        if n >= 2 and (not self.nodes or spans[-1] != (0, n - 1)):
            raise TreeError("no single root over all leaves")
        for i, (s1, e1) in enumerate(spans):
            for s2, e2 in spans[i + 1:]:
                if s1 < s2 <= e1 < e2 or s2 < s1 <= e2 < e1:
                    raise TreeError(f"crossing spans {(s1, e1)} and {(s2, e2)}")

    def to_bracketed(self, tags: bool = True) -> str:
        """One line of PTB brackets; brackets inside words are escaped as -LRB-/-RRB-, labels and
        tags as :func:`~tree_fairseq.trees.bracketed.escape_label` says (``$(`` -> ``$%28``), so that
        :func:`parse_tree` gives back this tree, labels and tags included. With ``tags`` (and tags to
        write) every word is written under its preterminal, ``(NN cat)``."""
        leaves = [escape_word(w) for w in self.leaves]
        if tags and self.tags is not None:
            leaves = [f"({escape_label(tag)} {leaf})" for tag, leaf in zip(self.tags, leaves)]
        if not self.nodes:
            return "(" + ROOT_LABEL + " " + " ".join(leaves) + ")"
        # Top-down, left to right: spans sorted by (start, -end).
        order = sorted(self.nodes, key=lambda node: (node.start, -node.end))
        parts: list[str] = []
        open_ends: list[int] = []
        position = 0
        for node in order:
            while open_ends and open_ends[-1] < node.start:
                position = _close(parts, open_ends, position, leaves)
            parts.extend(leaves[position:node.start])
            position = node.start
            parts.append("(" + escape_label(node.label))
            open_ends.append(node.end)
        while open_ends:
            position = _close(parts, open_ends, position, leaves)
        return " ".join(parts).replace("( ", "(").replace(" )", ")")


def _close(parts, open_ends, position, leaves):
    end = open_ends.pop()
    parts.extend(leaves[position:end + 1])
    parts.append(")")
    return end + 1


def normalize(trees: list[RawTree]) -> Tree:
    """Normal form of the tree(s) read from one line.

    Drops ``-NONE-`` subtrees and the nodes they empty, strips function tags
    (``NP-SBJ-1`` -> ``NP``), drops preterminals (keeping their labels as the
    tree's ``tags`` when every word has one), removes nodes over one leaf,
    collapses unary chains keeping the uppermost non-wrapper label of each
    span, and adds a ``ROOT`` over several trees on one line. Labels and tags
    are read as written (function tags are stripped before the label's escapes
    are undone, :func:`~tree_fairseq.trees.bracketed.unescape_label`).

    A preterminal is a node whose only child is a word and whose label is not
    a wrapper (``ROOT``, ``TOP``, ...).
    """
    trees = [t for t in (_without_traces(t) for t in trees) if t is not None]
    if not trees:
        raise TreeError("tree has no words once -NONE- traces are removed")
    root = trees[0] if len(trees) == 1 else RawTree(ROOT_LABEL, trees)
    leaves: list[str] = []
    tag_of_leaf: dict[int, str] = {}
    label_of_span: dict[tuple[int, int], str] = {}

    # Depth first without recursion (a parser's tree can be deeper than Python's recursion limit):
    # an entry (node, None) is a visit on the way down, (node, first leaf) the visit on the way up.
    stack: list[tuple[RawTree, int | None]] = [(root, None)]
    while stack:
        tree, start = stack.pop()
        if tree.is_word:
            leaves.append(tree.label)
            continue
        if start is None:
            start = len(leaves)
            if len(tree.children) == 1 and tree.children[0].is_word:
                tag = unescape_label(strip_function_tags(tree.label))
                if tag not in WRAPPER_LABELS:
                    tag_of_leaf[start] = tag
            stack.append((tree, start))
            stack.extend((child, None) for child in reversed(tree.children))
            continue
        span = (start, len(leaves) - 1)
        if span[1] > span[0]:
            label = unescape_label(strip_function_tags(tree.label))
            # Visited bottom-up, so a later label on the same span is the upper one.
            if span not in label_of_span or label not in WRAPPER_LABELS:
                label_of_span[span] = label
            elif label_of_span[span] == "":
                label_of_span[span] = label

    nodes = tuple(Node(label or ROOT_LABEL, s, e) for (s, e), label in label_of_span.items())
    tags = tuple(tag_of_leaf[j] for j in range(len(leaves))) if len(tag_of_leaf) == len(leaves) else None
    return Tree(tuple(leaves), nodes, tags)


def parse_tree(line: str) -> Tree:
    """Read one line of brackets and normalise it."""
    return normalize(read_bracketed(line))


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``PP-LOC=2`` -> ``PP``; labels that start with a
    dash (``-LRB-``, ``-NONE-``) are names, not tags, and stay."""
    if label.startswith("-"):
        return label
    for separator in "-=":
        label = label.split(separator, 1)[0]
    return label


def _without_traces(tree: RawTree) -> RawTree | None:
    """A copy of ``tree`` without ``-NONE-`` subtrees and the nodes they empty (None when nothing
    is left); iterative, for trees deeper than Python's recursion limit."""
    kept: dict[int, RawTree | None] = {}
    stack: list[tuple[RawTree, bool]] = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        if node.is_word:
            kept[id(node)] = node
        elif node.label == TRACE_LABEL:
            kept[id(node)] = None
        elif not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in node.children)
        else:
            children = [kept[id(child)] for child in node.children if kept[id(child)] is not None]
            kept[id(node)] = RawTree(node.label, children) if children else None
    return kept[id(tree)]
