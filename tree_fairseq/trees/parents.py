"""Dependency parents of the words of a sentence, and of its subword pieces.

Heads are kept as :class:`~tree_fairseq.trees.dependency.DependencyParse` keeps them: ``heads[i]``
is the 0-based index of word ``i``'s head, ``-1`` for a root. A heads file (tree-fairseq-parse
writes it beside the trees, tree-fairseq-preprocess reads it as ``{pref}.heads.{src}``) holds one
line per sentence, CoNLL-U's HEAD column: the 1-based head of each word, ``0`` for a root
(``2 0 2 3`` for ``the cat sat down``).

Trivial heads (:data:`HEAD_CONTROLS`), the controls for a parser's heads: ``next`` (each word's
parent is the next word, the last word the root), ``previous`` (the previous word, the first the
root), and ``random``, a random projective tree drawn from the sentence's words and a seed
(:func:`random_projective_heads`): the same sentence gets the same tree in the data-bin and in
raw-text translation.

Pieces (:func:`piece_parent_spans`): every piece of a word gets its word's parent, given as the
first and last piece of the parent word; a root word's pieces get their own word (the root is its
own parent).
"""

import random
from collections.abc import Sequence

from tree_fairseq.trees.align import canonical
from tree_fairseq.trees.bracketed import TreeError
from tree_fairseq.trees.subwords import group_pieces

HEAD_CONTROLS = ("next", "previous", "random")


def read_heads(line: str) -> tuple[int, ...]:
    """The heads of one line of a heads file (1-based, 0 for a root) as 0-based, ``-1`` for a
    root; :class:`TreeError` for a line that is not whole numbers or points outside its words
    or at a word itself."""
    fields = line.split()
    if not fields:
        raise TreeError("an empty line of heads: a sentence has one head per word")
    if not all(field.isascii() and field.isdigit() for field in fields):
        bad = next(field for field in fields if not (field.isascii() and field.isdigit()))
        raise TreeError(f"head {bad!r} is not a whole number (1-based heads, 0 for the root)")
    heads = tuple(int(field) - 1 for field in fields)
    check_heads(heads)
    return heads


def check_heads(heads: Sequence[int]) -> None:
    """:class:`TreeError` unless every head is another word of the sentence or ``-1`` (a root), and
    every word reaches a root by following its heads: heads that form a cycle (a converter's error,
    say) are no dependency tree, whatever wrote them."""
    n = len(heads)
    for word, head in enumerate(heads):
        if not -1 <= head < n or head == word:
            raise TreeError(f"word {word + 1} has head {head + 1}: not another word of the {n} or the root (0)")
    reaches_root = [False] * n
    for start in range(n):
        path, on_path, word = [], set(), start
        while word >= 0 and not reaches_root[word]:
            if word in on_path:
                cycle = sorted(path[path.index(word):])
                raise TreeError(f"the heads form a cycle (words {', '.join(str(w + 1) for w in cycle[:10])}): "
                                "not a dependency tree")
            path.append(word)
            on_path.add(word)
            word = heads[word]
        for word in path:
            reaches_root[word] = True


def format_heads(heads: Sequence[int]) -> str:
    """One line of a heads file (without its line break): 1-based heads, 0 for a root."""
    return " ".join(str(head + 1) for head in heads)


def control_heads(words: Sequence[str], control: str, seed: int = 1) -> tuple[int, ...]:
    """The trivial heads ``control`` (one of :data:`HEAD_CONTROLS`) of a sentence of ``words``."""
    n = len(words)
    if control == "next":
        return tuple(range(1, n)) + (-1,)
    if control == "previous":
        return (-1,) + tuple(range(n - 1))
    if control == "random":
        # Python seeds Random from a str by its SHA-512: the same in every process and run.
        return random_projective_heads(n, random.Random(f"{seed}\t{' '.join(words)}"))
    raise ValueError(f"unknown head control {control!r}; one of {HEAD_CONTROLS}")


def random_projective_heads(num_words: int, rng: random.Random) -> tuple[int, ...]:
    """A random projective dependency tree over ``num_words`` words with one root.

    Each span gets a root drawn uniformly among its words; the words left of it, and those right
    of it, are cut at random into consecutive spans (each cut between two words made with
    probability 1/2), and each span's root depends on it. Every projective tree can come out.
    Iterative: any length is fine."""
    heads = [-1] * num_words
    stack = [(0, num_words - 1, -1)] if num_words else []
    while stack:
        start, end, head = stack.pop()
        root = rng.randint(start, end)
        heads[root] = head
        for side_start, side_end in ((start, root - 1), (root + 1, end)):
            span_start = side_start
            for cut in range(side_start, side_end + 1):
                if cut == side_end or rng.random() < 0.5:
                    stack.append((span_start, cut, root))
                    span_start = cut + 1
    return tuple(heads)


def heads_over_tokens(heads: Sequence[int], token_of_word: Sequence[int], num_tokens: int) -> tuple[int, ...]:
    """The heads of ``num_tokens`` corpus tokens from those of a parse's words
    (``token_of_word[w]``: the token word ``w`` starts in, non-decreasing). A token of several
    words (a parser's multiword token, German ``zum`` parsed as ``zu dem``, or two parser tokens
    in one corpus token) depends on the token of the head of its first word whose head lies
    outside it, and is a root when one of its words is; a token in which no word starts (a
    parser token over several corpus tokens) depends on the token before it."""
    token_heads: list[int | None] = [None] * num_tokens
    for word, head in enumerate(heads):
        token = token_of_word[word]
        if head < 0:
            token_heads[token] = -1
        elif token_heads[token] is None and token_of_word[head] != token:
            token_heads[token] = token_of_word[head]
    has_word = set(token_of_word)
    for token, head in enumerate(token_heads):
        if head is None:
            if token in has_word:
                raise TreeError(f"the words of token {token + 1} depend only on each other: their heads form a cycle")
            token_heads[token] = token - 1 if token > 0 else -1
    return tuple(token_heads)


def parse_heads_over_tokens(heads: Sequence[int], parser_tokens: Sequence[str], token_word_counts: Sequence[int],
                            tokens: Sequence[str]) -> tuple[int, ...]:
    """The heads of the corpus ``tokens`` from a parse's word ``heads``, the parse's surface
    tokens being ``parser_tokens``, ``token_word_counts[k]`` words each (a multiword token
    counts several; see :func:`heads_over_tokens` and :func:`first_character_tokens`)."""
    if len(heads) != sum(token_word_counts) or len(parser_tokens) != len(token_word_counts):
        raise TreeError(f"{len(heads)} heads for {sum(token_word_counts)} words of {len(parser_tokens)} tokens")
    token_of_parser_token = first_character_tokens(parser_tokens, tokens)
    token_of_word = [token_of_parser_token[k] for k, count in enumerate(token_word_counts) for _ in range(count)]
    return heads_over_tokens(heads, token_of_word, len(tokens))


def first_character_tokens(parser_tokens: Sequence[str], tokens: Sequence[str]) -> list[int]:
    """For each of a parser's tokens, the corpus token its first character is in; both must
    spell the same text (compared as :func:`~tree_fairseq.trees.align.canonical` forms), else
    :class:`TreeError`."""
    parsed = [canonical(token) for token in parser_tokens]
    corpus = [canonical(token) for token in tokens]
    if parsed == corpus:
        return list(range(len(tokens)))
    if "".join(parsed) != "".join(corpus):
        raise TreeError(f"the parser's tokens {' '.join(parser_tokens)!r} do not spell the text {' '.join(tokens)!r}")
    owner = [token for token, text in enumerate(corpus) for _ in text]
    first, position = [], 0
    for text in parsed:
        first.append(owner[min(position, len(owner) - 1)] if owner else 0)
        position += len(text)
    return first


def piece_parent_spans(heads: Sequence[int], pieces: Sequence[str], subword_format: str) -> list[tuple[int, int]]:
    """For each piece, the inclusive ``(first, last)`` pieces of its word's parent, or of its own
    word when that is a root. ``heads`` are over the words the pieces spell
    (:func:`~tree_fairseq.trees.subwords.group_pieces`); :class:`TreeError` when their numbers
    differ."""
    words = group_pieces(list(pieces), subword_format)
    if len(words) != len(heads):
        raise TreeError(f"{len(heads)} heads for the {len(words)} words the pieces spell")
    check_heads(heads)
    spans = []
    for word, (_, first, last) in enumerate(words):
        parent = heads[word] if heads[word] >= 0 else word
        _, parent_first, parent_last = words[parent]
        spans += [(parent_first, parent_last)] * (last - first + 1)
    return spans
