"""Source trees: reading, normal form, alignment to corpus tokens, subword
subtrees, trivial trees and tensors. Pure Python (torch only for ``node_tensors``,
imported when first asked for); no fairseq here."""

from tree_fairseq.trees.align import align, canonical, tree_over_tokens, unescape
from tree_fairseq.trees.bracketed import RawTree, TreeError, located, read_bracketed
from tree_fairseq.trees.subwords import (
    SUBWORD_FORMATS, SUBWORD_LABEL, SUBWORD_LABELS, dictionary_subword_format, expand_subwords, group_pieces,
    remove_subwords, spelling, subword_marks,
)
from tree_fairseq.trees.tree import Node, Tree, normalize, parse_tree
from tree_fairseq.trees.trivial import TRIVIAL_SHAPES, trivial_tree

__all__ = [
    "Node", "RawTree", "SUBWORD_FORMATS", "SUBWORD_LABEL", "SUBWORD_LABELS", "TRIVIAL_SHAPES", "Tree", "TreeError",
    "align", "canonical", "dictionary_subword_format", "expand_subwords", "group_pieces", "located", "node_tensors",
    "normalize", "parse_tree", "read_bracketed", "remove_subwords", "spelling", "subword_marks", "tree_over_tokens",
    "trivial_tree", "unescape",
]


def __getattr__(name: str):
    # node_tensors needs torch: imported on first use, so that parsing and reading trees do not.
    if name == "node_tensors":
        from tree_fairseq.trees.tensors import node_tensors
        return node_tensors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
