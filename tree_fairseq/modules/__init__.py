"""The methods' mathematics as torch modules, one file per idea: tree attention and hierarchical
accumulation, constituent attention, parent-scaled attention, tree positional encodings, the
Treeformer's chart and attention composition, with the tree geometry they share. They import from
:mod:`tree_fairseq.trees` and torch only; the models wire them into fairseq."""
