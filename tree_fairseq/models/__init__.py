from tree_fairseq.models.tree_transformer import TreeTransformerModel  # noqa: F401  (registers tree_transformer)
