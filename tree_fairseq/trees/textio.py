"""Reading the corpus's text files line by line, with a file and line for bytes that are not UTF-8."""

import re
import unicodedata
from collections.abc import Iterator

from tree_fairseq.trees.bracketed import TreeError, quoted

# Characters other than LF that Python's readers take for a line break (a text-mode file the CR;
# str.splitlines() all of them): fairseq-preprocess, subword-nmt and sacremoses would split a line there.
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_BREAK = re.compile(f"[{re.escape(LINE_BREAKS)}]")
# Whitespace other than the space and the line breaks (tab, no-break space, U+001F, ...; none is
# above U+3000): str.split() (fairseq, the tree tools) splits tokens at it, subword-nmt, which splits
# words at the space only, keeps it inside a word.
OTHER_SPACES = frozenset(char for char in map(chr, range(0x3000 + 1))
                         if char.isspace() and char not in LINE_BREAKS + " \n")
# The names of the control characters among them (unicodedata has none for a control character).
_CONTROL_NAMES = {"\t": "CHARACTER TABULATION", "\x1f": "INFORMATION SEPARATOR ONE"}
# What makes such text safe; the recipes run it before tokenising.
ONE_LINE_COMMAND = "python data-prep/text_tools.py one-line < IN > OUT"


def other_space(line: str) -> str | None:
    """What to say about the first whitespace character inside ``line`` that is not the space (the
    line break at its end aside), None when there is none: its code point and name, where it is,
    why it breaks the pipeline, and the fix (the recipes' ``text_tools.py one-line``, which makes
    every such character a space)."""
    body = line.rstrip("\r\n")
    position = next((i for i, char in enumerate(body) if char in OTHER_SPACES), None)
    if position is None:
        return None
    char = body[position]
    # The word as subword-nmt sees it: from the space before to the space after.
    start, end = body.rfind(" ", 0, position) + 1, body.find(" ", position)
    word = body[start:end if end >= 0 else len(body)]
    name = unicodedata.name(char, _CONTROL_NAMES.get(char, "a whitespace character"))
    return (f"U+{ord(char):04X} {name} at character {position + 1}, in {quoted(word)}: tree-fairseq-parse and "
            "fairseq split tokens there but subword-nmt does not, so the trees and the BPE'd text would disagree on "
            "the words; make every such character a space in the text before it is parsed and BPE'd, as the recipes "
            f"do: {ONE_LINE_COMMAND}")


def utf8_lines(path: str) -> Iterator[str]:
    """The lines of ``path``, each ending in ``\n`` (CRLF endings kept as they are). A line break
    other than LF inside a line (a lone CR, U+2028, ...), which another reader of the same file
    would split at, raises :class:`TreeError` naming the file, line and character; so does a byte
    sequence that is not UTF-8 (instead of a bare UnicodeDecodeError)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        try:
            for number, line in enumerate(f, start=1):
                body = line.removesuffix("\n").removesuffix("\r")
                inner_break = _LINE_BREAK.search(body)
                if inner_break:
                    char = inner_break.group()
                    raise TreeError(f"{path}:{number}: U+{ord(char):04X} inside the line, which other readers "
                                    "(fairseq-preprocess, subword-nmt, sacremoses) take for a line break, so the "
                                    "files would no longer pair line by line; replace it by a space")
                yield line
        except UnicodeDecodeError as error:
            raise utf8_error(path, error) from None


_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


def utf8_error(path: str, error: UnicodeDecodeError) -> TreeError:
    """The first line of ``path`` that is not UTF-8, as a :class:`TreeError` (a compressed file is
    named as such)."""
    with open(path, "rb") as f:
        start = f.read(8)
    for magic, kind in _COMPRESSED.items():
        if start.startswith(magic):
            return TreeError(f"{path}: {kind}-compressed, not text: decompress it first")
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                return TreeError(f"{path}:{line_number}: not UTF-8: byte 0x{line[bad.start]:02x} at byte "
                                 f"{bad.start + 1} of the line ({bad.reason}); convert the file to UTF-8 "
                                 "(e.g. iconv -f latin1 -t utf-8)")
    return TreeError(f"{path}: not UTF-8 ({error})")
