"""Reading and writing Penn-Treebank bracketed trees, one tree per line.

The reader accepts what real parsers and treebanks write: ``(ROOT ...)`` and
``( (S ...) )`` wrappers, function tags, ``-NONE-`` traces, ``-LRB-``/``-RRB-``
and several trees on one line (a multi-sentence line). It returns the tree as
written; :mod:`tree_fairseq.trees.tree` turns it into the normal form.
"""

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"\(|\)|[^\s()]+")

# Brackets inside a word would break the format; PTB writes them as these.
BRACKET_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}


class TreeError(ValueError):
    """A tree that cannot be read, normalised or aligned. Callers that know the
    file and line add them with :func:`located`."""


def located(error: object, path: str, line_number: int) -> "TreeError":
    """The same error, prefixed with ``path:line`` (1-based line)."""
    return TreeError(f"{path}:{line_number}: {error}")


@dataclass
class RawTree:
    """A tree exactly as written: a labelled node with children, or a word
    (a node with no children, whose label is the word)."""

    label: str
    children: list["RawTree"] = field(default_factory=list)

    @property
    def is_word(self) -> bool:
        return not self.children

    def words(self) -> list[str]:
        words, stack = [], [self]
        while stack:  # left to right, without recursion (trees can be deeper than its limit)
            node = stack.pop()
            if node.is_word:
                words.append(node.label)
            else:
                stack.extend(reversed(node.children))
        return words


def read_bracketed(line: str) -> list[RawTree]:
    """Parse one line of bracketed text into its trees (usually exactly one).

    Raises :class:`TreeError` for an empty line, unbalanced brackets, text
    outside brackets, or a line that is not a tree at all (e.g. ``null``).
    """
    tokens = _TOKEN.findall(line)
    if not tokens:
        raise TreeError("empty line where a tree was expected")
    if tokens[0] != "(":
        raise TreeError(f"not a bracketed tree: {_preview(line)!r}")
    trees = []
    stack: list[RawTree] = []
    expect_label = False
    for token in tokens:
        if token == "(":
            node = RawTree("")
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
            expect_label = True
        elif token == ")":
            if not stack:
                raise TreeError(f"unbalanced brackets: unexpected ')' in {_preview(line)!r}")
            node = stack.pop()
            if node.is_word:
                raise TreeError(f"empty bracket pair '({node.label})' in {_preview(line)!r}")
            if not stack:
                trees.append(node)
            expect_label = False
        else:
            if not stack:
                raise TreeError(f"text outside brackets: {token!r} in {_preview(line)!r}")
            if expect_label:
                stack[-1].label = token
                expect_label = False
            else:
                stack[-1].children.append(RawTree(token))
    if stack:
        raise TreeError(f"unbalanced brackets: {len(stack)} unclosed '(' in {_preview(line)!r}")
    return trees


def escape_word(word: str) -> str:
    for bracket, escape in BRACKET_ESCAPES.items():
        word = word.replace(bracket, escape)
    return word


def _preview(line: str, limit: int = 80) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[:limit] + "..."
