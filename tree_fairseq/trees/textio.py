"""Reading the corpus's text files line by line, with a file and line for bytes that are not UTF-8."""

from collections.abc import Iterator

from tree_fairseq.trees.bracketed import TreeError


def utf8_lines(path: str) -> Iterator[str]:
    """The lines of ``path`` as Python's text mode reads them; a byte sequence that is not UTF-8
    raises :class:`TreeError` naming the file, line and byte instead of a bare UnicodeDecodeError."""
    with open(path, encoding="utf-8") as f:
        try:
            yield from f
        except UnicodeDecodeError as error:
            raise utf8_error(path, error) from None


def utf8_error(path: str, error: UnicodeDecodeError) -> TreeError:
    """The first line of ``path`` that is not UTF-8, as a :class:`TreeError`."""
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                return TreeError(f"{path}:{line_number}: not UTF-8: byte 0x{line[bad.start]:02x} at byte "
                                 f"{bad.start + 1} of the line ({bad.reason}); convert the file to UTF-8 "
                                 "(e.g. iconv -f latin1 -t utf-8)")
    return TreeError(f"{path}: not UTF-8 ({error})")
