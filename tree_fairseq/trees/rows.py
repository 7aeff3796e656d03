"""The node rows of one source line, the way tree-fairseq-preprocess stores them, read straight from
its bracketed tree and BPE pieces: the labels and inclusive piece spans of the nodes of the tree
over the pieces, bottom-up.

:func:`piece_rows` is a shortcut for the common line. It gives exactly what reading the tree
(:func:`~tree_fairseq.trees.tree.parse_tree`), aligning it to the words the pieces spell
(:func:`~tree_fairseq.trees.align.align`) and adding the nodes over split words
(:func:`~tree_fairseq.trees.subwords.expand_subwords`) give, without building a tree object per
node: one tree on the line, no ``-NONE-`` traces, no reserved label, leaves that are the words
(PTB and Moses escapes aside). For any other line it answers ``None``, and the caller takes the
long way, which also says what is wrong with a line that is wrong. :func:`parent_rows` does the
same for a line of dependency heads.
"""

import functools

from tree_fairseq.trees.align import canonical
from tree_fairseq.trees.bracketed import unescape_label
from tree_fairseq.trees.subwords import RESERVED_LABELS, SUBWORD_LABEL, SUBWORD_NMT_JOINER, group_pieces
from tree_fairseq.trees.tree import ROOT_LABEL, TRACE_LABEL, WRAPPER_LABELS, strip_function_tags


@functools.lru_cache(maxsize=100_000)
def _read_label(written: str) -> str:
    """A label as written -> as read (function tags stripped, escapes undone); labels repeat a lot."""
    return unescape_label(strip_function_tags(written))


def quick_tree(line: str):
    """``(leaves, tags, label_of_span)`` of a line holding one bracketed tree without traces, as
    :func:`~tree_fairseq.trees.tree.normalize` reads it: the leaves as written, each leaf's
    preterminal label, and the label of each word span ``(first, last)`` of two words or more
    (``""`` for an unlabelled one). ``None`` for a line that is not exactly that (several trees,
    traces, a word without a preterminal of its own, a bracket error, ...).

    The line is cut at its closing brackets: each piece holds the brackets opened since the last
    one closed, and ends either in ``TAG word`` (the preterminal that bracket closes) or in nothing
    (the bracket closes a phrase), so the tree is read in one string operation per node."""
    if TRACE_LABEL in line:
        return None
    pieces = line.split(")")
    if len(pieces) < 2 or (pieces[-1] and not pieces[-1].isspace()):
        return None  # nothing closed, or text after the last bracket
    leaves: list[str] = []
    written_tags: list[str] = []
    label_of_span: dict[tuple[int, int], str] = {}
    # The phrases open: their labels as written and first leaves.
    labels: list[str] = []
    starts: list[int] = []
    whole = False  # a tree was closed: nothing may open after it
    for piece in pieces[:-1]:
        if "(" in piece:
            if whole:
                return None  # a second tree on the line
            opened = piece.split("(")
            if opened[0] and not opened[0].isspace():
                return None  # a word outside a preterminal
            preterminal = opened.pop().split()
            if len(preterminal) != 2:
                return None  # "(X)", "()", or a word beside a preterminal
            for phrase in opened[1:]:
                fields = phrase.split()
                if len(fields) > 1:
                    return None  # a word outside a preterminal
                labels.append(fields[0] if fields else "")
                starts.append(len(leaves))
            written_tags.append(preterminal[0])
            leaves.append(preterminal[1])
            whole = not starts  # a line of one preterminal is a tree of one word
        else:
            if piece and not piece.isspace():
                return None  # a word outside a preterminal
            if not starts:
                return None  # a bracket closes nothing
            start = starts.pop()
            written = labels.pop()
            end = len(leaves) - 1
            if end > start:
                label = _read_label(written)
                span = (start, end)
                if span not in label_of_span or label not in WRAPPER_LABELS:
                    label_of_span[span] = label
                elif label_of_span[span] == "":
                    label_of_span[span] = label
            whole = not starts
    if starts or not leaves:
        return None
    tags = list(map(_read_label, written_tags))
    if not WRAPPER_LABELS.isdisjoint(tags):
        return None
    return leaves, tags, label_of_span


def _words(pieces: list[str], subword_format: str) -> tuple[list[int], list[int], list[str]]:
    """Each word's first and last piece and the word the pieces spell."""
    if subword_format == "subword_nmt":
        return _subword_nmt_words(pieces)
    grouped = group_pieces(pieces, subword_format)
    return [first for _, first, _ in grouped], [last for _, _, last in grouped], [word for word, _, _ in grouped]


def piece_rows(tree_line: str, pieces: list[str], subword_format: str, subword_label: str):
    """``(labels, spans)`` of the nodes of the tree over ``pieces``, bottom-up (sorted by
    ``(end, -start)``), ``spans`` flattened as ``start0, end0, start1, end1, ...``; ``None`` where
    the line must take the long way (see the module's text)."""
    read = quick_tree(tree_line)
    if read is None:
        return None
    leaves, tags, label_of_span = read
    first_piece, last_piece, words = _words(pieces, subword_format)
    if leaves != words:
        if len(leaves) != len(words) or any(leaf != word and canonical(leaf) != canonical(word)
                                            for leaf, word in zip(leaves, words)):
            return None
    labels_in_tree = set(label_of_span.values())
    if not labels_in_tree.isdisjoint(RESERVED_LABELS) or not RESERVED_LABELS.isdisjoint(tags):
        return None
    rows = [(last_piece[end], -first_piece[start], label or ROOT_LABEL)
            for (start, end), label in label_of_span.items()]
    if len(pieces) != len(words):
        by_pos = subword_label == "pos"
        rows += [(last, -first, tag if by_pos else SUBWORD_LABEL)
                 for first, last, tag in zip(first_piece, last_piece, tags) if last > first]
    rows.sort()
    spans: list[int] = []
    for end, negative_start, _ in rows:
        spans.append(-negative_start)
        spans.append(end)
    return [label for _, _, label in rows], spans


def _subword_nmt_words(pieces: list[str]):
    """First and last piece of each word that subword-nmt pieces spell, and the words
    (:func:`~tree_fairseq.trees.subwords.group_pieces`: a piece ending in ``@@`` goes on into the
    next one; the last piece ends its word whatever it ends in)."""
    last = len(pieces) - 1
    ends = [i for i, piece in enumerate(pieces) if i == last or not piece.endswith(SUBWORD_NMT_JOINER)]
    if len(ends) == len(pieces):
        words = pieces if not pieces or not pieces[-1].endswith(SUBWORD_NMT_JOINER) else \
            pieces[:-1] + [pieces[-1].removesuffix(SUBWORD_NMT_JOINER)]
        return list(range(len(pieces))), ends, words
    starts = [0] + [end + 1 for end in ends[:-1]]
    words = ["".join(piece.removesuffix(SUBWORD_NMT_JOINER) for piece in pieces[start:end + 1]) if start != end or end == last
             else pieces[end] for start, end in zip(starts, ends)]
    return starts, ends, words


def parent_rows(heads_line: str, pieces: list[str], subword_format: str):
    """Each piece's parent span, flattened ``first0, last0, first1, last1, ...``, from one line of
    heads (1-based, 0 for a root) over the words the pieces spell, as
    :func:`~tree_fairseq.trees.parents.piece_parent_spans` of
    :func:`~tree_fairseq.trees.parents.read_heads` gives it; ``None`` for a line that is not
    whole numbers, one per word, forming a dependency tree (the long way says what is wrong)."""
    fields = heads_line.split()
    digits = "".join(fields)
    if not digits.isascii() or not digits.isdigit():
        return None
    heads = [int(field) - 1 for field in fields]
    first_piece, last_piece, _ = _words(pieces, subword_format)
    count = len(heads)
    if count != len(first_piece) or not _is_dependency_tree(heads):
        return None
    spans: list[int] = []
    for word, head in enumerate(heads):
        parent = head if head >= 0 else word
        spans += [first_piece[parent], last_piece[parent]] * (last_piece[word] - first_piece[word] + 1)
    return spans


def _is_dependency_tree(heads: list[int]) -> bool:
    """Whether every head is another word or -1 (a root), and every word reaches a root."""
    count = len(heads)
    state = [0] * count  # 1: on the path being followed, 2: reaches a root
    for word, head in enumerate(heads):
        if not -1 <= head < count or head == word:
            return False
    for start in range(count):
        path = []
        word = start
        while word >= 0 and not state[word]:
            state[word] = 1
            path.append(word)
            word = heads[word]
        if word >= 0 and state[word] == 1:
            return False
        for word in path:
            state[word] = 2
    return True
