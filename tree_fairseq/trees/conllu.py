"""Reading CoNLL-U (Universal Dependencies' format, written by UDPipe, stanza, Trankit, spaCy's
converters and most dependency parsers): one block of lines per sentence, blocks separated by
blank lines.

A block's lines are comments (``#``), words (an integer ID), multiword-token ranges (``3-4 zum``:
one surface token over the words 3 and 4, ``zu dem``) and empty nodes (``5.1``, enhanced
dependencies only, ignored). Columns are tab-separated: ID, FORM, LEMMA, UPOS, XPOS, FEATS,
HEAD, DEPREL, DEPS, MISC; HEAD 0 marks a root.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass

from tree_fairseq.trees.bracketed import TreeError, quoted
from tree_fairseq.trees.dependency import DependencyParse
from tree_fairseq.trees.textio import utf8_lines

_COLUMNS = 10
# Word IDs and HEADs are ASCII digits; str.isdigit() also takes '²' or '٣', which int() refuses.
_NUMBER = re.compile(r"[0-9]+")
# Comments that make a block a sentence even without words: a parser's output for a sentence it
# could not parse. A block of other comments only (``# newdoc``, ``# global.columns``) is none.
_SENTENCE_COMMENTS = ("# sent_id", "# text")


class ConlluError(TreeError):
    """A block that is not well-formed CoNLL-U. ``line``: the line of the file it is about (that of
    the block's first line when it is about the whole block)."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


class NotASentence(ConlluError):
    """A block of comments only, none of them a sentence's (``# sent_id``, ``# text``): a
    document's header, not a sentence, so the blocks after it no longer pair up with the input
    lines."""


@dataclass(frozen=True)
class ConlluSentence:
    """One block: the parse over its syntactic words, and its surface tokens, each with the
    words it spells (``zum`` -> ``zu dem``; one word for most tokens)."""

    parse: DependencyParse
    tokens: tuple[str, ...]
    token_words: tuple[tuple[str, ...], ...]


def conllu_blocks(path: str) -> Iterator[tuple[int, list[str]]]:
    """The blocks of ``path``: (line number of the block's first line, its lines). Blank lines
    (also several in a row, and at either end of the file) only separate blocks."""
    block: list[str] = []
    first = 0
    for line_number, line in enumerate(utf8_lines(path), start=1):
        line = line.rstrip("\r\n")
        if line.strip():
            if not block:
                first = line_number
            block.append(line)
        elif block:
            yield first, block
            block = []
    if block:
        yield first, block


def read_conllu_sentence(lines: list[str], first_line: int = 1) -> ConlluSentence:
    """The sentence of one block, whose first line is line ``first_line`` of its file.

    :class:`ConlluError` (naming the line) for a block that is not well-formed CoNLL-U or has no
    words (a parser's empty output); :class:`NotASentence` for a block of other comments only."""
    words: list[str] = []
    heads: list[int] = []
    upos: list[str] = []
    xpos: list[str] = []
    ranges: dict[int, tuple[int, str, int]] = {}  # first word -> (last word, surface form, line)
    for offset, line in enumerate(lines):
        if line.startswith("#"):
            continue
        line_number = first_line + offset
        columns = line.split("\t")
        if len(columns) != _COLUMNS:
            raise ConlluError(f"{len(columns)} tab-separated columns, CoNLL-U has {_COLUMNS}: {quoted(line)}",
                              line_number)
        word_id, form = columns[0], columns[1]
        if "." in word_id:
            continue  # an empty node
        if "-" in word_id:
            first, _, last = word_id.partition("-")
            if not (_NUMBER.fullmatch(first) and _NUMBER.fullmatch(last) and int(first) < int(last)):
                raise ConlluError(f"{quoted(word_id)} is not a multiword-token range such as 3-4", line_number)
            _add_range(ranges, int(first), int(last), form, line_number)
            continue
        if word_id != str(len(words) + 1):
            raise ConlluError(f"word ID {quoted(word_id)} where word {len(words) + 1} was expected", line_number)
        if not _NUMBER.fullmatch(columns[6]):
            raise ConlluError(f"HEAD {quoted(columns[6])} of word {word_id} is not a number", line_number)
        words.append(form)
        heads.append(int(columns[6]) - 1)
        upos.append(columns[3])
        xpos.append(columns[4])
    if not words:
        if not any(line.startswith(_SENTENCE_COMMENTS) for line in lines):
            raise NotASentence("the block holds no words, only comments, and none of them a sentence's (# sent_id, "
                               "# text): it is no sentence (a document's header?)", first_line)
        raise ConlluError("a CoNLL-U block without words: the parser gave this sentence no parse", first_line)
    tokens: list[str] = []
    token_words: list[tuple[str, ...]] = []
    word = 1
    while word <= len(words):
        last, form, line_number = ranges.pop(word, (word, words[word - 1], first_line))
        if last > len(words):
            raise ConlluError(f"multiword token {word}-{last} ({quoted(form)}) goes past the last word {len(words)}",
                              line_number)
        tokens.append(form)
        token_words.append(tuple(words[word - 1:last]))
        word = last + 1
    if ranges:  # ranges share no word, so the loop met every one that starts at a word
        first, (last, form, line_number) = next(iter(ranges.items()))
        raise ConlluError(f"multiword token {first}-{last} ({quoted(form)}) starts after the last word {len(words)}",
                          line_number)
    tags = None if all(tag == "_" for tag in xpos) else tuple(xpos)
    return ConlluSentence(DependencyParse(tuple(words), tuple(heads), tuple(upos), tags),
                          tuple(tokens), tuple(token_words))


def _add_range(ranges: dict[int, tuple[int, str, int]], first: int, last: int, form: str, line: int) -> None:
    """Record the multiword token ``first``-``last``; :class:`ConlluError` when it shares a word with
    one recorded before (``3-4 zum`` then ``3-5``): which of the two spells those words is unknown."""
    for other_first, (other_last, other_form, other_line) in ranges.items():
        if other_first <= last and first <= other_last:
            raise ConlluError(f"multiword token {first}-{last} ({quoted(form)}) overlaps {other_first}-{other_last} "
                              f"({quoted(other_form)}) of line {other_line}: each word belongs to one surface token "
                              "at most; fix the parser output", line)
    ranges[first] = (last, form, line)
