"""Sentences to trees: the parser back-ends behind one interface (:mod:`.backends`: trivial
trees, existing bracketed or CoNLL-U output, stanza, spaCy), chosen by name with
:func:`make_parser`, and the record of which parser made a data-bin's trees (:mod:`.record`).

stanza and spaCy are imported only when their back-end is chosen (:mod:`.stanza_parser`,
:mod:`.spacy_parser`)."""

from tree_fairseq.parsing.backends import (
    ON_FAILURE,
    PARSERS,
    TRIVIAL_SHAPES,
    BracketedParser,
    ConlluParser,
    DependencyTrees,
    Failures,
    Parser,
    TrivialParser,
    check_parser_options,
    make_parser,
)

__all__ = [
    "ON_FAILURE", "PARSERS", "TRIVIAL_SHAPES", "BracketedParser", "ConlluParser", "DependencyTrees", "Failures",
    "Parser", "TrivialParser", "check_parser_options", "make_parser",
]
