"""Importing a task module registers its fairseq task."""

from tree_fairseq.tasks.constituent_masked_lm import ConstituentMaskedLMConfig, ConstituentMaskedLMTask
from tree_fairseq.tasks.tree_generation import (
    TreeGenerationConfig,
    TreeGenerationTask,
    TreeToTreeConfig,
    TreeToTreeTask,
)
from tree_fairseq.tasks.tree_translation import TreeTranslationConfig, TreeTranslationTask

__all__ = [
    "ConstituentMaskedLMConfig", "ConstituentMaskedLMTask", "TreeGenerationConfig", "TreeGenerationTask",
    "TreeToTreeConfig", "TreeToTreeTask", "TreeTranslationConfig", "TreeTranslationTask",
]
