"""The source with the children of every tree node in reverse order: the same trees, read as
unordered trees, over the words in another order. A probe of whether a trained tree model reads
the source's word order: a model that sees its input only as unordered trees (tree composition
without positions) translates the reversed source exactly as the original; any model that reads
the order does not.

Reads bracketed trees (one line per sentence, as ``tree-fairseq-preprocess`` reads them) and the
subword text beside them, and writes both reversed: every node's children (words or nodes) in
reverse order, several trees on one line in reverse order too: the mirror image of the line's
trees, whose words are the sentence's in reverse order, and so the text's are written.
``-NONE-`` traces, which are not words of the text, are reversed with their siblings
(``tree-fairseq-preprocess`` drops them, as ever). A word's pieces keep their order: reversed,
they would be other pieces of the dictionary. Binarise the output with the
trained model's dictionaries (``--srcdict``, ``--tgtdict``, ``--nodedict``) and translate it as
the original.

The trees' words and the text's words are matched by position, so every line must have as many
of each; a line that does not is refused, naming both files and the line, as is a node without
a label whose last child is a word (reversed, it could not be read back); so are files of
different lengths, a file given twice and an output that exists. Both outputs are written to
``OUTPUT.partial-XXXX`` first and take their names only when complete: a run stopped half-way
(an error, Ctrl-C, SIGTERM) leaves no output, and of two runs at once on the same outputs the
second to finish is refused. The command line is ``scripts/reverse_children.py``, or
``python -m tree_fairseq.analysis.reversed_children``.
"""

import os
import sys
import tempfile

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.files import check_output, current_umask
from tree_fairseq.cli.termination import removed_on_sigterm
from tree_fairseq.trees import SUBWORD_FORMATS, RawTree, TreeError, group_pieces, read_bracketed
from tree_fairseq.trees.tree import TRACE_LABEL


def _count_words(tree: RawTree) -> int:
    """The words of ``tree``, but those of ``-NONE-`` traces (which are not words of the text);
    without recursion: trees can be deeper than Python's recursion limit."""
    count, stack = 0, [tree]
    while stack:
        node = stack.pop()
        if node.is_word:
            count += 1
        elif node.label != TRACE_LABEL:
            stack.extend(node.children)
    return count


def reversed_tree(tree: RawTree) -> RawTree:
    """A copy of ``tree`` with every node's children in reverse order: its mirror image, whose
    words are ``tree``'s in reverse order."""
    copy = RawTree(tree.label)
    stack = [(tree, copy)]
    while stack:
        node, new = stack.pop()
        for child in reversed(node.children):
            new_child = RawTree(child.label)
            new.children.append(new_child)
            if not child.is_word:
                stack.append((child, new_child))
    return copy


def bracketed(tree: RawTree) -> str:
    """``tree`` written as it was read: labels and words as their written tokens."""
    tokens, stack = [], [tree]
    while stack:
        node = stack.pop()
        if node is None:
            tokens.append(")")
        elif node.is_word:
            tokens.append(node.label)
        else:
            tokens.append("(" + node.label)
            stack.append(None)
            stack.extend(reversed(node.children))
    return " ".join(tokens).replace(" )", ")")


def reverse_line(tree_line: str, text_line: str, subword_format: str = "subword_nmt") -> tuple[str, str]:
    """One sentence's trees and subword text, reversed (see the module). Raises
    :class:`TreeError` when the trees and the text have different numbers of words."""
    trees = read_bracketed(tree_line)
    pieces = text_line.split()
    words = group_pieces(pieces, subword_format)
    tree_words = sum(_count_words(tree) for tree in trees)
    if tree_words != len(words):
        raise TreeError(f"the trees have {tree_words} words, the text {len(words)}: "
                        "they must be over the same words")
    new_trees = [reversed_tree(tree) for tree in reversed(trees)]
    _check_labels(new_trees)
    # The mirror image of the line's trees reads their words backwards: so does the text.
    text = " ".join(" ".join(pieces[first:last + 1]) for _, first, last in reversed(words))
    return " ".join(bracketed(tree) for tree in new_trees), text


def _check_labels(trees: list[RawTree]) -> None:
    """A node without a label that would begin with a word cannot be written: the reader takes
    that word for its label (``( word ...)``)."""
    stack = list(trees)
    while stack:
        node = stack.pop()
        if not node.is_word:
            if not node.label and node.children[0].is_word:
                raise TreeError(f"a node without a label would begin with the word {node.children[0].label!r} "
                                "once reversed, and be read with it as its label; give the node a label")
            stack.extend(node.children)


def _lines(path: str):
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            try:
                yield line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{number}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def reverse_files(trees: str, text: str, out_trees: str, out_text: str, subword_format: str) -> int:
    """Write the reversed trees and text (see the module); returns the number of lines. Raises
    ValueError (a TreeError naming the file and line) for bad input or outputs."""
    paths = {"--trees": trees, "--text": text, "--out-trees": out_trees, "--out-text": out_text}
    real = {}
    for option, path in paths.items():
        key = os.path.realpath(path)
        if key in real:
            raise ValueError(f"{option} {path} is also {real[key]}: four different files are needed")
        real[key] = f"{option} {path}"
    for option in ("--out-trees", "--out-text"):
        if os.path.lexists(paths[option]):
            raise ValueError(f"{option} {paths[option]} exists; remove it or write elsewhere")
        # a missing folder (or a device) named by the option, not by the partial file made beside it
        check_output(option, paths[option], [(name, paths[name]) for name in ("--trees", "--text")])
    partial = {}
    count = 0
    try:
        umask = current_umask()
        for option in ("--out-trees", "--out-text"):
            directory, name = os.path.split(os.path.abspath(paths[option]))
            descriptor, partial[option] = tempfile.mkstemp(prefix=f"{name}.partial-", dir=directory)
            os.fchmod(descriptor, 0o666 & ~umask)  # as open() would have made it, not mkstemp's 0600
            os.close(descriptor)
        with removed_on_sigterm(partial["--out-trees"]), removed_on_sigterm(partial["--out-text"]), \
                open(partial["--out-trees"], "w", encoding="utf-8") as tree_out, \
                open(partial["--out-text"], "w", encoding="utf-8") as text_out:
            tree_lines, text_lines = _lines(trees), _lines(text)
            while True:
                tree_line, text_line = next(tree_lines, None), next(text_lines, None)
                if tree_line is None or text_line is None:
                    break
                count += 1
                try:
                    new_tree, new_text = reverse_line(tree_line, text_line, subword_format)
                except TreeError as error:
                    raise TreeError(f"{trees}:{count} and {text}:{count}: {error}") from None
                tree_out.write(new_tree + "\n")
                text_out.write(new_text + "\n")
            if tree_line is not None or text_line is not None:
                longer, shorter = (trees, text) if tree_line is not None else (text, trees)
                raise ValueError(f"{longer} has more lines than {shorter} ({count}): one line per sentence in both")
        for option in ("--out-trees", "--out-text"):  # a second run at once fails here, leaving the first's
            try:
                os.link(partial[option], paths[option])
            except FileExistsError:
                raise ValueError(f"{option} {paths[option]} was written by another run meanwhile") from None
    finally:
        for path in partial.values():
            if os.path.exists(path):
                os.remove(path)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog="example: python scripts/reverse_children.py --trees bpe/test.tree.en --text bpe/test.en "
               "--out-trees reversed/test.tree.en --out-text reversed/test.en")
    parser.add_argument("--trees", required=True, help="bracketed trees, one line per sentence")
    parser.add_argument("--text", required=True, help="the subword text of the same sentences, one line each")
    parser.add_argument("--out-trees", required=True, help="where to write the reversed trees (must not exist)")
    parser.add_argument("--out-text", required=True, help="where to write the reversed text (must not exist)")
    parser.add_argument("--subword-format", choices=SUBWORD_FORMATS, default="subword_nmt",
                        help="how the text's pieces mark words (default: subword_nmt's @@)")
    args = parser.parse_args(argv)
    try:
        count = reverse_files(args.trees, args.text, args.out_trees, args.out_text, args.subword_format)
    except (OSError, ValueError) as error:
        print(f"reverse_children: error: {error}", file=sys.stderr)
        return 1
    print(f"{count} sentences reversed: {args.out_trees}, {args.out_text}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
