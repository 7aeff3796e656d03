"""A seeded synthetic program-translation corpus, tree to tree: programs of a small imperative
language, *For*, and their translations into a small functional language, *Lam*, in the spirit
of the For2Lam task of Chen, Liu and Song (ICLR 2018) on which Shiv & Quirk (NeurIPS 2019,
section 5.1.1) evaluate tree-to-tree transformers.

A For program is a list of statements ending in ``return E``::

    S := x = E ;                                  assignment
       | if C then S* else S* endif               conditional
       | for x = E to E do S* endfor              counted loop
    E := x | n | E + E | E - E                    C := E < E | E == E | E > E

Its Lam translation is syntax-directed, each statement taking the translation of what follows
it as its continuation ``k``::

    T([], return e)            = e
    T(x = e ; rest)            = Let x e T(rest)
    T(if c then A else B ; rest) = If c T(A ; rest) T(B ; rest)
    T(for x = a to b do B ; rest) = LetRec loop x (If (Lt x b) T(B ; loop (x + 1)) T(rest)) (App loop a)

so the translation reorders, nests and duplicates subtrees: the continuation ``rest`` is copied
into both branches of a conditional and into the exit branch of a loop. A loop body ends with the
call ``App loop (Plus x 1)``; nested loops call their own ``loop`` (the name is the same: Lam is
read with lexical scope). Both sides are :class:`Tree` s in this project's normal form: the source
tree's leaves are the For tokens (keywords included), the target tree's leaves the Lam variables,
numbers and ``loop``; every node has at least two children, so no node is collapsed.

Pure Python; no fairseq here.
"""

import random
from dataclasses import dataclass

from tree_fairseq.trees.bracketed import RawTree
from tree_fairseq.trees.tree import Tree, normalize

VARIABLES = ("a", "b", "c", "d", "x", "y")
NUMBERS = tuple(str(n) for n in range(10))
COMPARISONS = {"<": "Lt", "==": "Eq", ">": "Gt"}
OPERATORS = {"+": "Plus", "-": "Minus"}


@dataclass(frozen=True)
class Sizes:
    """Bounds of the generator: expression depth, statements per block, nesting of blocks. The
    defaults give small programs (about 19 For tokens and 17 Lam symbols on average)."""

    expression_depth: int = 1
    block_statements: int = 2
    nesting: int = 1


def _node(label: str, *children) -> RawTree:
    return RawTree(label, [c if isinstance(c, RawTree) else RawTree(c) for c in children])


def random_expression(rng: random.Random, depth: int) -> tuple:
    """``("var", x)``, ``("num", n)`` or ``(op, left, right)``."""
    if depth <= 0 or rng.random() < 0.5:
        return ("var", rng.choice(VARIABLES)) if rng.random() < 0.5 else ("num", rng.choice(NUMBERS))
    return (rng.choice(tuple(OPERATORS)), random_expression(rng, depth - 1), random_expression(rng, depth - 1))


def random_block(rng: random.Random, sizes: Sizes, nesting: int) -> list[tuple]:
    """One to ``sizes.block_statements`` statements: ``("assign", x, e)``,
    ``("if", (cmp, e, e), then, else)``, ``("for", x, e, e, body)``."""
    statements = []
    for _ in range(rng.randint(1, sizes.block_statements)):
        kind = rng.random()
        if nesting > 0 and kind < 0.2:
            condition = (rng.choice(tuple(COMPARISONS)), random_expression(rng, 1), random_expression(rng, 1))
            statements.append(("if", condition, random_block(rng, sizes, nesting - 1),
                               random_block(rng, sizes, nesting - 1)))
        elif nesting > 0 and kind < 0.35:
            statements.append(("for", rng.choice(VARIABLES), random_expression(rng, 1), random_expression(rng, 1),
                               random_block(rng, sizes, nesting - 1)))
        else:
            statements.append(("assign", rng.choice(VARIABLES), random_expression(rng, sizes.expression_depth)))
    return statements


def random_program(rng: random.Random, sizes: Sizes = Sizes()) -> tuple[list[tuple], tuple]:
    """A For program: its statements and the returned expression."""
    return random_block(rng, sizes, sizes.nesting), random_expression(rng, 1)


# The For side: a parse tree over the program's tokens


def _for_expression(e: tuple):
    if e[0] in ("var", "num"):
        return e[1]
    return _node("Op", _for_expression(e[1]), e[0], _for_expression(e[2]))


def _for_block(statements: list[tuple]) -> list[RawTree]:
    return [_for_statement(s) for s in statements]


def _for_statement(s: tuple) -> RawTree:
    if s[0] == "assign":
        return _node("Assign", s[1], "=", _for_expression(s[2]), ";")
    if s[0] == "if":
        comparison, left, right = s[1]
        condition = _node("Cond", _for_expression(left), comparison, _for_expression(right))
        return _node("If", "if", condition, "then", _node("Block", *_for_block(s[2]), "else"),
                     _node("Block", *_for_block(s[3]), "endif"))
    _, variable, start, end, body = s
    return _node("For", "for", variable, "=", _for_expression(start), "to", _for_expression(end), "do",
                 _node("Block", *_for_block(body), "endfor"))


def for_tree(program: tuple[list[tuple], tuple]) -> Tree:
    """The For program's parse tree (leaves: its tokens). A block's closing keyword sits inside
    the block's node, so that a block of one statement still has two children."""
    statements, result = program
    return normalize([_node("Program", *_for_block(statements), _node("Return", "return", _for_expression(result)))])


# The Lam side


def _lam_expression(e: tuple):
    if e[0] in ("var", "num"):
        return e[1]
    return _node(OPERATORS[e[0]], _lam_expression(e[1]), _lam_expression(e[2]))


def _lam(statements: list[tuple], continuation):
    """``T(statements ; continuation)``; ``continuation`` is a Lam tree or word (the
    translation of what follows)."""
    if not statements:
        return continuation
    s, rest = statements[0], statements[1:]
    if s[0] == "assign":
        return _node("Let", s[1], _lam_expression(s[2]), _lam(rest, continuation))
    after = _lam(rest, continuation)
    if s[0] == "if":
        comparison, left, right = s[1]
        condition = _node(COMPARISONS[comparison], _lam_expression(left), _lam_expression(right))
        return _node("If", condition, _lam(s[2], after), _lam(s[3], after))
    _, variable, start, end, body = s
    again = _node("App", "loop", _node("Plus", variable, "1"))
    step = _node("If", _node("Lt", variable, _lam_expression(end)), _lam(body, again), after)
    return _node("LetRec", "loop", variable, step, _node("App", "loop", _lam_expression(start)))


def lam_tree(program: tuple[list[tuple], tuple]) -> Tree:
    """The Lam translation of a For program."""
    statements, result = program
    translated = _lam(statements, _lam_expression(result))
    return normalize([translated if isinstance(translated, RawTree) else RawTree(translated)])


def for2lam_pairs(seed: int, count: int, sizes: Sizes = Sizes()) -> list[tuple[Tree, Tree]]:
    """``count`` (For tree, Lam tree) pairs, the same for the same seed."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        program = random_program(rng, sizes)
        pairs.append((for_tree(program), lam_tree(program)))
    return pairs
