"""fairseq datasets that carry source trees next to the text."""

from tree_fairseq.data.tree_pair_dataset import TreePairDataset, collate_trees
from tree_fairseq.data.tree_streams import (
    TreeStreamWriter,
    keep_node_dictionary,
    load_node_dictionary,
    load_tree_streams,
    node_dictionary_path,
    tree_stream_prefix,
)

__all__ = [
    "TreePairDataset", "TreeStreamWriter", "collate_trees", "keep_node_dictionary", "load_node_dictionary", "load_tree_streams",
    "node_dictionary_path", "tree_stream_prefix",
]
