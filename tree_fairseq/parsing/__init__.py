"""Parser back-ends behind one interface: each turns batches of tokenised
sentences into normal-form trees whose leaves are exactly those tokens.

- ``balanced`` / ``left`` / ``right``: trivial trees (no parser).
- ``bracketed``: existing parser output, one bracketed tree per line.
- ``stanza``: stanza's constituency parser (imported only when chosen).
"""

from collections.abc import Iterator
from typing import Protocol

from tree_fairseq.trees import TRIVIAL_SHAPES, Tree, TreeError, align, located, parse_tree, trivial_tree
from tree_fairseq.trees.textio import utf8_lines

PARSERS = ("stanza", "bracketed") + TRIVIAL_SHAPES
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


class Parser(Protocol):
    def parse(self, sentences: list[list[str]], first_line: int, source: str) -> list[Tree]:
        """Trees for ``sentences``, lines ``first_line``, ... (1-based) of the
        file ``source``; errors name the file and line."""


class TrivialParser:
    def __init__(self, shape: str):
        self.shape = shape

    def parse(self, sentences, first_line, source):
        return [trivial_tree(tokens, self.shape) for tokens in sentences]


class BracketedParser:
    """Reads existing parser output, line ``k`` of ``trees_path`` for input line ``k``. A line
    that is no tree (empty, ``null``, ``( )``, unbalanced: what a parser writes for a sentence it
    gave up on) is a failure (:class:`Failures`); a tree over other words stays an error (the
    files do not belong together)."""

    def __init__(self, trees_path: str, on_failure: str = "error"):
        self.failures = Failures(on_failure)
        self.trees_path = trees_path
        self._lines: Iterator[str] = utf8_lines(trees_path)
        self._next_line = 1

    def parse(self, sentences, first_line, source):
        self._skip_to(first_line)
        trees = []
        for tokens in sentences:
            line = next(self._lines, None)
            if line is None:
                raise TreeError(f"{self.trees_path} ends at line {self._next_line - 1} but the input "
                                f"{source} goes on: fewer lines than the input")
            try:
                tree = parse_tree(line)
            except TreeError as error:
                error = located(f"{error} (input: {source}:{self._next_line})", self.trees_path, self._next_line)
                tree = self.failures.fallback(tokens, error, self._next_line)
                trees.append(tree)
                self._next_line += 1
                continue
            try:
                trees.append(align(tree, tokens))
            except TreeError as error:
                raise located(f"{error} (input: {source}:{self._next_line})", self.trees_path,
                              self._next_line) from None
            self._next_line += 1
        return trees

    def _skip_to(self, line_number: int) -> None:
        while self._next_line < line_number:
            if next(self._lines, None) is None:
                raise TreeError(f"{self.trees_path}: has fewer lines than the input")
            self._next_line += 1

    def check_exhausted(self) -> None:
        if next(self._lines, None) is not None:
            raise TreeError(f"{self.trees_path}: has more lines than the input ({self._next_line - 1})")


def check_parser_options(name: str, lang: str | None = None, trees: str | None = None) -> None:
    """ValueError for options :func:`make_parser` would refuse, before anything is loaded."""
    if name not in PARSERS:
        raise ValueError(f"unknown parser {name!r}; one of {PARSERS}")
    if name == "bracketed" and trees is None:
        raise ValueError("--parser bracketed needs --trees FILE (the parser output to read)")
    if name == "stanza" and lang is None:
        raise ValueError("--parser stanza needs --lang (e.g. --lang de)")


def make_parser(name: str, lang: str | None = None, trees: str | None = None,
                model_dir: str | None = None, batch_size: int = 64, use_gpu: bool | None = None,
                on_failure: str = "error") -> Parser:
    """A parser by name. ``on_failure`` (:data:`ON_FAILURE`): what a sentence the parser could
    not parse gets (bracketed, stanza; trivial parsers never fail); its lines are in the
    parser's ``failures.failed``."""
    check_parser_options(name, lang, trees)
    if name in TRIVIAL_SHAPES:
        return TrivialParser(name)
    if name == "bracketed":
        return BracketedParser(trees, on_failure=on_failure)
    if name == "stanza":
        from tree_fairseq.parsing.stanza_parser import StanzaParser

        return StanzaParser(lang, model_dir=model_dir, batch_size=batch_size, use_gpu=use_gpu,
                            on_failure=on_failure)
    raise ValueError(f"unknown parser {name!r}; one of {PARSERS}")
