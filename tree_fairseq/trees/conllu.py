"""Reading CoNLL-U (Universal Dependencies' format, written by UDPipe, stanza, Trankit, spaCy's
converters and most dependency parsers): one block of lines per sentence, blocks separated by
blank lines.

A block's lines are comments (``#``), words (an integer ID), multiword-token ranges (``3-4 zum``:
one surface token over the words 3 and 4, ``zu dem``) and empty nodes (``5.1``, enhanced
dependencies only, ignored). Columns are tab-separated: ID, FORM, LEMMA, UPOS, XPOS, FEATS,
HEAD, DEPREL, DEPS, MISC; HEAD 0 marks a root.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from tree_fairseq.trees.bracketed import TreeError, quoted
from tree_fairseq.trees.dependency import DependencyParse
from tree_fairseq.trees.textio import utf8_lines

_COLUMNS = 10


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


def read_conllu_sentence(lines: list[str]) -> ConlluSentence:
    """The sentence of one block; :class:`TreeError` for a block without words (a parser's
    empty output) or one that is not well-formed CoNLL-U (the message names the block's line,
    counted from 1)."""
    words: list[str] = []
    heads: list[int] = []
    upos: list[str] = []
    xpos: list[str] = []
    ranges: dict[int, tuple[int, str]] = {}  # first word -> (last word, surface form)
    for offset, line in enumerate(lines):
        if line.startswith("#"):
            continue
        where = f"line {offset + 1} of the block"
        columns = line.split("\t")
        if len(columns) != _COLUMNS:
            raise TreeError(f"{where}: {len(columns)} tab-separated columns, CoNLL-U has {_COLUMNS}: {line!r}")
        word_id, form = columns[0], columns[1]
        if "." in word_id:
            continue  # an empty node
        if "-" in word_id:
            first, _, last = word_id.partition("-")
            if not (first.isdigit() and last.isdigit() and int(first) < int(last)):
                raise TreeError(f"{where}: {word_id!r} is not a multiword-token range such as 3-4")
            ranges[int(first)] = (int(last), form)
            continue
        if word_id != str(len(words) + 1):
            raise TreeError(f"{where}: word ID {word_id!r} where word {len(words) + 1} was expected")
        if not columns[6].isdigit():
            raise TreeError(f"{where}: HEAD {columns[6]!r} of word {word_id} is not a number")
        words.append(form)
        heads.append(int(columns[6]) - 1)
        upos.append(columns[3])
        xpos.append(columns[4])
    if not words:
        raise TreeError("a CoNLL-U block without words: the parser gave this sentence no parse")
    tokens: list[str] = []
    token_words: list[tuple[str, ...]] = []
    word = 1
    while word <= len(words):
        last, form = ranges.pop(word, (word, words[word - 1]))
        if last > len(words):
            raise TreeError(f"multiword token {word}-{last} ({quoted(form)}) goes past the last word {len(words)}")
        tokens.append(form)
        token_words.append(tuple(words[word - 1:last]))
        word = last + 1
    if ranges:
        first, (last, form) = next(iter(ranges.items()))
        raise TreeError(f"multiword token {first}-{last} ({quoted(form)}) does not start at a word of its own "
                        "(it overlaps another)")
    tags = None if all(tag == "_" for tag in xpos) else tuple(xpos)
    return ConlluSentence(DependencyParse(tuple(words), tuple(heads), tuple(upos), tags),
                          tuple(tokens), tuple(token_words))
