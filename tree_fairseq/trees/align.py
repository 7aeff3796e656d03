"""Alignment of a tree's leaves to the corpus tokens exactly as the user gave
them. The corpus tokens win: the aligned tree has the corpus tokens as leaves.

Tokens are compared in a canonical form that undoes Moses escapes
(``&apos;``), PTB bracket and quote conventions (``-LRB-``, ````) and case.
When the parser split or merged tokens, the two sides are matched character
by character and node spans are moved to the corpus token boundaries; a
token's tag (part of speech) is then that of the first leaf that shares a
character with it (``don't`` parsed as ``do n't`` gets the tag of ``do``).
Where trees must already be over the corpus tokens (tree-fairseq-preprocess),
re-tokenisation is an error instead. Text that differs only in its Unicode
normal form (NFC vs NFD) is an error that says so.
"""

import html
import itertools
import unicodedata

from tree_fairseq.trees.bracketed import TreeError, quoted
from tree_fairseq.trees.tree import Node, Tree

_PTB_ESCAPES = {
    "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
    "``": '"', "''": '"', "`": "'",
}
# Inside a word (tree-fairseq-parse writes the token f(x) as f-LRB-x-RRB-).
_BRACKET_ESCAPES = ("-LRB-", "("), ("-RRB-", ")"), ("-LSB-", "["), ("-RSB-", "]"), ("-LCB-", "{"), ("-RCB-", "}")
_CHARACTER_FORMS = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'",
                                  "\u2019": "'", "\u00ab": '"', "\u00bb": '"'})


def unescape(token: str) -> str:
    """The token as a parser should read it: PTB escapes (``-LRB-``, ````) and Moses escapes
    (``&apos;``) undone, case and characters kept."""
    token = _PTB_ESCAPES.get(token, token)
    if "-" in token:
        for escape, bracket in _BRACKET_ESCAPES:
            token = token.replace(escape, bracket)
    # Moses escapes are HTML entities (&apos; &quot; &amp; &lt; &gt; &#91; &#93; &#124;).
    return html.unescape(token)


def canonical(token: str) -> str:
    """The form in which a parser leaf and a corpus token are compared."""
    return "".join(unescape(token).translate(_CHARACTER_FORMS).lower().split())


def align(tree: Tree, tokens: list[str], retokenized: bool = True) -> Tree:
    """The tree over ``tokens`` instead of its own leaves.

    Raises :class:`TreeError` when the leaves and the tokens do not spell the
    same text, or, unless ``retokenized``, when they spell it in other tokens.
    """
    leaves = [canonical(leaf) for leaf in tree.leaves]
    words = [canonical(token) for token in tokens]
    if leaves == words:
        return Tree(tuple(tokens), tree.nodes, tree.tags)
    if "".join(leaves) != "".join(words):
        if _nfc(leaves) == _nfc(words) or "".join(_nfc(leaves)) == "".join(_nfc(words)):
            raise TreeError(
                "tree leaves and tokens differ only in their Unicode normal form (NFC vs NFD): "
                f"{_first_difference(tree.leaves, tokens)}; normalise the text and the trees the same way"
            )
        raise TreeError(
            f"tree leaves do not match the tokens: {_first_difference(tree.leaves, tokens)}"
        )
    if not retokenized:
        raise TreeError(
            "tree leaves are the same text in other tokens: "
            f"{_first_difference(tree.leaves, tokens)}; the trees must be over the corpus tokens "
            "(tree-fairseq-parse writes them so), or allow re-tokenised trees explicitly"
        )
    first_token, last_token = _token_of_leaf(leaves, words)
    label_of_span: dict[tuple[int, int], str] = {}
    for node in reversed(tree.nodes):  # top-down: the upper label of a merged span wins
        span = (first_token[node.start], last_token[node.end])
        # Two leaves of one token in different constituents make their spans
        # overlap; the upper constituent is kept.
        if span[1] > span[0] and not any(_cross(span, kept) for kept in label_of_span):
            label_of_span.setdefault(span, node.label)
    if len(tokens) >= 2:
        label_of_span.setdefault((0, len(tokens) - 1), tree.nodes[-1].label if tree.nodes else "ROOT")
    nodes = tuple(Node(label, s, e) for (s, e), label in label_of_span.items())
    return Tree(tuple(tokens), nodes, _token_tags(tree.tags, first_token, last_token, len(tokens)))


def _token_tags(tags, first_token, last_token, num_tokens):
    """The tag of each token: that of the first leaf over it (None without tags)."""
    if tags is None:
        return None
    token_tags: list[str | None] = [None] * num_tokens
    for tag, first, last in zip(tags, first_token, last_token):
        for token in range(first, last + 1):
            if token_tags[token] is None:
                token_tags[token] = tag
    return None if None in token_tags else tuple(token_tags)


def _nfc(tokens: list[str]) -> list[str]:
    return [unicodedata.normalize("NFC", token) for token in tokens]


def _cross(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] <= a[1] < b[1] or b[0] < a[0] <= b[1] < a[1]


def _token_of_leaf(leaves: list[str], words: list[str]) -> tuple[list[int], list[int]]:
    """For each leaf, the first and the last token that share a character with it."""
    owner = [i for i, word in enumerate(words) for _ in word]
    first, last = [], []
    position = 0
    for leaf in leaves:
        if leaf:
            first.append(owner[position])
            last.append(owner[position + len(leaf) - 1])
        else:  # a leaf with no characters attaches to the next token (the first of a text without any)
            token = owner[min(position, len(owner) - 1)] if owner else 0
            first.append(token)
            last.append(token)
        position += len(leaf)
    return first, last


def _first_difference(leaves, tokens) -> str:
    for i, (leaf, token) in enumerate(zip(leaves, tokens)):
        if canonical(leaf) != canonical(token):
            return f"leaf {i + 1} is {quoted(leaf)} but token {i + 1} is {quoted(token)}"
    return f"{len(leaves)} leaves but {len(tokens)} tokens"


def tree_over_tokens(tree: Tree, tokens: list[str], token_words: list[list[str]]) -> Tree:
    """The tree over ``tokens`` when its leaves are their words, ``token_words[k]``
    those of token ``k`` (a parser's multi-word-token expansion: German ``zum`` parsed as ``zu dem``).

    A node keeps the tokens all of whose words it covers. Nodes left with one
    token vanish and nodes left with the same span merge under the upper label;
    as nodes nest over words they nest over tokens, so no spans cross. A token
    of several words gets the tag of its first word (``zum`` = ``zu dem``: that
    of ``zu``).
    """
    words = [word for words_of_token in token_words for word in words_of_token]
    if words != list(tree.leaves):
        raise TreeError(f"the tree's leaves {quoted(' '.join(tree.leaves))} "
                        f"are not the words {quoted(' '.join(words))}")
    first_token, last_token = [], []  # of a node that starts / ends at each word
    for k, count in enumerate(map(len, token_words)):
        first_token += [k] + [k + 1] * (count - 1)
        last_token += [k - 1] * (count - 1) + [k]
    label_of_span: dict[tuple[int, int], str] = {}
    for node in reversed(tree.nodes):  # ancestors first: the upper label of a merged span wins
        span = (first_token[node.start], last_token[node.end])
        if span[1] > span[0]:
            label_of_span.setdefault(span, node.label)
    nodes = tuple(Node(label, s, e) for (s, e), label in label_of_span.items())
    tags = None
    if tree.tags is not None:
        first_word = itertools.accumulate(map(len, token_words[:-1]), initial=0)
        tags = tuple(tree.tags[j] for j in first_word)
    return Tree(tuple(tokens), nodes, tags)
