"""Parser back-ends behind one interface: each turns batches of tokenised
sentences into normal-form trees whose leaves are exactly those tokens.

- ``balanced`` / ``left`` / ``right``: trivial trees (no parser).
- ``bracketed``: existing parser output, one bracketed tree per line.
- ``stanza``: stanza's constituency parser (imported only when chosen).
- ``spacy``: an installed spaCy pipeline's dependency parser (imported only when chosen).
- ``conllu``: any dependency parser's output as CoNLL-U, one sentence block per line.

The dependency back-ends turn each parse into phrase structure with
:func:`~tree_fairseq.trees.dependency.dependency_tree` (``dependency_shape``): *dependency-derived*
trees, not a constituency parser's.
"""

import itertools
from collections.abc import Iterator

from tree_fairseq.parsing.interface import ON_FAILURE, DependencyTrees, Failures, Parser
from tree_fairseq.trees import TRIVIAL_SHAPES, TreeError, align, located, parse_tree, trivial_tree
from tree_fairseq.trees.conllu import NotASentence, conllu_blocks, read_conllu_sentence
from tree_fairseq.trees.textio import utf8_lines

__all__ = ["ON_FAILURE", "PARSERS", "BracketedParser", "ConlluParser", "DependencyTrees", "Failures", "Parser",
           "TrivialParser", "check_parser_options", "make_parser"]

PARSERS = ("stanza", "spacy", "bracketed", "conllu") + TRIVIAL_SHAPES


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

    def check_exhausted(self, lines: int) -> None:
        """TreeError unless the file ends with input line ``lines`` (read up to there first: a resumed
        run may have parsed none of the last lines here)."""
        self._skip_to(lines + 1)
        rest = list(itertools.islice(self._lines, 1000))
        if rest and not any(line.strip() for line in rest) and next(self._lines, None) is None:
            raise TreeError(f"{self.trees_path}: ends with {len(rest)} blank line(s) after line {self._next_line - 1}, "
                            f"the input's last: remove them")
        if rest:
            raise TreeError(f"{self.trees_path}: has more lines than the input ({self._next_line - 1})")


class ConlluParser:
    """Reads a dependency parser's CoNLL-U output (:mod:`tree_fairseq.trees.conllu`), block
    ``k`` of ``trees_path`` for input line ``k``, and converts each parse to phrase structure.
    A block without words or not well-formed is a failure (:class:`Failures`); a block over
    other words than its line stays an error (the files do not belong together), and so does a
    block of comments that is no sentence (a document's header): a trivial tree in its place
    would pair every later block with the wrong input line."""

    def __init__(self, trees_path: str, shape: str = "layered", on_failure: str = "error"):
        self.trees_path = trees_path
        self.dependency = DependencyTrees(shape, on_failure)
        self.failures = self.dependency.failures
        self.lifted = self.dependency.lifted
        self._blocks = conllu_blocks(trees_path)
        self._next_block = 1

    def parse(self, sentences, first_line, source):
        self._skip_to(first_line)
        trees = []
        for line, tokens in enumerate(sentences, start=first_line):
            block = next(self._blocks, None)
            if block is None:
                raise TreeError(f"{self.trees_path} ends after {self._next_block - 1} sentence blocks but the "
                                f"input {source} goes on (line {line}): fewer sentences than the input lines")
            self._next_block += 1
            block_line, lines = block
            where = f"sentence block {self._next_block - 1} (input: {source}:{line})"

            def locate(error, where=where, block_line=block_line):
                return located(f"{where}: {error}", self.trees_path, getattr(error, "line", block_line))

            try:
                sentence = read_conllu_sentence(lines, block_line)
            except NotASentence as error:
                raise locate(f"{error}; from here on the blocks and the input lines no longer pair up (--on-failure "
                             f"would give input line {line} a trivial tree and read block {self._next_block}, "
                             f"presumably that line's sentence, for input line {line + 1}, and so on): remove the "
                             "block, or move its comments into the next sentence's block") from None
            except TreeError as error:
                trees.append(self.failures.fallback(tokens, locate(error), line))
                continue
            trees.append(self.dependency.tree(sentence.parse, tokens, line, locate,
                                              list(zip(sentence.tokens, sentence.token_words))))
        return trees

    def _skip_to(self, line_number: int) -> None:
        while self._next_block < line_number:
            if next(self._blocks, None) is None:
                raise TreeError(f"{self.trees_path}: has fewer sentence blocks than the input has lines")
            self._next_block += 1

    def check_exhausted(self, lines: int) -> None:
        """TreeError unless the file ends with the block of input line ``lines`` (read up to there first)."""
        self._skip_to(lines + 1)
        block = next(self._blocks, None)
        if block is not None:
            raise TreeError(f"{self.trees_path}:{block[0]}: sentence block {self._next_block} is one more than "
                            f"the input's {self._next_block - 1} lines")


def check_parser_options(name: str, lang: str | None = None, trees: str | None = None,
                         spacy_model: str | None = None) -> None:
    """ValueError for options :func:`make_parser` would refuse, before anything is loaded."""
    if name not in PARSERS:
        raise ValueError(f"unknown parser {name!r}; one of {PARSERS}")
    if name in ("bracketed", "conllu") and trees is None:
        raise ValueError(f"--parser {name} needs --trees FILE (the parser output to read)")
    if name == "stanza" and lang is None:
        raise ValueError("--parser stanza needs --lang (e.g. --lang de)")
    if name == "spacy" and not spacy_model:
        raise ValueError("--parser spacy needs --spacy-model NAME_OR_PATH (an installed spaCy pipeline, "
                         "e.g. en_core_web_sm)")


def make_parser(name: str, lang: str | None = None, trees: str | None = None,
                model_dir: str | None = None, batch_size: int = 64, use_gpu: bool | None = None,
                on_failure: str = "error", spacy_model: str | None = None,
                dependency_shape: str = "layered", stanza_package: str | None = None,
                stanza_model_files: dict[str, str | None] | None = None) -> Parser:
    """A parser by name. ``on_failure`` (:data:`ON_FAILURE`): what a sentence the parser could
    not parse gets (trivial parsers never fail); its lines are in the parser's
    ``failures.failed``. ``dependency_shape`` (:data:`~tree_fairseq.trees.dependency.DEPENDENCY_TREE_SHAPES`): the phrase
    structure the dependency back-ends (spacy, conllu) make. ``model_dir``, ``stanza_package`` and
    ``stanza_model_files`` choose stanza's models (:class:`~tree_fairseq.parsing.stanza_parser.StanzaParser`)."""
    check_parser_options(name, lang, trees, spacy_model)
    if name in TRIVIAL_SHAPES:
        return TrivialParser(name)
    if name == "bracketed":
        return BracketedParser(trees, on_failure=on_failure)
    if name == "conllu":
        return ConlluParser(trees, shape=dependency_shape, on_failure=on_failure)
    if name == "spacy":
        from tree_fairseq.parsing.spacy_parser import SpacyParser

        return SpacyParser(spacy_model, batch_size=batch_size, shape=dependency_shape, on_failure=on_failure)
    if name == "stanza":
        from tree_fairseq.parsing.stanza_parser import StanzaParser

        return StanzaParser(lang, model_dir=model_dir, batch_size=batch_size, use_gpu=use_gpu,
                            on_failure=on_failure, package=stanza_package, model_files=stanza_model_files)
    raise ValueError(f"unknown parser {name!r}; one of {PARSERS}")
