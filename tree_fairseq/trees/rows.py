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

import re

from tree_fairseq.trees.align import canonical
from tree_fairseq.trees.bracketed import unescape_label
from tree_fairseq.trees.subwords import RESERVED_LABELS, SUBWORD_LABEL, group_pieces
from tree_fairseq.trees.tree import ROOT_LABEL, TRACE_LABEL, WRAPPER_LABELS, strip_function_tags

# One token of a bracketed line: a bracket, or a run of anything else but whitespace
# (tree_fairseq.trees.bracketed reads the same tokens).
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_JOINER = "@@"

# A label as written -> as read (function tags stripped, escapes undone); labels repeat a lot.
_READ_LABELS: dict[str, str] = {}


def _read_label(written: str) -> str:
    label = _READ_LABELS.get(written)
    if label is None:
        label = unescape_label(strip_function_tags(written))
        if len(_READ_LABELS) < 100_000:
            _READ_LABELS[written] = label
    return label


def quick_tree(line: str):
    """``(leaves, tags, label_of_span)`` of a line holding one bracketed tree without traces, as
    :func:`~tree_fairseq.trees.tree.normalize` reads it: the leaves as written, each leaf's
    preterminal label (``None`` unless every leaf has one), and the label of each word span
    ``(first, last)`` of two words or more (``""`` for an unlabelled one). ``None`` for a line
    that is not exactly that (several trees, traces, a bracket error, ...)."""
    if TRACE_LABEL in line:
        return None
    tokens = _TOKEN.findall(line)
    count = len(tokens)
    if count < 3 or tokens[0] != "(":
        return None
    leaves: list[str] = []
    tags: list[str] = []
    label_of_span: dict[tuple[int, int], str] = {}
    # Open nodes: [label as written, first leaf, children so far, whether its first child is a word].
    stack: list[list] = []
    i = 0
    while i < count:
        token = tokens[i]
        if token == "(":
            if stack:
                stack[-1][2] += 1
            elif i:
                return None  # a second tree on the line
            label = tokens[i + 1] if i + 1 < count else "("
            if label == "(" or label == ")":
                stack.append(["", len(leaves), 0, False])
                i += 1
                continue
            # "(TAG word)": a preterminal, read in one step.
            if i + 3 < count and tokens[i + 3] == ")" and tokens[i + 2] != "(" and tokens[i + 2] != ")" and stack:
                tag = _read_label(label)
                if tag in WRAPPER_LABELS:
                    return None
                leaves.append(tokens[i + 2])
                tags.append(tag)
                i += 4
                continue
            stack.append([label, len(leaves), 0, False])
            i += 2
        elif token == ")":
            if not stack:
                return None
            written, start, children, word_first = stack.pop()
            if not children:
                return None
            end = len(leaves) - 1
            if children == 1 and word_first:
                # A preterminal the shortcut above did not take: (WRAPPER word), or a whole line of one word.
                tag = _read_label(written)
                if tag in WRAPPER_LABELS or len(tags) != start:
                    return None
                tags.append(tag)
            elif end > start:
                label = _read_label(written)
                span = (start, end)
                if span not in label_of_span or label not in WRAPPER_LABELS:
                    label_of_span[span] = label
                elif label_of_span[span] == "":
                    label_of_span[span] = label
            if not stack and i != count - 1:
                return None  # a second tree, or text after the tree
            i += 1
        else:
            if not stack:
                return None
            top = stack[-1]
            if not top[2]:
                top[3] = True
            top[2] += 1
            leaves.append(token)
            i += 1
    if stack:
        return None
    if len(tags) != len(leaves):
        # Some word has no preterminal of its own: no tags, and the long way tells them apart.
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
    ends = [i for i, piece in enumerate(pieces) if i == last or not piece.endswith(_JOINER)]
    if len(ends) == len(pieces):
        words = pieces if not pieces or not pieces[-1].endswith(_JOINER) else \
            pieces[:-1] + [pieces[-1].removesuffix(_JOINER)]
        return list(range(len(pieces))), ends, words
    starts = [0] + [end + 1 for end in ends[:-1]]
    words = ["".join(piece.removesuffix(_JOINER) for piece in pieces[start:end + 1]) if start != end or end == last
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
