"""Importing a task module registers its fairseq task."""

from tree_fairseq.tasks.constituent_masked_lm import ConstituentMaskedLMConfig, ConstituentMaskedLMTask
from tree_fairseq.tasks.dependency_translation import DependencyTranslationConfig, DependencyTranslationTask
from tree_fairseq.tasks.tree_generation import (
    TreeGenerationConfig,
    TreeGenerationTask,
    TreeToTreeConfig,
    TreeToTreeTask,
)
from tree_fairseq.tasks.tree_translation import TreeTranslationConfig, TreeTranslationTask

__all__ = [
    "ConstituentMaskedLMConfig", "ConstituentMaskedLMTask", "DependencyTranslationConfig", "DependencyTranslationTask",
    "TreeGenerationConfig", "TreeGenerationTask",
    "TreeToTreeConfig", "TreeToTreeTask", "TreeTranslationConfig", "TreeTranslationTask",
]
