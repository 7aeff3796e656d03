"""Sentences to trees: the parser back-ends (:mod:`.backends`: trivial trees, existing bracketed
or CoNLL-U output, stanza, spaCy) behind one interface (:mod:`.interface`), chosen by name with
:func:`make_parser`, and the record of which parser made a data-bin's trees (:mod:`.record`).

stanza and spaCy are imported only when their back-end is chosen (:mod:`.stanza_parser`,
:mod:`.spacy_parser`)."""

from tree_fairseq.parsing.backends import (
    PARSERS,
    BracketedParser,
    ConlluParser,
    TrivialParser,
    check_parser_options,
    make_parser,
)
from tree_fairseq.parsing.interface import ON_FAILURE, DependencyTrees, Failures, Parser
from tree_fairseq.trees import TRIVIAL_SHAPES

__all__ = [
    "ON_FAILURE", "PARSERS", "TRIVIAL_SHAPES", "BracketedParser", "ConlluParser", "DependencyTrees", "Failures",
    "Parser", "TrivialParser", "check_parser_options", "make_parser",
]
