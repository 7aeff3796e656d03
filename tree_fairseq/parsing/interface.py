"""What every parser back-end shares: the :class:`Parser` interface (tokenised sentences in,
normal-form trees over exactly those tokens out), the answer to a sentence a parser could not
parse (:class:`Failures`, :data:`ON_FAILURE`) and the conversion of dependency parses to phrase
structure (:class:`DependencyTrees`). The back-ends (:mod:`.backends`, :mod:`.spacy_parser`,
:mod:`.stanza_parser`) build on it."""

from typing import Protocol

from tree_fairseq.trees import TRIVIAL_SHAPES, Tree, TreeError, align, tree_over_tokens, trivial_tree
from tree_fairseq.trees.dependency import DEPENDENCY_TREE_SHAPES, DependencyParse, dependency_tree
from tree_fairseq.trees.parents import parse_heads_over_tokens

# What a sentence the parser could not parse gets: an error (the default) or a trivial tree.
ON_FAILURE = ("error",) + TRIVIAL_SHAPES


class Failures:
    """A parser's answer to a sentence it could not parse (``on_failure``, one of
    :data:`ON_FAILURE`): raise the error, or give that sentence a trivial tree over its tokens
    and record its line in ``failed``, ``(line, reason)`` pairs in input order."""

    def __init__(self, on_failure: str = "error"):
        if on_failure not in ON_FAILURE:
            raise ValueError(f"unknown --on-failure {on_failure!r}; one of {ON_FAILURE}")
        self.on_failure = on_failure
        self.failed: list[tuple[int, str]] = []

    def fallback(self, tokens: list[str], error: TreeError, line: int) -> Tree:
        """The trivial tree for the failed sentence of input line ``line`` (``error`` names the
        file and line), or the error."""
        if self.on_failure == "error":
            raise TreeError(f"{error}; --on-failure balanced/left/right gives such lines a trivial tree") from None
        self.failed.append((line, str(error)))
        return trivial_tree(tokens, self.on_failure)


class DependencyTrees:
    """What the dependency back-ends share: the conversion to phrase structure (``shape``, one
    of :data:`DEPENDENCY_TREE_SHAPES`), its failures, ``lifted``, ``(line, arcs lifted)``
    for each line whose parse was not projective, in input order, and ``heads``: for each line
    converted, the heads of its corpus tokens as the parser gave them (before any lifting; a
    line that failed has none), until :meth:`take_heads` takes them (tree-fairseq-parse --heads)."""

    def __init__(self, shape: str = "layered", on_failure: str = "error"):
        if shape not in DEPENDENCY_TREE_SHAPES:
            raise ValueError(f"unknown dependency tree shape {shape!r}; one of {DEPENDENCY_TREE_SHAPES}")
        self.shape = shape
        self.failures = Failures(on_failure)
        self.lifted: list[tuple[int, int]] = []
        self.heads: dict[int, tuple[int, ...]] = {}

    def tree(self, parse: DependencyParse, tokens: list[str], line: int, locate, token_words=None) -> Tree:
        """The tree of ``parse`` over the corpus ``tokens`` of input line ``line``; ``locate``
        puts the file and line in front of an error. ``token_words``: the parser's surface
        tokens, each with the words of ``parse`` it spells (multiword tokens), when they are not
        the words themselves. A parse that cannot be converted (a cycle, a head out of range) is
        a failure; one over other text than the line's stays an error."""
        try:
            tree, lifts = dependency_tree(parse, self.shape)
        except TreeError as error:
            return self.failures.fallback(tokens, locate(error), line)
        if lifts:
            self.lifted.append((line, lifts))
        try:
            if token_words is not None:
                tree = tree_over_tokens(tree, [surface for surface, _ in token_words],
                                        [list(words) for _, words in token_words])
            tree = align(tree, tokens)
            surface = [surface for surface, _ in token_words] if token_words is not None else parse.words
            counts = [len(words) for _, words in token_words] if token_words is not None else [1] * len(parse.words)
            self.heads[line] = parse_heads_over_tokens(parse.heads, surface, counts, tokens)
            return tree
        except TreeError as error:
            raise locate(error) from None

    def take_heads(self) -> dict[int, tuple[int, ...]]:
        """``heads`` of the lines converted since the last call, by input line; forgotten here."""
        heads, self.heads = self.heads, {}
        return heads


class Parser(Protocol):
    def parse(self, sentences: list[list[str]], first_line: int, source: str) -> list[Tree]:
        """Trees for ``sentences``, lines ``first_line``, ... (1-based) of the
        file ``source``; errors name the file and line."""
