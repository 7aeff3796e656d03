"""Reading and writing Penn-Treebank bracketed trees, one tree per line.

The reader accepts what real parsers and treebanks write: ``(ROOT ...)`` and
``( (S ...) )`` wrappers, function tags, ``-NONE-`` traces, ``-LRB-``/``-RRB-``
and several trees on one line (a multi-sentence line). It returns the tree as
written; :mod:`tree_fairseq.trees.tree` turns it into the normal form.

Words and labels are escaped differently. A bracket inside a word is written as PTB writes it
(``f(x)`` -> ``f-LRB-x-RRB-``), which the alignment to the corpus tokens undoes. A label (a
phrase label or a part-of-speech tag) is percent-escaped (:func:`escape_label`): German STTS
tags such as ``$(``, or a CoNLL-U tag holding a space, would otherwise end the label early or
open a bracket, and a ``-`` or ``=`` inside a label would be taken for the start of a function
tag and cut off (``NP-SBJ`` -> ``NP``). The reader undoes it (:func:`unescape_label`), so every
label written comes back as it was.
"""

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"\(|\)|[^\s()]+")

# Brackets inside a word would break the format; PTB writes them as these.
BRACKET_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}
# One escaped character of a label: ``%`` and the two hex digits of each of its UTF-8 bytes.
LABEL_ESCAPE = "%"
_ESCAPED_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


class TreeError(ValueError):
    """A tree that cannot be read, normalised or aligned. Callers that know the
    file and line add them with :func:`located`."""


def quoted(text: str) -> str:
    """``text`` in quotes for a message, with every character one cannot see (a control or format
    character, whitespace other than the space: tab, no-break space, U+001F, ...) written as its code
    point, ``'a<U+00A0>b'``: two tokens that print the same are then told apart."""
    return "'" + "".join(char if char == " " or (char.isprintable() and not char.isspace())
                         else f"<U+{ord(char):04X}>" for char in text) + "'"


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
        raise TreeError(f"not a bracketed tree: {quoted(_preview(line))}")
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
                raise TreeError(f"unbalanced brackets: unexpected ')' in {quoted(_preview(line))}")
            node = stack.pop()
            if node.is_word:
                raise TreeError(f"empty bracket pair '({node.label})' in {quoted(_preview(line))}")
            if not stack:
                trees.append(node)
            expect_label = False
        else:
            if not stack:
                raise TreeError(f"text outside brackets: {quoted(token)} in {quoted(_preview(line))}")
            if expect_label:
                stack[-1].label = token
                expect_label = False
            else:
                stack[-1].children.append(RawTree(token))
    if stack:
        raise TreeError(f"unbalanced brackets: {len(stack)} unclosed '(' in {quoted(_preview(line))}")
    return trees


def escape_word(word: str) -> str:
    for bracket, escape in BRACKET_ESCAPES.items():
        word = word.replace(bracket, escape)
    return word


def escape_label(label: str) -> str:
    """``label`` as the tree writer writes it: each character that the reader would not give back
    written ``%`` + the hex digits of its UTF-8 bytes (``$(`` -> ``$%28``, ``NN SBJ`` ->
    ``NN%20SBJ``, a no-break space -> ``%C2%A0``). Those are ``%`` itself, the brackets, every
    whitespace character, and ``-`` and ``=`` unless the label starts with ``-`` (the reader cuts
    a label at them as at a function tag, except in names such as ``-LRB-``). Other characters,
    non-ASCII letters included, are written as they are; a label with none of these is unchanged
    (``NP``, ``PRP$``, ``$.``, ``-LRB-``)."""
    name = label.startswith("-")
    return "".join(
        "".join(f"{LABEL_ESCAPE}{byte:02X}" for byte in char.encode("utf-8"))
        if char in "%()" or char.isspace() or (char in "-=" and not name) else char
        for char in label)


def unescape_label(written: str) -> str:
    """The label :func:`escape_label` wrote as ``written``. A ``%`` not followed by hex digits
    that spell UTF-8 (another tool's label such as ``%`` or ``%Z``) stays as it is."""
    return _ESCAPED_RUN.sub(_unescaped_run, written) if LABEL_ESCAPE in written else written


def _unescaped_run(match: re.Match) -> str:
    try:
        return bytes.fromhex(match.group().replace(LABEL_ESCAPE, "")).decode("utf-8")
    except UnicodeDecodeError:
        return match.group()


def _preview(line: str, limit: int = 80) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[:limit] + "..."
