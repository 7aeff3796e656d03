"""A tree as the tensors the data layer stores: node labels and inclusive leaf spans, bottom-up."""

from collections.abc import Callable

import torch

from tree_fairseq.trees.tree import Tree


def node_tensors(tree: Tree, label_index: Callable[[str], int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(labels, spans)``: labels ``(m,)`` from ``label_index``, spans ``(m, 2)``
    inclusive leaf indices, nodes bottom-up. The leaf count is ``len(tree.leaves)``."""
    labels = torch.tensor([label_index(node.label) for node in tree.nodes], dtype=torch.long)
    spans = torch.tensor([(node.start, node.end) for node in tree.nodes], dtype=torch.long)
    return labels, spans.view(-1, 2)
