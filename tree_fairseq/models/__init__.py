"""Importing a model module registers its fairseq model and architectures."""

from tree_fairseq.models.constituent_transformer import ConstituentEncoderLM, ConstituentTransformerModel
from tree_fairseq.models.pascal_transformer import PascalTransformerModel
from tree_fairseq.models.tree_composition_transformer import TreeCompositionTransformerModel
from tree_fairseq.models.tree_pe_transformer import TreePEParserModel, TreePETransformerModel
from tree_fairseq.models.tree_transformer import TreeTransformerModel
from tree_fairseq.models.treeformer import TreeformerModel

__all__ = [
    "ConstituentEncoderLM", "ConstituentTransformerModel", "PascalTransformerModel", "TreeCompositionTransformerModel",
    "TreePEParserModel", "TreePETransformerModel", "TreeTransformerModel", "TreeformerModel",
]
