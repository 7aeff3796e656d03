"""Trivial trees over given tokens, the controls for a parser's trees."""

from tree_fairseq.trees.tree import Node, Tree

TRIVIAL_LABEL = "X"
TRIVIAL_SHAPES = ("balanced", "left", "right")


def trivial_tree(tokens: list[str], shape: str) -> Tree:
    """A binary tree of the given shape over ``tokens``: ``balanced`` halves
    each span (the left half gets the extra token), ``left`` is
    ``(((a b) c) d)``, ``right`` is ``(a (b (c d)))``."""
    n = len(tokens)
    if shape == "balanced":
        spans = _balanced_spans(0, n - 1)
    elif shape == "left":
        spans = [(0, end) for end in range(1, n)]
    elif shape == "right":
        spans = [(start, n - 1) for start in range(n - 1)]
    else:
        raise ValueError(f"unknown tree shape {shape!r}; one of {TRIVIAL_SHAPES}")
    return Tree(tuple(tokens), tuple(Node(TRIVIAL_LABEL, s, e) for s, e in spans))


def _balanced_spans(start: int, end: int) -> list[tuple[int, int]]:
    if end <= start:
        return []
    middle = (start + end) // 2
    return _balanced_spans(start, middle) + _balanced_spans(middle + 1, end) + [(start, end)]
