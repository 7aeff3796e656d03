"""Every parameter of every model family, and of each switch that removes a part of a model,
takes part in the loss: fairseq's default ``pytorch_ddp`` backend stops on a parameter without a
gradient (unless ``--find-unused-parameters``), and a parameter that never gets one is a part of
the model that does nothing."""

import pytest
import torch.nn.functional as F

from helpers import build, by_length, collate

pytestmark = pytest.mark.usefixtures("one_thread")

TRANSLATION_MODELS = [
    ("tree_transformer_tiny", ()),
    ("tree_transformer_tiny", ("--no-hier-embed",)),
    ("tree_transformer_tiny", ("--no-subtree-mask",)),
    ("tree_transformer_tiny", ("--no-tree-cross-attention", "--no-subtree-mask")),
    ("constituent_transformer_tiny", ()),
    ("treeformer_tiny", ()),
    ("treeformer_tiny", ("--chart-composition", "gelu_layernorm", "--chart-pooling", "vector")),
    ("tree_pe_transformer_tiny", ()),
    ("tree_composition_transformer_tiny", ()),
    ("tree_composition_transformer_tiny", ("--composition-leaves", "contextual", "--node-labels")),
    ("tree_composition_transformer_tiny", ("--composition-branch-residual", "head")),
    ("tree_composition_transformer_tiny", ("--composition-form", "residual_mean", "--composition-leaves", "contextual",
                                           "--node-labels")),
]


def parameters_without_gradient(model, sample) -> list[str]:
    model.train()
    model.zero_grad()
    logits, _ = model(**sample["net_input"])
    loss = F.cross_entropy(logits.flatten(0, 1), sample["target"].flatten(), ignore_index=model.decoder.dictionary.pad())
    loss.backward()
    return [
        name for name, parameter in model.named_parameters()
        if parameter.requires_grad and (parameter.grad is None or not parameter.grad.any())
    ]


@pytest.mark.parametrize("arch,flags", TRANSLATION_MODELS, ids=lambda value: " ".join(value) if isinstance(value, tuple) else value)
def test_every_parameter_gets_a_gradient(tiny_databin, arch, flags):
    task, model = build(tiny_databin, *flags, arch=arch)
    sample = collate(task, by_length(task)[-8:])
    assert parameters_without_gradient(model, sample) == []


def test_without_tree_cross_attention_the_subtree_mask_cuts_the_tree_off(tiny_databin):
    """The paper's subtree mask lets a leaf query see leaves only, so with fairseq's
    cross-attention over the leaves nothing of the tree reaches the decoder: the node-label
    embeddings and the accumulation's own weights get no gradient (and pytorch_ddp needs
    ``--find-unused-parameters``). Everything else does."""
    task, model = build(tiny_databin, "--no-tree-cross-attention", arch="tree_transformer_tiny")
    missing = parameters_without_gradient(model, collate(task, by_length(task)[-8:]))
    layers = range(len(model.encoder.layers))
    assert sorted(missing) == sorted(
        ["encoder.embed_node_labels.weight"]
        + [f"encoder.layers.{i}.self_attn.{name}" for i in layers
           for name in ("leaf_weight.weight", "hierarchical_embedding.vertical", "hierarchical_embedding.horizontal")]
    )
