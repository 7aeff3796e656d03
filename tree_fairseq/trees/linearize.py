"""A tree as a sequence of symbols annotated with their number of children, and back: the target
side of a tree decoder (Shiv & Quirk, NeurIPS 2019, section 4), plus the bracketed form a plain
sequence model emits instead.

A node is written ``LABEL(k)``, ``k >= 1`` its number of children (``NP(3)``); a leaf is written as
itself and has no children. Words never contain brackets (they are escaped ``-LRB-``/``-RRB-``, as
in :meth:`Tree.to_bracketed`), so the two never collide; labels are escaped as there too
(``$(`` -> ``$%28(2)``), and read back unescaped. The children of a node are the maximal
nodes and the leaves directly under it, left to right.

Two orders, both fixed by the tree alone:

- ``depth_first``: pre-order, each node before its children, children left to right
  (``S(2) NP(2) the cat VP(2) sat down``);
- ``breadth_first``: level order, the root, then its children, then theirs, each level left to
  right (``S(2) NP(2) VP(2) the cat sat down``).

Either way a sequence is a whole tree exactly when, reading it left to right with one open slot at
the start, every symbol fills an open slot and opens ``k`` new ones, and no slot is left open at
the end: the number of open slots after a prefix is ``1 + Σ (k_i − 1)``. That is all a decoder
needs to know to stop at the right time, whatever the order.

Pure Python; no fairseq here.
"""

import re
from collections import deque

from tree_fairseq.trees.bracketed import RawTree, TreeError, escape_label, escape_word, read_bracketed
from tree_fairseq.trees.tree import Tree, normalize

TREE_ORDERS = ("depth_first", "breadth_first")

_NODE_SYMBOL = re.compile(r"^([^\s()]+)\(([1-9][0-9]*)\)$")


def node_symbol(label: str, num_children: int) -> str:
    """``LABEL(k)``, the label escaped (:func:`~tree_fairseq.trees.bracketed.escape_label`)."""
    if num_children < 1 or not label:
        raise TreeError(f"cannot write a node {label!r} with {num_children} children as a symbol")
    return f"{escape_label(label)}({num_children})"


def parse_symbol(symbol: str) -> tuple[str, int]:
    """``(label, number of children)``; ``(word, 0)`` for a leaf."""
    match = _NODE_SYMBOL.match(symbol)
    return (match.group(1), int(match.group(2))) if match else (symbol, 0)


def symbol_arity(symbol: str) -> int:
    """The number of children a symbol announces: ``k`` for ``LABEL(k)``, 0 for a leaf."""
    return parse_symbol(symbol)[1]


def children(tree: Tree) -> tuple[tuple, dict[int, list[tuple]]]:
    """The root item and ``{node index: its children}``. Items are ``("node", i)`` (index into
    ``tree.nodes``) or ``("leaf", j)``. Raises :class:`TreeError` unless there is one root."""
    num_leaves = len(tree.leaves)
    if num_leaves == 1 and not tree.nodes:
        return ("leaf", 0), {}
    if not tree.nodes or (tree.nodes[-1].start, tree.nodes[-1].end) != (0, num_leaves - 1):
        raise TreeError("a tree to linearise needs one root over all its leaves")
    # Top-down, left to right: every node comes after its ancestors, so the innermost open node
    # that still covers it is its parent.
    order = sorted(range(len(tree.nodes)), key=lambda i: (tree.nodes[i].start, -tree.nodes[i].end))
    kids: dict[int, list[tuple]] = {i: [] for i in order}
    covered_by = [None] * num_leaves  # the smallest node over each leaf
    open_nodes: list[int] = []
    for i in order:
        node = tree.nodes[i]
        while open_nodes and tree.nodes[open_nodes[-1]].end < node.start:
            open_nodes.pop()
        if open_nodes:
            kids[open_nodes[-1]].append(("node", i))
        open_nodes.append(i)
        for j in range(node.start, node.end + 1):
            covered_by[j] = i
    for j, parent in enumerate(covered_by):
        kids[parent].append(("leaf", j))

    def start(item):
        return tree.nodes[item[1]].start if item[0] == "node" else item[1]

    return ("node", order[0]), {i: sorted(items, key=start) for i, items in kids.items()}


def linearize(tree: Tree, order: str = "depth_first") -> list[str]:
    """The symbols of ``tree`` in ``order`` (one of :data:`TREE_ORDERS`)."""
    if order not in TREE_ORDERS:
        raise ValueError(f"unknown tree order {order!r}; one of {TREE_ORDERS}")
    root, kids = children(tree)

    def symbol(item) -> str:
        if item[0] == "leaf":
            return escape_word(tree.leaves[item[1]])
        return node_symbol(tree.nodes[item[1]].label, len(kids[item[1]]))

    def below(item) -> list[tuple]:
        return kids[item[1]] if item[0] == "node" else []

    symbols = []
    if order == "depth_first":
        stack = [root]
        while stack:
            item = stack.pop()
            symbols.append(symbol(item))
            stack.extend(reversed(below(item)))
    else:
        queue = deque([root])
        while queue:
            item = queue.popleft()
            symbols.append(symbol(item))
            queue.extend(below(item))
    return symbols


def delinearize(symbols: list[str], order: str = "depth_first") -> Tree:
    """The tree of a symbol sequence in ``order``, in normal form (a node with one child shares
    its span and is collapsed, as :func:`normalize` does). Raises :class:`TreeError` for an empty
    sequence, one that ends with open slots, or symbols after the tree is complete."""
    if order not in TREE_ORDERS:
        raise ValueError(f"unknown tree order {order!r}; one of {TREE_ORDERS}")
    if not symbols:
        raise TreeError("no symbols: an empty tree")
    # Frames of nodes still waiting for children, [node, children announced]. The one filled
    # next is the newest (depth first) or the oldest (breadth first); new frames go at the end.
    frames: deque[tuple[RawTree, int]] = deque()
    root = None
    for position, symbol in enumerate(symbols):
        label, num_children = parse_symbol(symbol)
        item = RawTree(label)
        if root is None:
            root = item
        elif not frames:
            raise TreeError(f"symbol {position} ({symbol!r}) comes after the tree is complete")
        else:
            parent, expected = frames[-1] if order == "depth_first" else frames[0]
            parent.children.append(item)
            if len(parent.children) == expected:
                frames.pop() if order == "depth_first" else frames.popleft()
        if num_children:
            frames.append((item, num_children))
    if frames:
        missing = sum(expected - len(node.children) for node, expected in frames)
        raise TreeError(f"incomplete tree: {missing} children still missing after {len(symbols)} symbols")
    return normalize([root])


def open_slots(symbols: list[str]) -> int:
    """Open slots after a prefix: ``1 + Σ (k_i − 1)``; 0 for a whole tree."""
    return 1 + sum(symbol_arity(symbol) - 1 for symbol in symbols)


def bracketed_symbols(tree: Tree) -> list[str]:
    """The tokens of the tree's bracketed form, each opening bracket with its label:
    ``(S (NP the cat ) (VP sat ) )`` -> ``["(S", "(NP", "the", "cat", ")", ...]``.
    ``parse_tree(" ".join(symbols))`` reads them back. Words are written without their tags."""
    tokens = re.findall(r"\(\S*?(?=[\s()])|\)|[^\s()]+", tree.to_bracketed(tags=False))
    return tokens


def from_bracketed_symbols(symbols: list[str]) -> Tree:
    """Inverse of :func:`bracketed_symbols`; raises :class:`TreeError` for unbalanced brackets
    or anything that is not one tree."""
    trees = read_bracketed(" ".join(symbols))
    if len(trees) != 1:
        raise TreeError(f"{len(trees)} trees where one was expected")
    return normalize(trees)
