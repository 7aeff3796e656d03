"""Parser back-ends behind one interface: each turns batches of tokenised
sentences into normal-form trees whose leaves are exactly those tokens.

- ``balanced`` / ``left`` / ``right``: trivial trees (no parser).
- ``bracketed``: existing parser output, one bracketed tree per line.
- ``stanza``: stanza's constituency parser (imported only when chosen).
"""

from collections.abc import Iterator
from typing import Protocol

from tree_fairseq.trees import TRIVIAL_SHAPES, Tree, TreeError, align, located, parse_tree, trivial_tree

PARSERS = ("stanza", "bracketed") + TRIVIAL_SHAPES


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
    """Reads existing parser output, line ``k`` of ``trees_path`` for input line ``k``."""

    def __init__(self, trees_path: str):
        self.trees_path = trees_path
        self._lines: Iterator[str] = open(trees_path, encoding="utf-8")
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
                trees.append(align(parse_tree(line), tokens))
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


def make_parser(name: str, lang: str | None = None, trees: str | None = None,
                model_dir: str | None = None, batch_size: int = 64, use_gpu: bool | None = None) -> Parser:
    if name in TRIVIAL_SHAPES:
        return TrivialParser(name)
    if name == "bracketed":
        if trees is None:
            raise ValueError("--parser bracketed needs --trees FILE (the parser output to read)")
        return BracketedParser(trees)
    if name == "stanza":
        from tree_fairseq.parsing.stanza_parser import StanzaParser

        if lang is None:
            raise ValueError("--parser stanza needs --lang (e.g. --lang de)")
        return StanzaParser(lang, model_dir=model_dir, batch_size=batch_size, use_gpu=use_gpu)
    raise ValueError(f"unknown parser {name!r}; one of {PARSERS}")
