from tree_fairseq.tasks.tree_translation import TreeTranslationConfig, TreeTranslationTask

__all__ = ["TreeTranslationConfig", "TreeTranslationTask"]
