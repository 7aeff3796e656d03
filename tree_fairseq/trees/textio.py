"""Reading the corpus's text files line by line, with a file and line for bytes that are not UTF-8."""

from collections.abc import Iterator

from tree_fairseq.trees.bracketed import TreeError


# Characters other than LF that Python's readers take for a line break (a text-mode file the CR;
# str.splitlines() all of them): fairseq-preprocess, subword-nmt and sacremoses would split a line there.
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def utf8_lines(path: str) -> Iterator[str]:
    """The lines of ``path``, each ending in ``\n`` (CRLF endings kept as they are). A line break
    other than LF inside a line (a lone CR, U+2028, ...), which another reader of the same file
    would split at, raises :class:`TreeError` naming the file, line and character; so does a byte
    sequence that is not UTF-8 (instead of a bare UnicodeDecodeError)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        try:
            for number, line in enumerate(f, start=1):
                body = line.removesuffix("\n").removesuffix("\r")
                if any(char in LINE_BREAKS for char in body):
                    char = next(char for char in body if char in LINE_BREAKS)
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
